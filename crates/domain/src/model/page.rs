use serde::Serialize;

/// A validated page request: `page >= 1`, `1 <= page_size <= 100`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageRequest {
    page: u32,
    page_size: u32,
}

/// Why a page request was refused; the message names the parameter.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PageRequestError {
    /// `page` is below 1.
    #[error("page must be at least 1")]
    Page,
    /// `page_size` is below 1 or above [`PageRequest::MAX_SIZE`].
    #[error("page_size must be between 1 and 100")]
    PageSize,
}

impl PageRequest {
    /// The page size when none is asked for.
    pub const DEFAULT_SIZE: u32 = 20;
    /// The largest page size accepted.
    pub const MAX_SIZE: u32 = 100;

    /// Checks the query's `page` and `page_size`; a missing `page` is 1, a missing
    /// `page_size` is [`Self::DEFAULT_SIZE`].
    pub fn new(page: Option<i64>, page_size: Option<i64>) -> Result<Self, PageRequestError> {
        let page = page.unwrap_or(1);
        let page_size = page_size.unwrap_or(i64::from(Self::DEFAULT_SIZE));
        let page = u32::try_from(page)
            .ok()
            .filter(|p| *p >= 1)
            .ok_or(PageRequestError::Page)?;
        let page_size = u32::try_from(page_size)
            .ok()
            .filter(|s| (1..=Self::MAX_SIZE).contains(s))
            .ok_or(PageRequestError::PageSize)?;
        Ok(Self { page, page_size })
    }

    /// The page asked for, from 1.
    pub const fn page(&self) -> u32 {
        self.page
    }

    /// The most items on a page, 1 to 100.
    pub const fn page_size(&self) -> u32 {
        self.page_size
    }

    /// How many items come before the page: the query's `OFFSET`.
    pub fn offset(&self) -> i64 {
        (i64::from(self.page) - 1) * i64::from(self.page_size)
    }

    /// The page size, as the query's `LIMIT`.
    pub fn limit(&self) -> i64 {
        i64::from(self.page_size)
    }
}

impl PageRequest {
    /// The part of this page that falls among a listing's rows after its first `skipped`
    /// items, which come from elsewhere (the four built-in roles before an organization's
    /// custom ones): where it starts among those rows and how many of them it holds (none when
    /// the page ends within the first `skipped`).
    pub fn after(&self, skipped: u32) -> Slice {
        let offset = self.offset() - i64::from(skipped);
        Slice {
            offset: offset.max(0),
            limit: (self.limit() + offset.min(0)).max(0),
        }
    }
}

/// A run of a listing's rows, for a store query: how many to skip (`OFFSET`) and how many to
/// read at most (`LIMIT`). A [`PageRequest`] is one; [`PageRequest::after`] gives others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Slice {
    offset: i64,
    limit: i64,
}

impl Slice {
    /// `limit` rows after the first `offset` (a negative one is 0).
    pub fn new(offset: i64, limit: i64) -> Self {
        Self {
            offset: offset.max(0),
            limit: limit.max(0),
        }
    }

    /// How many rows come before the slice.
    pub const fn offset(&self) -> i64 {
        self.offset
    }

    /// The most rows in the slice (possibly none).
    pub const fn limit(&self) -> i64 {
        self.limit
    }
}

impl From<PageRequest> for Slice {
    fn from(page: PageRequest) -> Self {
        Self {
            offset: page.offset(),
            limit: page.limit(),
        }
    }
}

impl Default for PageRequest {
    fn default() -> Self {
        Self {
            page: 1,
            page_size: Self::DEFAULT_SIZE,
        }
    }
}

/// The spec's pagination envelope. Its fields are private: [`Page::new`] derives the page,
/// its size and both flags from the request and the total, so they always agree.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Page<T> {
    /// The items on this page, at most `page_size`; empty past the last page.
    items: Vec<T>,
    /// How many items match, on all pages together.
    total: u64,
    /// The page number, from 1.
    page: u32,
    /// The most items on a page, as requested.
    page_size: u32,
    /// Whether items match beyond this page.
    has_next: bool,
    /// Whether this is not the first page.
    has_prev: bool,
}

impl<T> Page<T> {
    /// The envelope of `items`, the requested page of `total` matching items.
    pub fn new(items: Vec<T>, total: u64, request: PageRequest) -> Self {
        let seen = u64::from(request.page) * u64::from(request.page_size);
        Self {
            items,
            total,
            page: request.page,
            page_size: request.page_size,
            has_next: seen < total,
            has_prev: request.page > 1,
        }
    }

    /// The requested page of a whole list held in memory, in its order. Only for a list that a
    /// hard cap keeps short (an organization's domains, service accounts or SCIM tokens, a
    /// fixed catalogue); a list that can grow without bound is paged by its store query.
    pub fn of_all(all: Vec<T>, request: PageRequest) -> Self {
        let total = u64::try_from(all.len()).unwrap_or(u64::MAX);
        let skip = usize::try_from(request.offset()).unwrap_or(usize::MAX);
        let take = usize::try_from(request.limit()).unwrap_or(0);
        let items = all.into_iter().skip(skip).take(take).collect();
        Self::new(items, total, request)
    }

    /// The items on this page.
    pub fn items(&self) -> &[T] {
        &self.items
    }

    /// The items on this page, owned.
    pub fn into_items(self) -> Vec<T> {
        self.items
    }

    /// How many items match, on all pages together.
    pub fn total(&self) -> u64 {
        self.total
    }

    /// The page number, from 1.
    pub fn page(&self) -> u32 {
        self.page
    }

    /// The most items on a page, as requested.
    pub fn page_size(&self) -> u32 {
        self.page_size
    }

    /// Whether items match beyond this page.
    pub fn has_next(&self) -> bool {
        self.has_next
    }

    /// Whether this is not the first page.
    pub fn has_prev(&self) -> bool {
        self.has_prev
    }

    /// The same page with each item converted by `f`.
    pub fn map<U>(self, f: impl FnMut(T) -> U) -> Page<U> {
        Page {
            items: self.items.into_iter().map(f).collect(),
            total: self.total,
            page: self.page,
            page_size: self.page_size,
            has_next: self.has_next,
            has_prev: self.has_prev,
        }
    }
}

/// A list's free-text filter (`search`): a case-insensitive part of a name or email, as sent
/// once trimmed and cut to [`SearchTerm::MAX_CHARS`] characters. No control character: no name
/// or email holds one, and PostgreSQL refuses a NUL in any text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SearchTerm(String);

/// Why a search was refused; the message completes "search ...".
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SearchTermError {
    /// A control character (a NUL, a line break, ...).
    #[error("must not contain control characters")]
    ControlCharacter,
}

impl SearchTerm {
    /// The most characters (not bytes) searched for; the rest of a longer search is dropped.
    pub const MAX_CHARS: usize = 100;

    /// The term in `raw`: `None` when nothing is left once trimmed (no filter).
    pub fn parse(raw: &str) -> Result<Option<Self>, SearchTermError> {
        let text: String = raw.trim().chars().take(Self::MAX_CHARS).collect();
        if text.chars().any(char::is_control) {
            return Err(SearchTermError::ControlCharacter);
        }
        Ok((!text.is_empty()).then_some(Self(text)))
    }

    /// The term, as sent.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn search_terms() {
        let term = |raw: &str| SearchTerm::parse(raw).map(|t| t.map(|t| t.0));
        assert_eq!(term("  Acme "), Ok(Some("Acme".to_owned())));
        assert_eq!(term("   "), Ok(None));
        assert_eq!(term(&"é".repeat(150)), Ok(Some("é".repeat(100))));
        assert_eq!(term("a\0b"), Err(SearchTermError::ControlCharacter));
        assert_eq!(term("a\nb"), Err(SearchTermError::ControlCharacter));
        // A control character past the first 100 is dropped with the rest, not refused.
        assert_eq!(
            term(&format!("{}\0", "a".repeat(100))),
            Ok(Some("a".repeat(100)))
        );
    }

    #[test]
    fn bounds() {
        assert_eq!(PageRequest::new(None, None), Ok(PageRequest::default()));
        assert_eq!(PageRequest::new(Some(0), None), Err(PageRequestError::Page));
        assert_eq!(
            PageRequest::new(None, Some(0)),
            Err(PageRequestError::PageSize)
        );
        assert_eq!(
            PageRequest::new(None, Some(101)),
            Err(PageRequestError::PageSize)
        );
        assert_eq!(
            PageRequest::new(Some(3), Some(100)).map(|p| p.offset()),
            Ok(200)
        );
    }

    #[test]
    fn a_whole_list_is_paged_in_memory() {
        let all: Vec<u32> = (1..=25).collect();
        let second = Page::of_all(all.clone(), PageRequest::new(Some(2), Some(10)).unwrap());
        assert_eq!(second.items(), (11..=20).collect::<Vec<_>>().as_slice());
        assert!(second.has_next() && second.has_prev() && second.total() == 25);
        let past_end = Page::of_all(all, PageRequest::new(Some(4_000_000), Some(100)).unwrap());
        assert!(past_end.items().is_empty() && past_end.total() == 25 && !past_end.has_next());
    }

    #[test]
    fn a_slice_after_items_from_elsewhere() {
        let slice = |page, size, skipped| {
            let s = PageRequest::new(Some(page), Some(size))
                .unwrap()
                .after(skipped);
            (s.offset(), s.limit())
        };
        // Four built-in roles, then the custom ones.
        assert_eq!(slice(1, 20, 4), (0, 16));
        assert_eq!(slice(1, 2, 4), (0, 0));
        assert_eq!(slice(2, 2, 4), (0, 0));
        assert_eq!(slice(3, 2, 4), (0, 2));
        assert_eq!(slice(2, 3, 4), (0, 2));
        assert_eq!(slice(4, 3, 4), (5, 3));
        assert_eq!(slice(1, 20, 0), (0, 20));
    }

    #[test]
    fn envelope_flags() {
        let request = PageRequest::new(Some(2), Some(10)).unwrap();
        let page = Page::new(vec![1; 10], 25, request);
        assert!(page.has_next && page.has_prev);
        let last = Page::new(vec![1; 5], 25, PageRequest::new(Some(3), Some(10)).unwrap());
        assert!(!last.has_next);
        let past_end = Page::<u8>::new(vec![], 25, PageRequest::new(Some(9), Some(10)).unwrap());
        assert!(!past_end.has_next && past_end.items.is_empty() && past_end.total == 25);
    }
}

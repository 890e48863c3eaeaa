use serde::Serialize;

/// A validated page request: `page >= 1`, `1 <= page_size <= 100`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PageRequest {
    page: u32,
    page_size: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PageRequestError {
    #[error("page must be at least 1")]
    Page,
    #[error("page_size must be between 1 and 100")]
    PageSize,
}

impl PageRequest {
    pub const DEFAULT_SIZE: u32 = 20;
    pub const MAX_SIZE: u32 = 100;

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

    pub const fn page(&self) -> u32 {
        self.page
    }

    pub const fn page_size(&self) -> u32 {
        self.page_size
    }

    pub fn offset(&self) -> i64 {
        (i64::from(self.page) - 1) * i64::from(self.page_size)
    }

    pub fn limit(&self) -> i64 {
        i64::from(self.page_size)
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

/// The spec's pagination envelope.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Page<T> {
    pub items: Vec<T>,
    pub total: u64,
    pub page: u32,
    pub page_size: u32,
    pub has_next: bool,
    pub has_prev: bool,
}

impl<T> Page<T> {
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

#[cfg(test)]
mod tests {
    use super::*;

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

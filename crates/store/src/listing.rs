//! Pure helpers of the list queries, shared by both backends.

use diesel::sql_types::Text;

diesel::define_sql_function! {
    /// SQL `lower(text)`: both backends have it.
    fn lower(x: Text) -> Text;
}

/// A `LIKE` pattern (escape character `\`) that matches any text containing `search`:
/// `%`, `_` and `\` in the search stand for themselves.
pub(crate) fn contains_pattern(search: &str) -> String {
    let mut pattern = String::with_capacity(search.len() + 2);
    pattern.push('%');
    for c in search.chars() {
        if matches!(c, '%' | '_' | '\\') {
            pattern.push('\\');
        }
        pattern.push(c);
    }
    pattern.push('%');
    pattern
}

/// Whether the page starts at or after the last of `total` matching rows: then it is empty, and
/// the listing answers it from its count alone, without the page's query. That query would
/// walk every matching row to reach its `OFFSET` (`page=4294967295` walked the whole collection
/// for nothing), so a page past the end costs no more than the count. A slice of no rows (a
/// page that the built-in roles fill) reads none either.
pub(crate) fn past_the_end(slice: impl Into<gatehouse_domain::model::Slice>, total: i64) -> bool {
    let slice = slice.into();
    slice.limit() == 0 || slice.offset() >= total
}

/// Which rows a query reads for a slice of `limit` rows at `offset` of a listing's `total`: a
/// deep `OFFSET` walks every row before it, so a slice nearer the end is read in the reverse
/// order from the end (`reversed`: the query orders the other way, and the rows it returns are
/// reversed). The deepest page then costs what the first does, and no page walks more than half
/// the listing. Only for a slice that starts before the end (see [`past_the_end`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Window {
    pub offset: i64,
    pub limit: i64,
    pub reversed: bool,
}

pub(crate) fn window(offset: i64, limit: i64, total: i64) -> Window {
    let after = total.saturating_sub(offset).saturating_sub(limit);
    if after < offset && offset > 0 {
        // The slice holds the last `total - offset` rows when it runs past the end.
        let (offset, limit) = if after < 0 {
            (0, total.saturating_sub(offset).max(0))
        } else {
            (after, limit)
        };
        Window {
            offset,
            limit,
            reversed: true,
        }
    } else {
        Window {
            offset,
            limit,
            reversed: false,
        }
    }
}

impl Window {
    /// The rows the query read, in the listing's order.
    pub(crate) fn in_order<T>(self, mut rows: Vec<T>) -> Vec<T> {
        if self.reversed {
            rows.reverse();
        }
        rows
    }
}

/// `rows` in the order of `keys` (the page's keys, read first, in the listing's order): the
/// second step of a page read by its keys, whose query selects by key without an order. Rows
/// whose key is not among `keys` are left out.
pub(crate) fn in_key_order<K: PartialEq, T>(
    keys: &[K],
    rows: Vec<T>,
    key: impl Fn(&T) -> &K,
) -> Vec<T> {
    let mut placed: Vec<(usize, T)> = rows
        .into_iter()
        .filter_map(|row| {
            let at = keys.iter().position(|k| k == key(&row))?;
            Some((at, row))
        })
        .collect();
    placed.sort_by_key(|(at, _)| *at);
    placed.into_iter().map(|(_, row)| row).collect()
}

/// A slice of one source of rows: `offset` and `limit` as SQL takes them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Slice {
    pub offset: i64,
    pub limit: i64,
}

/// Which rows of two sources listed one after the other (`first_total` rows, then the second
/// source's) a page of `limit` rows at `offset` covers: a slice of the first source, a slice of
/// the second, or both.
pub(crate) fn split_page(
    offset: i64,
    limit: i64,
    first_total: i64,
) -> (Option<Slice>, Option<Slice>) {
    if offset < first_total {
        let from_first = limit.min(first_total - offset);
        let rest = limit - from_first;
        let first = Slice {
            offset,
            limit: from_first,
        };
        let second = (rest > 0).then_some(Slice {
            offset: 0,
            limit: rest,
        });
        (Some(first), second)
    } else {
        let second = Slice {
            offset: offset - first_total,
            limit,
        };
        (None, Some(second))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use gatehouse_domain::model::PageRequest;

    const fn slice(offset: i64, limit: i64) -> Option<Slice> {
        Some(Slice { offset, limit })
    }

    #[test]
    fn pages_within_the_first_source_take_only_from_it() {
        assert_eq!(split_page(0, 2, 3), (slice(0, 2), None));
        assert_eq!(split_page(0, 3, 3), (slice(0, 3), None));
    }

    #[test]
    fn a_page_across_the_boundary_takes_from_both() {
        assert_eq!(split_page(2, 2, 3), (slice(2, 1), slice(0, 1)));
        assert_eq!(split_page(0, 20, 3), (slice(0, 3), slice(0, 17)));
    }

    #[test]
    fn pages_past_the_first_source_take_only_from_the_second() {
        assert_eq!(split_page(4, 2, 3), (None, slice(1, 2)));
        assert_eq!(split_page(3, 2, 3), (None, slice(0, 2)));
        assert_eq!(split_page(0, 2, 0), (None, slice(0, 2)));
        assert_eq!(split_page(40, 20, 3), (None, slice(37, 20)));
    }

    #[test]
    fn pages_from_the_total_on_are_past_the_end() {
        let request = |page, size| PageRequest::new(Some(page), Some(size)).unwrap();
        assert!(!past_the_end(request(1, 20), 1));
        assert!(past_the_end(request(1, 20), 0));
        assert!(!past_the_end(request(5, 20), 81));
        assert!(past_the_end(request(5, 20), 80));
        let deepest = request(i64::from(u32::MAX), i64::from(PageRequest::MAX_SIZE));
        assert_eq!(deepest.offset(), (i64::from(u32::MAX) - 1) * 100);
        assert!(past_the_end(deepest, i64::from(u32::MAX)));
    }

    const fn forward(offset: i64, limit: i64) -> Window {
        Window {
            offset,
            limit,
            reversed: false,
        }
    }

    const fn backward(offset: i64, limit: i64) -> Window {
        Window {
            offset,
            limit,
            reversed: true,
        }
    }

    #[test]
    fn slices_in_the_first_half_are_read_forward() {
        assert_eq!(window(0, 100, 100_000), forward(0, 100));
        assert_eq!(window(49_900, 100, 100_000), forward(49_900, 100));
        assert_eq!(window(0, 20, 5), forward(0, 20));
    }

    #[test]
    fn slices_in_the_second_half_are_read_backward_from_the_end() {
        assert_eq!(window(50_000, 100, 100_000), backward(49_900, 100));
        assert_eq!(window(99_900, 100, 100_000), backward(0, 100));
        // The last page, not full: only the rows that are there.
        assert_eq!(window(100_000, 100, 100_001), backward(0, 1));
        assert_eq!(window(4, 2, 5), backward(0, 1));
        assert_eq!(window(2, 2, 5), backward(1, 2));
    }

    #[test]
    fn a_backward_read_is_put_back_in_order() {
        assert_eq!(backward(0, 3).in_order(vec![3, 2, 1]), [1, 2, 3]);
        assert_eq!(forward(0, 3).in_order(vec![1, 2, 3]), [1, 2, 3]);
    }

    #[test]
    fn rows_read_by_key_follow_the_keys() {
        let rows = vec![(3, "c"), (1, "a"), (9, "gone"), (2, "b")];
        let ordered = in_key_order(&[1, 2, 3], rows, |row| &row.0);
        assert_eq!(ordered, [(1, "a"), (2, "b"), (3, "c")]);
    }

    #[test]
    fn search_patterns_escape_wildcards() {
        assert_eq!(contains_pattern("acme"), "%acme%");
        assert_eq!(contains_pattern("50%_off\\"), "%50\\%\\_off\\\\%");
        assert_eq!(contains_pattern(""), "%%");
    }
}

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
    fn search_patterns_escape_wildcards() {
        assert_eq!(contains_pattern("acme"), "%acme%");
        assert_eq!(contains_pattern("50%_off\\"), "%50\\%\\_off\\\\%");
        assert_eq!(contains_pattern(""), "%%");
    }
}

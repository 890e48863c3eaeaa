//! Timestamps on the wire: RFC 3339 in UTC with a `Z`, and as many fraction digits as the value
//! needs in groups of three (none, milliseconds, microseconds or nanoseconds).
//!
//! Every timestamp the API returns and every webhook payload carries is written this way, so a
//! client sees `2026-11-25T10:00:00Z` or `2026-11-25T10:00:00.123456Z`, never an offset other
//! than `Z`. Parsing accepts any RFC 3339 timestamp and converts it to UTC.
//!
//! Use it on a field with `#[serde(with = "gatehouse_domain::model::timestamp")]`, or
//! `timestamp::option` for an `Option<OffsetDateTime>`.

use serde::{Deserialize, Deserializer, Serializer};
use time::format_description::well_known::Rfc3339;
use time::format_description::BorrowedFormatItem;
use time::macros::format_description;
use time::{OffsetDateTime, UtcOffset};

const WHOLE: &[BorrowedFormatItem<'_>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second]Z");
const MILLIS: &[BorrowedFormatItem<'_>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:3]Z");
const MICROS: &[BorrowedFormatItem<'_>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:6]Z");
const NANOS: &[BorrowedFormatItem<'_>] =
    format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:9]Z");

/// `at` in UTC as RFC 3339, with the fraction digits it needs (0, 3, 6 or 9).
///
/// ```
/// use time::macros::datetime;
/// use gatehouse_domain::model::timestamp::format;
///
/// assert_eq!(format(datetime!(2026-11-25 10:00:00 UTC)), "2026-11-25T10:00:00Z");
/// assert_eq!(format(datetime!(2026-11-25 11:00:00.1234 +01:00)), "2026-11-25T10:00:00.123400Z");
/// ```
pub fn format(at: OffsetDateTime) -> String {
    let at = at.to_offset(UtcOffset::UTC);
    let nanos = at.nanosecond();
    let items = if nanos == 0 {
        WHOLE
    } else if nanos.is_multiple_of(1_000_000) {
        MILLIS
    } else if nanos.is_multiple_of(1_000) {
        MICROS
    } else {
        NANOS
    };
    // Formatting a UTC date-time into a String fails only for years beyond four digits, which
    // `time` cannot hold without its `large-dates` feature; RFC 3339 is the fallback regardless.
    at.format(items)
        .or_else(|_| at.format(&Rfc3339))
        .unwrap_or_default()
}

/// An RFC 3339 timestamp with any offset, as UTC.
pub fn parse(text: &str) -> Result<OffsetDateTime, time::error::Parse> {
    OffsetDateTime::parse(text, &Rfc3339).map(|at| at.to_offset(UtcOffset::UTC))
}

/// Serializes with [`format`](fn@format).
pub fn serialize<S: Serializer>(at: &OffsetDateTime, serializer: S) -> Result<S::Ok, S::Error> {
    serializer.serialize_str(&format(*at))
}

/// Deserializes with [`parse`].
pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<OffsetDateTime, D::Error> {
    let text = <std::borrow::Cow<'de, str>>::deserialize(deserializer)?;
    parse(&text).map_err(serde::de::Error::custom)
}

/// The same for `Option<OffsetDateTime>`: `None` is `null`.
pub mod option {
    use serde::{Deserialize, Deserializer, Serializer};
    use time::OffsetDateTime;

    /// Serializes `Some` with [`format`](fn@super::format) and `None` as `null`.
    pub fn serialize<S: Serializer>(
        at: &Option<OffsetDateTime>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match at {
            Some(at) => serializer.serialize_some(&super::format(*at)),
            None => serializer.serialize_none(),
        }
    }

    /// Deserializes `null` as `None` and a string with [`super::parse`].
    pub fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<OffsetDateTime>, D::Error> {
        Option::<std::borrow::Cow<'de, str>>::deserialize(deserializer)?
            .map(|text| super::parse(&text).map_err(serde::de::Error::custom))
            .transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::macros::datetime;

    #[test]
    fn fraction_digits_come_in_groups_of_three() {
        let at = datetime!(2026-11-25 10:00:00 UTC);
        assert_eq!(format(at), "2026-11-25T10:00:00Z");
        assert_eq!(
            format(at + time::Duration::milliseconds(120)),
            "2026-11-25T10:00:00.120Z"
        );
        assert_eq!(
            format(at + time::Duration::microseconds(5)),
            "2026-11-25T10:00:00.000005Z"
        );
        assert_eq!(
            format(at + time::Duration::nanoseconds(7)),
            "2026-11-25T10:00:00.000000007Z"
        );
    }

    #[test]
    fn parsing_accepts_any_offset_and_gives_utc() {
        let at = parse("2026-11-25T12:30:00.5+02:30").unwrap();
        assert_eq!(at, datetime!(2026-11-25 10:00:00.5 UTC));
        assert_eq!(at.offset(), UtcOffset::UTC);
        // A space where RFC 3339 puts `T`, and no seconds: a literal out of place.
        let refused = parse("2026-11-25 10:00");
        assert!(
            matches!(
                refused,
                Err(time::error::Parse::ParseFromDescription(
                    time::error::ParseFromDescription::InvalidLiteral { .. }
                ))
            ),
            "{refused:?}"
        );
    }

    #[test]
    fn serde_round_trips_and_null_is_none() {
        #[derive(serde::Serialize, serde::Deserialize, PartialEq, Debug)]
        struct Row {
            #[serde(with = "super")]
            at: OffsetDateTime,
            #[serde(with = "super::option")]
            gone: Option<OffsetDateTime>,
        }
        let row = Row {
            at: datetime!(2026-11-25 10:00:00.000001 UTC),
            gone: None,
        };
        let json = serde_json::to_string(&row).unwrap();
        assert_eq!(json, r#"{"at":"2026-11-25T10:00:00.000001Z","gone":null}"#);
        assert_eq!(serde_json::from_str::<Row>(&json).unwrap(), row);
    }
}

//! What a listing of a directory asks for: which users or groups ([`DirectorySelection`]), and
//! which slice of them ([`DirectoryWindow`]), in the directory's order (oldest first, then by
//! id).
//!
//! A filter the store answers with its indexes is a [`DirectoryFilter`]: comparisons of
//! `userName`, `externalId`, `displayName`, a user's addresses and `id` with a text, combined
//! with `and` and `or`. Any other is a [`ResourceCheck`], applied to each resource in turn: the
//! directory is read in batches of [`DIRECTORY_BATCH`], so that what a listing holds at once is
//! its page and one batch, never the directory.

use std::{fmt, sync::Arc};

use time::OffsetDateTime;
use uuid::Uuid;

/// How many resources a listing whose filter the store cannot answer reads at a time.
pub const DIRECTORY_BATCH: u32 = 500;

/// A text attribute of directory resources that the store compares with its indexes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DirectoryAttribute {
    /// A user's `userName`, without case.
    UserName,
    /// `externalId` (users and groups), with case.
    ExternalId,
    /// `displayName` (users and groups), without case.
    DisplayName,
    /// One of a user's addresses (`emails.value`), without case.
    Email,
}

impl DirectoryAttribute {
    /// Whether values compare with case (SCIM's `caseExact`): `externalId` only.
    pub const fn case_exact(self) -> bool {
        matches!(self, Self::ExternalId)
    }

    /// The value as the store keeps it for comparisons: lowercase (Unicode's full mapping, as
    /// `str::to_lowercase`), unless the attribute compares with case.
    pub fn key(self, value: &str) -> String {
        if self.case_exact() {
            value.to_owned()
        } else {
            value.to_lowercase()
        }
    }
}

/// How an attribute's value compares with a text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TextMatch {
    /// The same text (`eq`).
    Equals,
    /// Starts with the text (`sw`).
    StartsWith,
    /// Holds the text (`co`).
    Contains,
}

/// An attribute compared with a text. The text is kept as the attribute compares
/// ([`DirectoryAttribute::key`]): a store compares it with its keys as it is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Comparison {
    attribute: DirectoryAttribute,
    how: TextMatch,
    operand: String,
}

impl Comparison {
    /// The attribute compared.
    pub const fn attribute(&self) -> DirectoryAttribute {
        self.attribute
    }

    /// How.
    pub const fn how(&self) -> TextMatch {
        self.how
    }

    /// The text, lowercase unless the attribute compares with case; never empty.
    pub fn operand(&self) -> &str {
        &self.operand
    }
}

/// A filter over a directory's users or groups that the store answers with its indexes. The
/// constructors fold what can be folded (`and` with [`All`](Self::All) is the other side, an
/// empty prefix is [`Present`](Self::Present)), so the store meets no empty operand.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum DirectoryFilter {
    /// Every resource.
    All,
    /// None.
    Nothing,
    /// The resource with this id.
    Id(Uuid),
    /// The resources with a value of the attribute (a user with an address, for
    /// [`DirectoryAttribute::Email`]). An attribute the resource type does not have: none.
    Present(DirectoryAttribute),
    /// The resources whose value of the attribute (one of them, for addresses) compares so.
    /// An attribute the resource type does not have: none.
    Compare(Comparison),
    /// Both.
    And(Box<Self>, Box<Self>),
    /// Either.
    Or(Box<Self>, Box<Self>),
}

impl DirectoryFilter {
    /// `attribute` compared with `text` (as written; folded here when the attribute compares
    /// without case). An empty `text` is held by every value: `sw` and `co` are then
    /// [`Present`](Self::Present); no value equals it.
    pub fn compare(attribute: DirectoryAttribute, how: TextMatch, text: &str) -> Self {
        if text.is_empty() {
            return match how {
                TextMatch::Equals => Self::Nothing,
                TextMatch::StartsWith | TextMatch::Contains => Self::Present(attribute),
            };
        }
        Self::Compare(Comparison {
            attribute,
            how,
            operand: attribute.key(text),
        })
    }

    /// The resource whose `id` is `text`, exactly as rendered (a UUID, hyphenated, lowercase):
    /// `id` compares with case, so any other spelling is [`Nothing`](Self::Nothing).
    pub fn id(text: &str) -> Self {
        match Uuid::parse_str(text) {
            Ok(id) if id.hyphenated().to_string() == text => Self::Id(id),
            _ => Self::Nothing,
        }
    }

    /// Both filters.
    pub fn and(self, other: Self) -> Self {
        match (self, other) {
            (Self::All, other) | (other, Self::All) => other,
            (Self::Nothing, _) | (_, Self::Nothing) => Self::Nothing,
            (a, b) => Self::And(Box::new(a), Box::new(b)),
        }
    }

    /// Either filter.
    pub fn or(self, other: Self) -> Self {
        match (self, other) {
            (Self::Nothing, other) | (other, Self::Nothing) => other,
            (Self::All, _) | (_, Self::All) => Self::All,
            (a, b) => Self::Or(Box::new(a), Box::new(b)),
        }
    }
}

/// A filter the store cannot answer, applied to each resource of the directory in turn.
pub trait ResourceCheck<T>: Send + Sync {
    /// Whether the resource is listed.
    fn accepts(&self, resource: &T) -> bool;

    /// Whether it reads a group's members: groups are handed to it without them otherwise.
    fn reads_members(&self) -> bool {
        true
    }
}

/// Which of a directory's users (`T` is [`DirectoryUser`](super::DirectoryUser)) or groups
/// ([`DirectoryGroup`](super::DirectoryGroup)) a listing holds.
pub enum DirectorySelection<T> {
    /// Those the filter selects, by the store's indexes.
    Filter(DirectoryFilter),
    /// Those the check accepts, read in batches of [`DIRECTORY_BATCH`].
    Check(Arc<dyn ResourceCheck<T>>),
}

impl<T> Clone for DirectorySelection<T> {
    fn clone(&self) -> Self {
        match self {
            Self::Filter(filter) => Self::Filter(filter.clone()),
            Self::Check(check) => Self::Check(Arc::clone(check)),
        }
    }
}

impl<T> fmt::Debug for DirectorySelection<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Filter(filter) => f.debug_tuple("Filter").field(filter).finish(),
            Self::Check(_) => f.write_str("Check(..)"),
        }
    }
}

/// The slice of a listing's resources asked for: SCIM's `startIndex` (less one) and `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirectoryWindow {
    /// How many matching resources come before the page.
    pub offset: u64,
    /// The most resources on the page; `0` asks for the total alone.
    pub count: u32,
}

/// A page of a listing: its resources, in the directory's order, and how many match in all.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DirectoryPage<T> {
    /// The page's resources.
    pub resources: Vec<T>,
    /// How many resources match, on every page.
    pub total: u64,
}

/// Where a read of a directory in order stopped: the last resource read's creation time and
/// id. The next batch starts after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DirectoryCursor {
    /// When the last resource read was created.
    pub created_at: OffsetDateTime,
    /// Its id.
    pub id: Uuid,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operands_are_folded_as_the_attribute_compares() {
        let DirectoryFilter::Compare(c) =
            DirectoryFilter::compare(DirectoryAttribute::UserName, TextMatch::Equals, "Ada@ACME")
        else {
            panic!("a comparison");
        };
        assert_eq!(c.operand(), "ada@acme");
        let DirectoryFilter::Compare(c) =
            DirectoryFilter::compare(DirectoryAttribute::ExternalId, TextMatch::Contains, "00uA")
        else {
            panic!("a comparison");
        };
        assert_eq!(c.operand(), "00uA");
        assert_eq!(
            DirectoryAttribute::DisplayName.key("\u{212A}ELVIN"),
            "kelvin"
        );
    }

    #[test]
    fn empty_operands_and_constants_fold() {
        use DirectoryAttribute::DisplayName;
        assert_eq!(
            DirectoryFilter::compare(DisplayName, TextMatch::StartsWith, ""),
            DirectoryFilter::Present(DisplayName)
        );
        assert_eq!(
            DirectoryFilter::compare(DisplayName, TextMatch::Equals, ""),
            DirectoryFilter::Nothing
        );
        let present = DirectoryFilter::Present(DisplayName);
        assert_eq!(DirectoryFilter::All.and(present.clone()), present);
        assert_eq!(
            present.clone().and(DirectoryFilter::Nothing),
            DirectoryFilter::Nothing
        );
        assert_eq!(DirectoryFilter::Nothing.or(present.clone()), present);
        assert_eq!(present.or(DirectoryFilter::All), DirectoryFilter::All);
    }

    #[test]
    fn an_id_matches_only_as_rendered() {
        let id = Uuid::from_u128(0xada);
        let text = id.to_string();
        assert_eq!(DirectoryFilter::id(&text), DirectoryFilter::Id(id));
        assert_eq!(
            DirectoryFilter::id(&text.to_uppercase()),
            DirectoryFilter::Nothing
        );
        assert_eq!(
            DirectoryFilter::id(&id.simple().to_string()),
            DirectoryFilter::Nothing
        );
        assert_eq!(DirectoryFilter::id("ada"), DirectoryFilter::Nothing);
    }
}

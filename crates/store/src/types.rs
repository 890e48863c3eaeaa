//! Rust types that map to different SQL types on the two backends, so that the shared queries
//! compile against both schemas.

use diesel::{
    deserialize::{self, FromSql, FromSqlRow},
    expression::AsExpression,
    pg::{Pg, PgValue},
    serialize::{self, IsNull, Output, ToSql},
    sql_types,
    sqlite::Sqlite,
};
use uuid::Uuid;

/// A UUID: native `uuid` on PostgreSQL, its hyphenated text form on SQLite.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, AsExpression, FromSqlRow)]
#[diesel(sql_type = sql_types::Uuid)]
#[diesel(sql_type = sql_types::Text)]
pub struct DbUuid(pub Uuid);

impl ToSql<sql_types::Uuid, Pg> for DbUuid {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Pg>) -> serialize::Result {
        <Uuid as ToSql<sql_types::Uuid, Pg>>::to_sql(&self.0, out)
    }
}

impl FromSql<sql_types::Uuid, Pg> for DbUuid {
    fn from_sql(value: PgValue<'_>) -> deserialize::Result<Self> {
        <Uuid as FromSql<sql_types::Uuid, Pg>>::from_sql(value).map(Self)
    }
}

impl ToSql<sql_types::Text, Sqlite> for DbUuid {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Sqlite>) -> serialize::Result {
        out.set_value(self.0.hyphenated().to_string());
        Ok(IsNull::No)
    }
}

impl FromSql<sql_types::Text, Sqlite> for DbUuid {
    fn from_sql(
        value: <Sqlite as diesel::backend::Backend>::RawValue<'_>,
    ) -> deserialize::Result<Self> {
        let text = <String as FromSql<sql_types::Text, Sqlite>>::from_sql(value)?;
        Ok(Self(Uuid::parse_str(&text)?))
    }
}

/// A list of strings: a native `text[]` on PostgreSQL, a JSON array in text on SQLite.
#[derive(Clone, Debug, Default, PartialEq, Eq, AsExpression, FromSqlRow)]
#[diesel(sql_type = sql_types::Array<sql_types::Text>)]
#[diesel(sql_type = sql_types::Text)]
pub struct DbStrings(pub Vec<String>);

impl ToSql<sql_types::Array<sql_types::Text>, Pg> for DbStrings {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Pg>) -> serialize::Result {
        <Vec<String> as ToSql<sql_types::Array<sql_types::Text>, Pg>>::to_sql(&self.0, out)
    }
}

impl FromSql<sql_types::Array<sql_types::Text>, Pg> for DbStrings {
    fn from_sql(value: PgValue<'_>) -> deserialize::Result<Self> {
        <Vec<String> as FromSql<sql_types::Array<sql_types::Text>, Pg>>::from_sql(value).map(Self)
    }
}

impl ToSql<sql_types::Text, Sqlite> for DbStrings {
    fn to_sql<'b>(&'b self, out: &mut Output<'b, '_, Sqlite>) -> serialize::Result {
        out.set_value(serde_json::to_string(&self.0)?);
        Ok(IsNull::No)
    }
}

impl FromSql<sql_types::Text, Sqlite> for DbStrings {
    fn from_sql(
        value: <Sqlite as diesel::backend::Backend>::RawValue<'_>,
    ) -> deserialize::Result<Self> {
        let text = <String as FromSql<sql_types::Text, Sqlite>>::from_sql(value)?;
        Ok(Self(serde_json::from_str(&text)?))
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use diesel::{Connection, IntoSql, RunQueryDsl, SqliteConnection};

    use super::*;

    diesel::define_sql_function! {
        fn json_array_length(x: sql_types::Text) -> sql_types::Integer;
    }

    #[test]
    fn strings_are_a_json_array_on_sqlite() {
        let mut conn = SqliteConnection::establish(":memory:").unwrap();
        let strings = DbStrings(vec!["user.created".into(), "a \"quoted\", one".into()]);
        let back: (DbStrings, i32) = diesel::select((
            strings.clone().into_sql::<sql_types::Text>(),
            json_array_length(strings.clone()),
        ))
        .get_result(&mut conn)
        .unwrap();
        assert_eq!(back, (strings, 2));
    }
}

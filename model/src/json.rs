//! `Json<T>`: a value stored as its JSON text (the column stays TEXT on both databases), read
//! back as `T` or not at all: a text that does not decode as `T` is [`corrupt`], named by its
//! column and row, under the policy of the whole crate.
//!
//! Writing encodes `T` with serde_json, which fails only for a map whose keys are not text
//! or a `Serialize` that errs; no stored type has either. Were one to, the value written is
//! NULL, which a NOT NULL column refuses (the write fails, nothing is stored) and a nullable
//! one reads back as absent: never a default that reads as a value.
//!
//! [`corrupt`]: crate::text::corrupt

use serde::{de::DeserializeOwned, Serialize};

/// Any JSON value: the `T` of a column whose shape is open (an audit entry's details).
pub use serde_json::Value;

/// A `T` stored as its JSON text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Json<T>(pub T);

impl<T> std::ops::Deref for Json<T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.0
    }
}

impl<T> std::ops::DerefMut for Json<T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.0
    }
}

impl<T: Serialize> Json<T> {
    /// The stored text (`None` only where writing would store NULL: see the module).
    pub fn text(&self) -> Option<String> {
        serde_json::to_string(&self.0).ok()
    }
}

impl<T: Serialize> Serialize for Json<T> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(s)
    }
}

impl<'de, T: serde::Deserialize<'de>> serde::Deserialize<'de> for Json<T> {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        T::deserialize(d).map(Json)
    }
}

impl<T: Serialize> From<Json<T>> for sea_orm::Value {
    fn from(v: Json<T>) -> Self {
        sea_orm::Value::String(v.text())
    }
}

impl<T: DeserializeOwned> sea_orm::TryGetable for Json<T> {
    fn try_get_by<I: sea_orm::ColIdx>(
        res: &sea_orm::QueryResult,
        index: I,
    ) -> Result<Self, sea_orm::TryGetError> {
        // NULL stays `Null`, so an `Option<Json<T>>` field reads it as `None`.
        let text = <String as sea_orm::TryGetable>::try_get_by(res, index)?;
        serde_json::from_str(&text).map(Json).map_err(|e| {
            let kind = format!("{} ({e})", short_name::<T>());
            crate::text::corrupt(res, index.as_str(), &kind, &text)
        })
    }
}

impl<T: Serialize + DeserializeOwned> sea_orm::sea_query::ValueType for Json<T> {
    fn try_from(v: sea_orm::Value) -> Result<Self, sea_orm::sea_query::ValueTypeErr> {
        match v {
            sea_orm::Value::String(Some(s)) => serde_json::from_str(&s)
                .map(Json)
                .map_err(|_| sea_orm::sea_query::ValueTypeErr),
            _ => Err(sea_orm::sea_query::ValueTypeErr),
        }
    }

    fn type_name() -> String {
        format!("Json<{}>", short_name::<T>())
    }

    fn array_type() -> sea_orm::sea_query::ArrayType {
        sea_orm::sea_query::ArrayType::String
    }

    fn column_type() -> sea_orm::sea_query::ColumnType {
        sea_orm::sea_query::ColumnType::Text
    }
}

impl<T> sea_orm::sea_query::Nullable for Json<T> {
    fn null() -> sea_orm::Value {
        sea_orm::Value::String(None)
    }
}

impl<T: Serialize + DeserializeOwned> sea_orm::IntoActiveValue<Json<T>> for Json<T> {
    fn into_active_value(self) -> sea_orm::ActiveValue<Json<T>> {
        sea_orm::ActiveValue::Set(self)
    }
}

/// `T`'s name without its path, for the read error.
fn short_name<T>() -> &'static str {
    let full = std::any::type_name::<T>();
    let base = full.split('<').next().unwrap_or(full);
    base.rsplit("::").next().unwrap_or(base)
}

#[cfg(test)]
mod tests {
    use super::Json;
    use sea_orm::sea_query::ValueType;
    use std::collections::BTreeMap;

    type Map = BTreeMap<String, serde_json::Value>;

    #[test]
    fn a_value_round_trips_through_its_text_and_a_text_of_another_shape_does_not() {
        let m: Map = [("k".to_owned(), serde_json::json!([1, "two"]))].into();
        let v: sea_orm::Value = Json(m.clone()).into();
        assert_eq!(
            v,
            sea_orm::Value::String(Some(r#"{"k":[1,"two"]}"#.to_owned()))
        );
        assert_eq!(<Json<Map> as ValueType>::try_from(v).ok(), Some(Json(m)));
        for other in ["", "[1]", "{\"k\"", "null"] {
            let stored = sea_orm::Value::String(Some(other.to_owned()));
            assert!(
                <Json<Map> as ValueType>::try_from(stored).is_err(),
                "{other:?}"
            );
        }
        assert_eq!(<Json<Map> as ValueType>::type_name(), "Json<BTreeMap>");
    }

    /// Read from a real (SQLite) row: NULL is `None`, its JSON the value, any other text an
    /// error naming the column and the row.
    #[tokio::test]
    async fn a_stored_text_that_does_not_decode_is_an_error_naming_column_and_row() {
        use sea_orm::{ConnectionTrait, Database, Statement};
        let db = Database::connect("sqlite::memory:").await.unwrap();
        let sql = r#"SELECT 'pay_1' AS id, '{"a":1}' AS good, NULL AS other, '[1]' AS wrong"#;
        let stmt = Statement::from_string(db.get_database_backend(), sql);
        let r = db.query_one_raw(stmt).await.unwrap().unwrap();
        let good: Json<Map> = r.try_get("", "good").unwrap();
        assert_eq!(good.0["a"], 1);
        assert_eq!(r.try_get::<Option<Json<Map>>>("", "other").unwrap(), None);
        let err = r.try_get::<Json<Map>>("", "wrong").unwrap_err().to_string();
        assert!(
            err.contains(r#"the stored wrong of pay_1 does not decode: "[1]" is not a BTreeMap"#),
            "{err}"
        );
    }
}

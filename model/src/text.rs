//! `text_enum!`: an enum stored as one of a closed set of texts (columns stay TEXT on both
//! databases), with what SeaORM needs to read and write it.

use sea_orm::{DbErr, QueryResult, TryGetError};

/// The prefixes SeaORM gives a joined entity's columns (`find_also_related`, `find_with_related`).
const JOIN_PREFIXES: [&str; 2] = ["A_", "B_"];

/// The read error of a stored `text` in `column` that is not a `kind`: logged, and named by the
/// row's `id` when the row has one (the row's own, or its joined entity's).
pub fn corrupt(res: &QueryResult, column: Option<&str>, kind: &str, text: &str) -> TryGetError {
    let column = column.unwrap_or("a column");
    let prefix = JOIN_PREFIXES
        .into_iter()
        .find(|p| column.starts_with(p))
        .unwrap_or_default();
    let row = res
        .try_get_by::<Option<String>, _>(format!("{prefix}id").as_str())
        .ok()
        .flatten()
        .unwrap_or_else(|| "a row without an id".to_owned());
    tracing::error!(
        column,
        row,
        value = text,
        kind,
        "a stored value does not decode"
    );
    TryGetError::DbErr(DbErr::Custom(format!(
        "the stored {column} of {row} does not decode: {text:?} is not a {kind}"
    )))
}

/// What SeaORM needs of a type stored as TEXT and read back by its `parse(&str) ->
/// Option<Self>`: `TryGetable` (a text `parse` refuses is [`corrupt`]), `ValueType`,
/// `Nullable`, `TryFromU64` (an error: never a number) and `IntoActiveValue`. For
/// `text_enum!` and the id types (`ids::id_type!`); each gives its own `From<_> for Value`.
macro_rules! stored_as_text {
    ($name:ident) => {
        impl sea_orm::TryGetable for $name {
            fn try_get_by<I: sea_orm::ColIdx>(
                res: &sea_orm::QueryResult,
                index: I,
            ) -> Result<Self, sea_orm::TryGetError> {
                // NULL stays `Null`, so an `Option<$name>` field reads it as `None`.
                let text = <String as sea_orm::TryGetable>::try_get_by(res, index)?;
                Self::parse(&text).ok_or_else(|| {
                    $crate::text::corrupt(res, index.as_str(), stringify!($name), &text)
                })
            }
        }

        impl sea_orm::sea_query::ValueType for $name {
            fn try_from(v: sea_orm::Value) -> Result<Self, sea_orm::sea_query::ValueTypeErr> {
                match v {
                    sea_orm::Value::String(Some(s)) => {
                        Self::parse(&s).ok_or(sea_orm::sea_query::ValueTypeErr)
                    }
                    _ => Err(sea_orm::sea_query::ValueTypeErr),
                }
            }

            fn type_name() -> String {
                stringify!($name).to_owned()
            }

            fn array_type() -> sea_orm::sea_query::ArrayType {
                sea_orm::sea_query::ArrayType::String
            }

            fn column_type() -> sea_orm::sea_query::ColumnType {
                sea_orm::sea_query::ColumnType::Text
            }
        }

        impl sea_orm::sea_query::Nullable for $name {
            fn null() -> sea_orm::Value {
                sea_orm::Value::String(None)
            }
        }

        /// Never a number: a column of this type is text.
        impl sea_orm::TryFromU64 for $name {
            fn try_from_u64(_: u64) -> Result<Self, sea_orm::DbErr> {
                Err(sea_orm::DbErr::ConvertFromU64(stringify!($name)))
            }
        }

        impl sea_orm::IntoActiveValue<$name> for $name {
            fn into_active_value(self) -> sea_orm::ActiveValue<$name> {
                sea_orm::ActiveValue::Set(self)
            }
        }
    };
}

/// An enum whose variants are stored as the given texts. It gets `ALL`, `as_str`, `parse`,
/// `Display`, serde's `Serialize` and `Deserialize` (the same text; any other is an error
/// naming the values), and SeaORM's `Value`, `TryGetable` (a text of none of the variants is
/// [`corrupt`]), `ValueType`, `Nullable`, `TryFromU64` (an error: for a column of a composite
/// key) and `IntoActiveValue`. Attributes (docs, further derives) go on the enum and its
/// variants as usual.
macro_rules! text_enum {
    (
        $(#[$meta:meta])*
        pub enum $name:ident {
            $($(#[$vmeta:meta])* $variant:ident = $text:literal,)+
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            /// Every value, in declaration order.
            pub const ALL: [$name; [$($text,)+].len()] = [$($name::$variant,)+];

            /// The stored (and wire) text.
            pub fn as_str(self) -> &'static str {
                match self {
                    $($name::$variant => $text,)+
                }
            }

            /// The value stored as `s`, if any.
            pub fn parse(s: &str) -> Option<Self> {
                match s {
                    $($text => Some($name::$variant),)+
                    _ => None,
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                s.serialize_str(self.as_str())
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
                let text = <std::borrow::Cow<'de, str> as serde::Deserialize>::deserialize(d)?;
                Self::parse(&text).ok_or_else(|| {
                    serde::de::Error::custom(format_args!(
                        "unknown {} {:?}; one of {}",
                        stringify!($name),
                        text,
                        [$($text,)+].join(", ")
                    ))
                })
            }
        }

        impl From<$name> for sea_orm::Value {
            fn from(v: $name) -> Self {
                sea_orm::Value::String(Some(v.as_str().to_owned()))
            }
        }

        stored_as_text!($name);
    };
}

#[cfg(test)]
mod tests {
    use sea_orm::sea_query::ValueType;

    text_enum! {
        /// A test enum.
        pub enum Colour {
            Red = "red",
            DarkBlue = "dark_blue",
        }
    }

    #[test]
    fn each_value_round_trips_through_its_text_and_nothing_else_parses() {
        for c in Colour::ALL {
            assert_eq!(Colour::parse(c.as_str()), Some(c));
            assert_eq!(<Colour as ValueType>::try_from(c.into()).ok(), Some(c));
        }
        assert_eq!(Colour::DarkBlue.to_string(), "dark_blue");
        for other in ["", "Red", "dark-blue", "red "] {
            assert_eq!(Colour::parse(other), None, "{other:?}");
        }
        assert!(<Colour as ValueType>::try_from(sea_orm::Value::String(None)).is_err());
        assert!(<Colour as ValueType>::try_from("blue".into()).is_err());
    }

    #[test]
    fn json_holds_the_same_text_and_refuses_any_other() {
        let json = serde_json::to_string(&[Colour::Red, Colour::DarkBlue]).unwrap();
        assert_eq!(json, r#"["red","dark_blue"]"#);
        let back: Vec<Colour> = serde_json::from_str(&json).unwrap();
        assert_eq!(back, [Colour::Red, Colour::DarkBlue]);
        let err = serde_json::from_str::<Colour>(r#""blue""#)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(r#"unknown Colour "blue"; one of red, dark_blue"#),
            "{err}"
        );
    }

    /// Read from a real (SQLite) row: NULL is `None`, a known text its value, anything else an
    /// error naming the column and the row's id — its own, or a joined entity's (`A_`).
    #[tokio::test]
    async fn a_stored_text_of_no_value_is_an_error_naming_column_and_row() {
        use sea_orm::{ConnectionTrait, Database, Statement};
        let db = Database::connect("sqlite::memory:").await.unwrap();
        let row = |sql: &str| {
            let db = &db;
            let sql = sql.to_owned();
            async move {
                let stmt = Statement::from_string(db.get_database_backend(), sql);
                db.query_one_raw(stmt).await.unwrap().unwrap()
            }
        };
        let r = row("SELECT 'c_1' AS id, 'dark_blue' AS colour, NULL AS other").await;
        assert_eq!(r.try_get::<Colour>("", "colour").unwrap(), Colour::DarkBlue);
        assert_eq!(r.try_get::<Option<Colour>>("", "other").unwrap(), None);

        let r = row("SELECT 'c_2' AS id, 'blue' AS colour").await;
        let err = r.try_get::<Colour>("", "colour").unwrap_err().to_string();
        assert!(
            err.contains(r#"the stored colour of c_2 does not decode: "blue" is not a Colour"#),
            "{err}"
        );
        // An optional column holding a wrong text is an error too, never `None`.
        assert!(r.try_get::<Option<Colour>>("", "colour").is_err());

        let r = row("SELECT 'c_3' AS A_id, 'Red' AS A_colour").await;
        let err = r.try_get::<Colour>("A_", "colour").unwrap_err().to_string();
        assert!(
            err.contains("the stored A_colour of c_3 does not decode"),
            "{err}"
        );

        let r = row("SELECT 'red ' AS colour").await;
        let err = r.try_get::<Colour>("", "colour").unwrap_err().to_string();
        assert!(err.contains("of a row without an id"), "{err}");
    }
}

//! What payd stored as JSON text. One policy for a stored value that does not decode: it is
//! corrupt, so the read fails as a database fault does — logged with its column and row,
//! answered 500, and the command that read it stops before it writes. It is never read as
//! empty or as a default: a command that went on would bill, invoice or store that default over
//! what was there. The JSON columns are typed ([`Json`]): the row does not read at all. What is
//! left here decodes by hand the one column isolated on purpose (a scheduled job's payload:
//! the job fails, the tick goes on) and ids read from text that is not yet a typed column.

use sea_orm::DbErr;
use serde::de::DeserializeOwned;

/// A column typed as its JSON: read as `T` or refused under the same policy.
pub use payd_model::json::Json;

/// The value of `column` of the row `row_id`, decoded.
pub fn json<T: DeserializeOwned>(
    column: &'static str,
    row_id: &str,
    text: &str,
) -> Result<T, DbErr> {
    serde_json::from_str(text).map_err(|e| {
        tracing::error!(column, row = row_id, error = %e, "a stored JSON value does not decode");
        DbErr::Custom(format!(
            "the stored {column} of {row_id} does not decode: {e}"
        ))
    })
}

/// An id payd stored in `column` of the row `row_id`, as its type: one of another shape is
/// corrupt, under the same policy (until the entity's columns carry the id types).
pub fn id<I: crate::ids::Id>(column: &'static str, row_id: &str, text: &str) -> Result<I, DbErr> {
    I::parse(text).ok_or_else(|| {
        tracing::error!(column, row = row_id, "a stored id does not decode");
        DbErr::Custom(format!(
            "the stored {column} of {row_id} does not decode: not a {}",
            I::NOUN
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_that_does_not_decode_fails_naming_its_column_and_row() {
        let lines: Vec<i64> = json("lines", "cyc_1", "[1,2]").unwrap();
        assert_eq!(lines, [1, 2]);
        for corrupt in ["", "[1,", "{\"a\":1}", "null"] {
            let err = json::<Vec<i64>>("lines", "cyc_1", corrupt).unwrap_err();
            assert!(
                err.to_string()
                    .contains("the stored lines of cyc_1 does not decode"),
                "{corrupt:?}: {err}"
            );
        }
    }

    #[test]
    fn an_id_of_another_shape_fails_naming_its_column_and_row() {
        let good = crate::ids::CustomerId::new();
        let read: crate::ids::CustomerId = id("customer_id", "inv_1", &good).unwrap();
        assert_eq!(read, good);
        for corrupt in ["", "cus_1", "pay_0123456789abcdef0123456789abcdef"] {
            let err = id::<crate::ids::CustomerId>("customer_id", "inv_1", corrupt).unwrap_err();
            assert!(
                err.to_string()
                    .contains("the stored customer_id of inv_1 does not decode: not a customer"),
                "{corrupt:?}: {err}"
            );
        }
    }
}

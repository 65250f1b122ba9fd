//! Reading what payd stored as JSON text (lines, items, add-on groups, plans …). One policy
//! for a stored value that does not decode: it is corrupt, so the read fails as a database
//! fault does — logged with its column and row, answered 500, and the command that read it
//! stops before it writes. It is never read as empty or as a default: a command that went on
//! would bill, invoice or store that default over what was there.

use sea_orm::DbErr;
use serde::de::DeserializeOwned;

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

/// [`json`] of a column that may be empty (`NULL`): `None` then.
pub fn json_opt<T: DeserializeOwned>(
    column: &'static str,
    row_id: &str,
    text: Option<&str>,
) -> Result<Option<T>, DbErr> {
    text.map(|text| json(column, row_id, text)).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_that_does_not_decode_fails_naming_its_column_and_row() {
        let lines: Vec<i64> = json("lines", "cyc_1", "[1,2]").unwrap();
        assert_eq!(lines, [1, 2]);
        assert_eq!(json_opt::<Vec<i64>>("lines", "cyc_1", None).unwrap(), None);
        for corrupt in ["", "[1,", "{\"a\":1}", "null"] {
            let err = json::<Vec<i64>>("lines", "cyc_1", corrupt).unwrap_err();
            assert!(
                err.to_string()
                    .contains("the stored lines of cyc_1 does not decode"),
                "{corrupt:?}: {err}"
            );
        }
    }
}

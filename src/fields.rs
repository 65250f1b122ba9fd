//! The request fields and money that every resource shares: metadata and free text and their
//! limits, ISO 4217 currencies, amounts in minor units, and the `{"data": [...]}` wrapper.
//! Below every resource, so none of them borrows these from another.

use serde::Serialize;
use utoipa::ToSchema;

use crate::{error::ApiError, ids::Id};

pub use payd_model::metadata::Metadata;

/// A free-text field of at most `max` characters.
/// An id a body or query names, parsed: one that is not of kind `T` names nothing, so it is
/// 404 "no such …" as an unknown id of the right shape is.
pub fn parse_id<T: Id>(value: &str) -> Result<T, ApiError> {
    T::parse(value).ok_or_else(ApiError::no_such::<T>)
}

pub fn check_text(
    param: &str,
    value: Option<&String>,
    max: usize,
) -> Result<Option<String>, ApiError> {
    match value {
        Some(v) if v.chars().count() > max => Err(ApiError::invalid_param(
            param,
            format!("{param} must be at most {max} characters"),
        )),
        other => Ok(other.cloned()),
    }
}

/// The one rule for metadata on every resource: at most 50 keys of 1 to 40 characters and
/// 8 KiB in all (as stored: its JSON text). Returns it, to store.
pub fn check_metadata(md: Option<&Metadata>) -> Result<Option<Metadata>, ApiError> {
    let Some(md) = md else { return Ok(None) };
    let bytes = serde_json::to_vec(md).map_or(usize::MAX, |json| json.len());
    if md.len() > 50 || bytes > 8192 || md.keys().any(|k| k.is_empty() || k.len() > 40) {
        return Err(ApiError::invalid_param(
            "metadata",
            "at most 50 keys of 1 to 40 characters, 8 KiB in all",
        ));
    }
    Ok(Some(md.clone()))
}

pub fn parse_amount(param: &str, amount: i64, max: i64) -> Result<i64, ApiError> {
    if amount <= 0 {
        return Err(
            ApiError::invalid("amount_not_positive", "the amount must be greater than 0")
                .param(param),
        );
    }
    if amount > max {
        return Err(ApiError::invalid(
            "amount_too_large",
            format!("the amount must be at most {max} minor units (limits.max_amount)"),
        )
        .param(param));
    }
    Ok(amount)
}

/// Checks an ISO 4217 currency code (upper case).
pub fn parse_currency(param: &str, raw: &str) -> Result<String, ApiError> {
    let code = raw.trim().to_ascii_uppercase();
    let Some(currency) = iso_currency::Currency::from_code(&code) else {
        return Err(ApiError::invalid(
            "invalid_currency",
            format!("{raw:?} is not an ISO 4217 currency code"),
        )
        .param(param));
    };
    // ISO 4217 gives no minor unit for the codes that are not money one can be paid in:
    // precious metals (XAU, XAG, XPD, XPT), units of account (XDR, XSU, XUA, the XB* bond
    // units), the test code XTS and "no currency" XXX. Amounts are in minor units, so these
    // have none.
    if currency.exponent().is_none() {
        return Err(ApiError::invalid(
            "invalid_currency",
            format!("{code} is not a currency payments can be made in"),
        )
        .param(param));
    }
    Ok(code)
}

/// An amount in minor units as people read it: `500` USD → `5.00`, `500` JPY → `500`.
pub fn display_amount(minor: i64, currency: &str) -> String {
    let exponent = iso_currency::Currency::from_code(currency)
        .and_then(|c| c.exponent())
        .unwrap_or(2) as u32;
    if exponent == 0 {
        return minor.to_string();
    }
    let unit = 10i64.pow(exponent);
    let sign = if minor < 0 { "-" } else { "" };
    let abs = minor.unsigned_abs();
    format!(
        "{sign}{}.{:0width$}",
        abs / unit as u64,
        abs % unit as u64,
        width = exponent as usize
    )
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Items<T> {
    pub data: Vec<T>,
}

/// A file's bytes as a response body (a PDF, an image): in OpenAPI a `string` of format
/// `binary`, which clients generated from the document read as a file.
pub struct FileBytes;

impl utoipa::PartialSchema for FileBytes {
    fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
        use utoipa::openapi::schema::{KnownFormat, ObjectBuilder, SchemaFormat, Type};
        ObjectBuilder::new()
            .schema_type(Type::String)
            .format(Some(SchemaFormat::KnownFormat(KnownFormat::Binary)))
            .into()
    }
}

impl ToSchema for FileBytes {}

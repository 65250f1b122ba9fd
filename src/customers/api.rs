//! Request and response types of the customer, payment-method and mandate routes.

use chrono::{DateTime, Utc};
use payd_entity::{customer, mandate, payment_method};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::{
    error::ApiError,
    fields::{check_metadata, Metadata},
    money::Money,
    processors::card::{Brand, StoredCard},
};

pub use payd_model::address::Address;

#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CustomerFields {
    #[serde(default)]
    pub name: Option<String>,
    #[serde(default)]
    pub email: Option<String>,
    #[serde(default)]
    pub phone: Option<String>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub address: Option<Address>,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub metadata: Option<Metadata>,
}

/// A customer. After `DELETE` its personal fields are null and `redacted` is true.
#[derive(Debug, Serialize, ToSchema)]
pub struct Customer {
    pub customer_id: String,
    /// Rises by one with each committed change of this object: a receiver keeps, per object,
    /// the highest it has seen.
    pub version: i64,
    pub name: Option<String>,
    pub email: Option<String>,
    pub phone: Option<String>,
    pub description: Option<String>,
    pub address: Option<Address>,
    #[schema(value_type = Object)]
    pub metadata: Metadata,
    pub default_payment_method_id: Option<String>,
    pub redacted: bool,
    pub test_mode: bool,
    pub created: DateTime<Utc>,
    pub updated: DateTime<Utc>,
}

impl From<&customer::Model> for Customer {
    fn from(c: &customer::Model) -> Self {
        Self {
            customer_id: c.id.to_string(),
            version: c.version,
            name: c.name.clone(),
            email: c.email.clone(),
            phone: c.phone.clone(),
            description: c.description.clone(),
            address: c.address.as_ref().map(|a| a.0.clone()),
            metadata: c.metadata.0.clone(),
            default_payment_method_id: c
                .default_payment_method_id
                .as_ref()
                .map(ToString::to_string),
            redacted: c.redacted_at.is_some(),
            test_mode: c.test_mode,
            created: c.created_at,
            updated: c.updated_at,
        }
    }
}

/// What a `DELETE /customers/{id}` erased.
#[derive(Debug, Serialize, ToSchema)]
pub struct Redaction {
    pub customer: Customer,
    /// The personal fields that held data and were erased.
    pub erased_fields: Vec<String>,
    pub deleted_payment_methods: Vec<String>,
}

/// A saved payment method.
#[derive(Debug, Serialize, ToSchema)]
pub struct SavedMethod {
    pub payment_method_id: String,
    pub customer_id: String,
    pub card: Option<PaymentMethodView>,
    pub is_default: bool,
    pub test_mode: bool,
    pub created: DateTime<Utc>,
}

impl SavedMethod {
    pub fn of(pm: &payment_method::Model, default: Option<&str>) -> Self {
        let card = &pm.card.0;
        Self {
            payment_method_id: pm.id.to_string(),
            customer_id: pm.customer_id.to_string(),
            card: Some(PaymentMethodView::from(card)),
            is_default: default == Some(pm.id.as_str()),
            test_mode: pm.test_mode,
            created: pm.created_at,
        }
    }
}

/// A mandate object (also the `content.object` of `mandate_details` events).
#[derive(Debug, Serialize, ToSchema)]
pub struct Mandate {
    pub mandate_id: String,
    /// Rises by one with each committed change of this object: a receiver keeps, per object,
    /// the highest it has seen.
    pub version: i64,
    pub customer_id: String,
    pub payment_method_id: String,
    /// `single_use` or `multi_use`.
    #[serde(rename = "type")]
    pub mandate_type: String,
    pub amount_limit: Option<i64>,
    pub currency: Option<String>,
    /// `pending`, `active`, `inactive` or `revoked`.
    pub status: String,
    pub start: DateTime<Utc>,
    pub end: Option<DateTime<Utc>>,
    pub test_mode: bool,
    pub created: DateTime<Utc>,
    pub updated: DateTime<Utc>,
}

impl From<&mandate::Model> for Mandate {
    fn from(m: &mandate::Model) -> Self {
        Self {
            mandate_id: m.id.to_string(),
            version: m.version,
            customer_id: m.customer_id.to_string(),
            payment_method_id: m.payment_method_id.to_string(),
            mandate_type: m.mandate_type.to_string(),
            amount_limit: m.amount_limit,
            currency: m.currency.clone(),
            status: m.status.to_string(),
            start: m.start_at,
            end: m.end_at,
            test_mode: m.test_mode,
            created: m.created_at,
            updated: m.updated_at,
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListCustomersQuery {
    #[serde(default)]
    pub email: Option<String>,
    #[serde(default)]
    pub created_after: Option<DateTime<Utc>>,
    #[serde(default)]
    pub created_before: Option<DateTime<Utc>>,
    /// 1 to 100 (default 10).
    #[serde(default)]
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<i64>,
    #[serde(default)]
    pub starting_after: Option<String>,
    #[serde(default)]
    pub ending_before: Option<String>,
}

#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListMandatesQuery {
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub customer_id: Option<String>,
    /// 1 to 100 (default 10).
    #[serde(default)]
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<i64>,
    #[serde(default)]
    pub starting_after: Option<String>,
    #[serde(default)]
    pub ending_before: Option<String>,
}

fn bounded(param: &str, v: &Option<String>, max: usize) -> Result<(), ApiError> {
    match v {
        Some(s) if s.trim().is_empty() || s.chars().count() > max => Err(ApiError::invalid_param(
            param,
            format!("{param} must be 1 to {max} characters"),
        )),
        _ => Ok(()),
    }
}

/// Checks the fields a client may set; emails and phones must look like ones.
pub fn check_fields(f: &CustomerFields) -> Result<(), ApiError> {
    bounded("name", &f.name, 200)?;
    bounded("description", &f.description, 1000)?;
    if let Some(email) = &f.email {
        let ok = email.len() <= 254
            && !email.chars().any(char::is_whitespace)
            && email.split_once('@').is_some_and(|(local, domain)| {
                !local.is_empty()
                    && !domain.contains('@')
                    && domain.contains('.')
                    && !domain.starts_with('.')
                    && !domain.ends_with('.')
            });
        if !ok {
            return Err(
                ApiError::invalid("invalid_email", "email is not a valid address").param("email"),
            );
        }
    }
    if let Some(phone) = &f.phone {
        let digits = phone.chars().filter(char::is_ascii_digit).count();
        let allowed = phone
            .chars()
            .enumerate()
            .all(|(i, c)| c.is_ascii_digit() || " -().".contains(c) || (i == 0 && c == '+'));
        if !allowed || !(7..=15).contains(&digits) {
            return Err(ApiError::invalid(
                "invalid_phone",
                "phone must be 7 to 15 digits, optionally with + and separators",
            )
            .param("phone"));
        }
    }
    if let Some(a) = &f.address {
        for (name, v) in [
            ("line1", &a.line1),
            ("line2", &a.line2),
            ("city", &a.city),
            ("postal_code", &a.postal_code),
            ("state", &a.state),
        ] {
            bounded(&format!("address.{name}"), v, 200)?;
        }
        if let Some(c) = &a.country {
            if c.len() != 2 || !c.bytes().all(|b| b.is_ascii_alphabetic()) {
                return Err(ApiError::invalid_param(
                    "address.country",
                    "country is a two-letter ISO 3166-1 code",
                ));
            }
        }
    }
    check_metadata(f.metadata.as_ref())?;
    Ok(())
}

/// Why a mandate does not cover a charge.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MandateRefusal {
    #[error("the mandate has ended")]
    Ended,
    #[error("the mandate was revoked")]
    Revoked,
    #[error("the mandate is {0}")]
    Inactive(payd_model::mandates::Status),
    #[error("the mandate is for {0}")]
    OtherCurrency(String),
    #[error("the mandate allows at most {0} per charge")]
    OverLimit(i64),
}

impl From<MandateRefusal> for ApiError {
    #[track_caller]
    fn from(r: MandateRefusal) -> Self {
        let code = match r {
            MandateRefusal::Ended | MandateRefusal::Inactive(_) => "mandate_inactive",
            MandateRefusal::Revoked => "mandate_revoked",
            MandateRefusal::OtherCurrency(_) => "mandate_currency_mismatch",
            MandateRefusal::OverLimit(_) => "mandate_amount_exceeded",
        };
        ApiError::conflict(code, r.to_string()).param("mandate_id")
    }
}

/// A charge of `amount` at `now` under the mandate `m`: it must be active (not ended), in its
/// currency and within its limit per charge.
pub fn check_mandate(
    m: &mandate::Model,
    amount: &Money,
    now: DateTime<Utc>,
) -> Result<(), MandateRefusal> {
    use payd_model::mandates::Status;
    match m.status {
        Status::Active if m.end_at.is_some_and(|end| end <= now) => {
            return Err(MandateRefusal::Ended)
        }
        Status::Active => {}
        Status::Revoked => return Err(MandateRefusal::Revoked),
        other @ (Status::Pending | Status::Inactive) => {
            return Err(MandateRefusal::Inactive(other))
        }
    }
    if let Some(c) = m.currency.as_deref().filter(|c| *c != amount.currency) {
        return Err(MandateRefusal::OtherCurrency(c.to_owned()));
    }
    if let Some(limit) = m.amount_limit.filter(|limit| amount.minor > *limit) {
        return Err(MandateRefusal::OverLimit(limit));
    }
    Ok(())
}

/// The card of a payment, as shown.
#[derive(Debug, Clone, Serialize, ToSchema, PartialEq, Eq)]
pub struct PaymentMethodView {
    pub brand: Brand,
    pub last4: String,
    pub exp_month: u32,
    pub exp_year: u32,
}

impl From<&StoredCard> for PaymentMethodView {
    fn from(c: &StoredCard) -> Self {
        Self {
            brand: c.brand,
            last4: c.last4.clone(),
            exp_month: c.exp_month,
            exp_year: c.exp_year,
        }
    }
}

/// What deleting a customer makes of it: its personal data erased (the names of the fields
/// that held some), no default method, `redacted_at` set; its id stays.
pub fn redaction(c: &customer::Model, now: DateTime<Utc>) -> (customer::Model, Vec<String>) {
    let erased: Vec<String> = [
        ("name", c.name.is_some()),
        ("email", c.email.is_some()),
        ("phone", c.phone.is_some()),
        ("description", c.description.is_some()),
        ("address", c.address.is_some()),
        ("metadata", !c.metadata.is_empty()),
    ]
    .into_iter()
    .filter(|(_, had)| *had)
    .map(|(f, _)| f.to_owned())
    .collect();
    let mut after = c.clone();
    after.name = None;
    after.email = None;
    after.phone = None;
    after.description = None;
    after.address = None;
    after.metadata = Default::default();
    after.default_payment_method_id = None;
    after.redacted_at = Some(now);
    after.updated_at = now;
    (after, erased)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(email: Option<&str>, phone: Option<&str>) -> CustomerFields {
        CustomerFields {
            email: email.map(str::to_owned),
            phone: phone.map(str::to_owned),
            ..Default::default()
        }
    }

    #[test]
    fn emails_and_phones_are_checked() {
        assert!(check_fields(&with(Some("ana@example.com"), Some("+49 30 1234567"))).is_ok());
        for bad in [
            "ana",
            "ana@",
            "@example.com",
            "ana@example",
            "a na@example.com",
            "a@b@c.com",
        ] {
            assert_eq!(
                check_fields(&with(Some(bad), None))
                    .unwrap_err()
                    .param
                    .as_deref(),
                Some("email"),
                "{bad}"
            );
        }
        for bad in ["12", "call me", "+1 (555) 000-0000-000000", "1+2345678"] {
            assert_eq!(
                check_fields(&with(None, Some(bad)))
                    .unwrap_err()
                    .param
                    .as_deref(),
                Some("phone"),
                "{bad}"
            );
        }
    }
}

//! The payout object and the request types of the payout routes.

use chrono::{DateTime, Utc};
use payd_entity::payout;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::{machine, processor};
use crate::stored::Json;
use crate::{
    error::ApiError,
    fields::{check_metadata, check_text, parse_amount, parse_currency, Metadata},
    pagination::ListQuery,
    processors::card::luhn_valid,
};

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct BankAccountInput {
    pub account_number: String,
    #[serde(default)]
    pub routing_number: Option<String>,
    #[serde(default)]
    pub sort_code: Option<String>,
    #[serde(default)]
    pub iban: Option<String>,
    pub holder_name: String,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PayoutCardInput {
    pub number: String,
    pub exp_month: u32,
    pub exp_year: u32,
    #[serde(default)]
    pub holder_name: Option<String>,
}

/// Where the money goes: a bank account or a card (one of them).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct DestinationInput {
    #[serde(default)]
    pub bank_account: Option<BankAccountInput>,
    #[serde(default)]
    pub card: Option<PayoutCardInput>,
}

pub use payd_model::payouts::Destination;

fn last4(s: &str) -> String {
    s[s.len().saturating_sub(4)..].to_owned()
}

impl DestinationInput {
    /// The masked destination and the processor's token for it.
    pub fn checked(&self, now: DateTime<Utc>) -> Result<(Destination, String), ApiError> {
        match (&self.bank_account, &self.card) {
            (Some(b), None) => {
                let p = |f: &str| format!("destination.bank_account.{f}");
                let number: String = b.account_number.chars().filter(|c| *c != ' ').collect();
                if !(4..=34).contains(&number.len())
                    || !number.chars().all(|c| c.is_ascii_alphanumeric())
                {
                    return Err(ApiError::invalid_param(
                        &p("account_number"),
                        "4 to 34 letters and digits",
                    ));
                }
                let holder = b.holder_name.trim();
                if holder.is_empty() || holder.chars().count() > 200 {
                    return Err(ApiError::invalid_param(
                        &p("holder_name"),
                        "holder_name must be 1 to 200 characters",
                    ));
                }
                for (f, v) in [
                    ("routing_number", &b.routing_number),
                    ("sort_code", &b.sort_code),
                    ("iban", &b.iban),
                ] {
                    check_text(&p(f), v.as_ref(), 34)?;
                }
                let shown = Destination {
                    kind: "bank_account".into(),
                    last4: last4(&number),
                    holder_name: Some(holder.to_owned()),
                    routing_number: b.routing_number.clone(),
                    sort_code: b.sort_code.clone(),
                    exp_month: None,
                    exp_year: None,
                };
                Ok((shown, processor::bank_recipient(&number)))
            }
            (None, Some(c)) => {
                let p = |f: &str| format!("destination.card.{f}");
                let number: String = c.number.chars().filter(|c| *c != ' ').collect();
                if !(12..=19).contains(&number.len())
                    || !number.chars().all(|c| c.is_ascii_digit())
                    || !luhn_valid(&number)
                {
                    return Err(ApiError::invalid_param(
                        &p("number"),
                        "not a valid card number",
                    ));
                }
                if !(1..=12).contains(&c.exp_month) {
                    return Err(ApiError::invalid_param(
                        &p("exp_month"),
                        "exp_month is 1 to 12",
                    ));
                }
                let year = now.format("%Y").to_string().parse::<u32>().unwrap_or(2000);
                if !(year..=year + 50).contains(&c.exp_year) {
                    return Err(ApiError::invalid_param(
                        &p("exp_year"),
                        "the card has expired",
                    ));
                }
                check_text(&p("holder_name"), c.holder_name.as_ref(), 200)?;
                let shown = Destination {
                    kind: "card".into(),
                    last4: last4(&number),
                    holder_name: c.holder_name.clone(),
                    routing_number: None,
                    sort_code: None,
                    exp_month: Some(c.exp_month),
                    exp_year: Some(c.exp_year),
                };
                Ok((shown, processor::card_recipient(&number)))
            }
            _ => Err(ApiError::invalid_param(
                "destination",
                "send one of bank_account or card",
            )),
        }
    }
}

/// `POST /payouts/create`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreatePayoutRequest {
    pub amount: i64,
    pub currency: String,
    pub destination: DestinationInput,
    /// Confirm at once: reserve the amount out of the available balance.
    #[serde(default)]
    pub confirm: bool,
    /// Once confirmed, go on to the processor without waiting for `fulfill`.
    #[serde(default)]
    pub auto_fulfill: bool,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub metadata: Option<Metadata>,
}

impl CreatePayoutRequest {
    /// The payout's fields, checked: an amount within `max_amount`, a currency, a destination
    /// that can receive it (`now` dates a card's expiry), description and metadata.
    pub fn parse(self, max_amount: i64, now: DateTime<Utc>) -> Result<NewPayout, ApiError> {
        let amount = parse_amount("amount", self.amount, max_amount)?;
        let currency = parse_currency("currency", &self.currency)?;
        let (destination, recipient) = self.destination.checked(now)?;
        Ok(NewPayout {
            amount,
            currency,
            destination,
            recipient,
            description: check_text("description", self.description.as_ref(), 1_000)?,
            metadata: check_metadata(self.metadata.as_ref())?.unwrap_or_default(),
            confirm: self.confirm,
            auto_fulfill: self.auto_fulfill,
        })
    }
}

/// A new payout's checked fields.
#[derive(Debug)]
pub struct NewPayout {
    pub amount: i64,
    pub currency: String,
    /// The destination, masked.
    pub destination: Destination,
    pub recipient: String,
    pub description: Option<String>,
    pub metadata: Metadata,
    pub confirm: bool,
    pub auto_fulfill: bool,
}

impl NewPayout {
    /// Its row in the shop: `requires_confirmation`; or, confirmed at once, reserved and
    /// `requires_fulfillment`, or `initiated` (sent to the processor now) with `auto_fulfill`.
    pub fn row(
        self,
        merchant_id: &crate::ids::MerchantId,
        profile_id: &crate::ids::ProfileId,
        test_mode: bool,
        now: DateTime<Utc>,
    ) -> payout::Model {
        let status = machine::created(self.confirm, self.auto_fulfill);
        payout::Model {
            id: crate::ids::PayoutId::new(),
            merchant_id: merchant_id.clone(),
            profile_id: profile_id.clone(),
            test_mode,
            status,
            amount: self.amount,
            currency: self.currency,
            destination: Json(self.destination),
            recipient: self.recipient,
            description: self.description,
            metadata: Json(self.metadata),
            auto_fulfill: self.auto_fulfill,
            reserved: self.confirm,
            failure_code: None,
            failure_message: None,
            processor_reference: None,
            submitted_at: (status == machine::Status::Initiated).then_some(now),
            created_at: now,
            updated_at: now,
            version: 0,
        }
    }
}

/// `PUT /payouts/{payout_id}`: before it is confirmed; absent fields are kept.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdatePayoutRequest {
    #[serde(default)]
    pub amount: Option<i64>,
    #[serde(default)]
    pub currency: Option<String>,
    #[serde(default)]
    pub destination: Option<DestinationInput>,
    #[serde(default)]
    pub auto_fulfill: Option<bool>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub metadata: Option<Metadata>,
}

#[derive(Debug, Clone, Default, Deserialize, ToSchema, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListPayoutsQuery {
    #[serde(default)]
    pub profile_id: Option<String>,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub currency: Option<String>,
    /// At least this amount.
    #[serde(default)]
    pub amount_gte: Option<i64>,
    /// At most this amount.
    #[serde(default)]
    pub amount_lte: Option<i64>,
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

impl ListPayoutsQuery {
    pub fn page_query(&self) -> ListQuery {
        ListQuery {
            limit: self.limit,
            starting_after: self.starting_after.clone(),
            ending_before: self.ending_before.clone(),
        }
    }
}

#[derive(Debug, Clone, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct RetrievePayoutQuery {
    /// Ask the processor first.
    #[serde(default)]
    pub force_sync: bool,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Failure {
    pub code: String,
    pub message: String,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Payout {
    pub payout_id: String,
    /// Rises by one with each committed change of this object: a receiver keeps, per object,
    /// the highest it has seen.
    pub version: i64,
    pub status: String,
    pub amount: i64,
    pub currency: String,
    pub destination: Destination,
    pub auto_fulfill: bool,
    pub description: Option<String>,
    #[schema(value_type = Object)]
    pub metadata: Metadata,
    pub failure: Option<Failure>,
    pub profile_id: String,
    pub test_mode: bool,
    pub created: DateTime<Utc>,
    pub updated: DateTime<Utc>,
}

impl Payout {
    pub fn render(m: &payout::Model) -> Self {
        Self {
            payout_id: m.id.to_string(),
            version: m.version,
            status: m.status.to_string(),
            amount: m.amount,
            currency: m.currency.clone(),
            destination: m.destination.0.clone(),
            auto_fulfill: m.auto_fulfill,
            description: m.description.clone(),
            metadata: m.metadata.0.clone(),
            failure: m.failure_code.as_ref().map(|code| Failure {
                code: code.clone(),
                message: m.failure_message.clone().unwrap_or_default(),
            }),
            profile_id: m.profile_id.to_string(),
            test_mode: m.test_mode,
            created: m.created_at,
            updated: m.updated_at,
        }
    }
}

//! Request types of the refund routes (the refund object is `payments::api::Refund`).

use chrono::{DateTime, Utc};
use serde::Deserialize;
use utoipa::{IntoParams, ToSchema};

use crate::{
    error::ApiError,
    fields::{check_metadata, check_text, Metadata},
    pagination::ListQuery,
    payments::refunds::{Ask, LineAsk},
};

pub use crate::payments::api::Refund;

/// One line of a refund: by `quantity` (units, with their share of the tax) or by `amount`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RefundLineInput {
    pub line_id: String,
    #[serde(default)]
    pub quantity: Option<i64>,
    #[serde(default)]
    pub amount: Option<i64>,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateRefundRequest {
    pub payment_id: String,
    /// Defaults to everything still refundable. Not together with `lines`.
    #[serde(default)]
    pub amount: Option<i64>,
    #[serde(default)]
    pub lines: Option<Vec<RefundLineInput>>,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub metadata: Option<Metadata>,
}

impl CreateRefundRequest {
    /// What the refund asks for (an amount, everything left, or lines), as the payment's actor
    /// takes it, with its reason and metadata checked.
    pub fn parse(self) -> Result<(Ask, Option<String>, Metadata), ApiError> {
        check_text("reason", self.reason.as_ref(), 500)?;
        check_metadata(self.metadata.as_ref())?;
        let ask = match (self.amount, self.lines) {
            (Some(_), Some(_)) => {
                return Err(ApiError::invalid_param(
                    "lines",
                    "refund by amount or by lines, not both",
                ))
            }
            (amount, None) => Ask::Amount(amount),
            (None, Some(lines)) => Ask::Lines(
                lines
                    .into_iter()
                    .map(|l| LineAsk {
                        line_id: l.line_id,
                        quantity: l.quantity,
                        amount: l.amount,
                    })
                    .collect(),
            ),
        };
        Ok((ask, self.reason, self.metadata.unwrap_or_default()))
    }
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateRefundRequest {
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub metadata: Option<Metadata>,
}

#[derive(Debug, Clone, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RetrieveRefundQuery {
    /// Ask the processor before answering.
    #[serde(default)]
    pub force_sync: Option<bool>,
}

/// Filters of `POST /refunds/list`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ListRefundsRequest {
    /// Only this shop's refunds (a caller scoped to a shop sees only its own anyway).
    #[serde(default)]
    pub profile_id: Option<String>,
    #[serde(default)]
    pub payment_id: Option<String>,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub currency: Option<String>,
    #[serde(default)]
    pub amount_gte: Option<i64>,
    #[serde(default)]
    pub amount_lte: Option<i64>,
    #[serde(default)]
    pub created_after: Option<DateTime<Utc>>,
    #[serde(default)]
    pub created_before: Option<DateTime<Utc>>,
    /// 1 to 100 (default 10).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 100)]
    pub limit: Option<i64>,
    #[serde(default)]
    pub starting_after: Option<String>,
    #[serde(default)]
    pub ending_before: Option<String>,
}

impl ListRefundsRequest {
    pub fn page_query(&self) -> ListQuery {
        ListQuery {
            limit: self.limit,
            starting_after: self.starting_after.clone(),
            ending_before: self.ending_before.clone(),
        }
    }
}

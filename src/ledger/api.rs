//! The balance and balance-transaction objects.

use chrono::{DateTime, Utc};
use payd_entity::balance_transaction;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::pagination::ListQuery;

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Funds {
    pub amount: i64,
    pub currency: String,
}

/// A shop's balance per currency, summed from its ledger.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Balance {
    pub profile_id: String,
    /// What payouts can take.
    pub available: Vec<Funds>,
    /// What payouts have reserved or have in flight.
    pub pending: Vec<Funds>,
    pub test_mode: bool,
}

impl Balance {
    pub fn of(profile_id: &str, test_mode: bool, sums: Vec<(String, i64, i64)>) -> Self {
        let (available, pending) = sums
            .into_iter()
            .map(|(currency, available, pending)| {
                (
                    Funds {
                        amount: available,
                        currency: currency.clone(),
                    },
                    Funds {
                        amount: pending,
                        currency,
                    },
                )
            })
            .unzip();
        Self {
            profile_id: profile_id.to_owned(),
            available,
            pending,
            test_mode,
        }
    }
}

/// One immutable ledger entry (`bt_…`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct BalanceTransaction {
    pub balance_transaction_id: String,
    /// Signed, in minor units.
    pub amount: i64,
    pub currency: String,
    /// `available` or `pending`.
    pub bucket: String,
    /// `capture`, `refund`, `refund_failure`, `capture_cancel`, `dispute`, `payout`,
    /// `payout_release` or `payout_reversal`.
    #[serde(rename = "type")]
    pub kind: String,
    /// The payment, refund, dispute or payout that moved the money.
    pub source_id: String,
    pub created: DateTime<Utc>,
}

impl BalanceTransaction {
    pub fn render(m: &balance_transaction::Model) -> Self {
        Self {
            balance_transaction_id: m.id.clone(),
            amount: m.amount,
            currency: m.currency.clone(),
            bucket: m.bucket.to_string(),
            kind: m.kind.to_string(),
            source_id: m.source_id.clone(),
            created: m.created_at,
        }
    }
}

#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListTransactionsQuery {
    /// One of the entry types.
    #[serde(default, rename = "type")]
    pub kind: Option<String>,
    /// Entries of this payment, refund, dispute or payout.
    #[serde(default)]
    pub source_id: Option<String>,
    #[serde(default)]
    pub currency: Option<String>,
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

impl ListTransactionsQuery {
    pub fn page_query(&self) -> ListQuery {
        ListQuery {
            limit: self.limit,
            starting_after: self.starting_after.clone(),
            ending_before: self.ending_before.clone(),
        }
    }
}

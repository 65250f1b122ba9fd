//! The sandbox billing processor's catalog: its plans and add-ons. Pure data: the processor's
//! records are in `billing.rs`.

use chrono::{DateTime, Utc};
use serde::Serialize;
use utoipa::ToSchema;

use payd_model::subscriptions::Biller;

use super::machine::{self, Interval};

/// The processor's name: a subscription it bills has `billing: "billing_sandbox"`.
pub const NAME: Biller = Biller::BillingSandbox;

/// A plan or add-on of the processor (`GET /subscriptions/items`).
#[derive(Debug, Clone, Copy, Serialize, ToSchema)]
pub struct PlanItem {
    pub item_id: &'static str,
    /// `plan` or `addon`.
    #[serde(rename = "type")]
    pub kind: &'static str,
    pub name: &'static str,
    pub unit_amount: i64,
    pub currency: &'static str,
    #[schema(value_type = String)]
    pub interval: Interval,
    pub interval_count: i64,
}

impl PlanItem {
    /// The end of a first period starting at `from`.
    pub fn period_end(&self, from: DateTime<Utc>) -> Option<DateTime<Utc>> {
        machine::period_end(from, self.interval, self.interval_count, 1)
    }
}

const fn item(
    item_id: &'static str,
    kind: &'static str,
    name: &'static str,
    unit_amount: i64,
    interval: Interval,
) -> PlanItem {
    PlanItem {
        item_id,
        kind,
        name,
        unit_amount,
        currency: "EUR",
        interval,
        interval_count: 1,
    }
}

/// The sandbox processor's catalog: the same for every shop.
pub const ITEMS: [PlanItem; 4] = [
    item(
        "plan_starter_monthly",
        "plan",
        "Starter",
        900,
        Interval::Month,
    ),
    item("plan_pro_monthly", "plan", "Pro", 2900, Interval::Month),
    item(
        "plan_pro_yearly",
        "plan",
        "Pro, yearly",
        29000,
        Interval::Year,
    ),
    item(
        "addon_extra_seat",
        "addon",
        "Extra seat",
        500,
        Interval::Month,
    ),
];

/// The plan with this id (add-ons are not plans).
pub fn plan(id: &str) -> Option<&'static PlanItem> {
    ITEMS.iter().find(|i| i.item_id == id && i.kind == "plan")
}

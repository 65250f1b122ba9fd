//! The subscription and billing-cycle objects, and the request types of their routes.

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::{error::ApiError, fields::Metadata, pagination::ListQuery};

/// An item as asked for: a recurring price of the shop's catalog, and how many.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ItemInput {
    pub price_id: String,
    /// 1 to 1 000 (default 1).
    #[serde(default = "one")]
    pub quantity: i64,
}

fn one() -> i64 {
    1
}

pub use payd_model::subscriptions::{CycleLine, Item};

/// A quantity of a plan or price: 1 to 1 000.
pub fn check_quantity(q: i64) -> Result<(), crate::error::ApiError> {
    match (1..=1_000).contains(&q) {
        true => Ok(()),
        false => Err(crate::error::ApiError::invalid_param(
            "quantity",
            "quantity is 1 to 1000",
        )),
    }
}

/// The item of a processor plan.
pub fn plan_item(plan: &super::plans::PlanItem, quantity: i64) -> Item {
    Item {
        price_id: None,
        product_id: None,
        plan_id: Some(plan.item_id.to_owned()),
        quantity,
        unit_amount: plan.unit_amount,
    }
}

/// `POST /subscriptions`: created active, its first period charged at once against the
/// customer's saved method under a multi-use mandate.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSubscriptionRequest {
    pub customer_id: String,
    /// 1 to 20 items: recurring prices of one currency and one interval. Not with `plan_id`.
    #[serde(default)]
    pub items: Vec<ItemInput>,
    /// A plan of the billing processor (`GET /subscriptions/items`) instead of `items`: the
    /// subscription is made at the processor, which collects every cycle (`POST
    /// /subscriptions` only; no mandate: the processor holds the buyer's method).
    #[serde(default)]
    pub plan_id: Option<String>,
    /// How many of the plan (1 to 1 000, default 1), with `plan_id`.
    #[serde(default)]
    pub quantity: Option<i64>,
    /// The saved method to charge (default: the mandate's).
    #[serde(default)]
    pub payment_method_id: Option<String>,
    /// An active multi-use mandate of the customer.
    #[serde(default)]
    pub mandate_id: Option<String>,
    /// A fixed term of this many periods (1 to 1 000; paused periods count): when the last
    /// one ends the subscription becomes `in_active` (`subscription_expired`). Default: until
    /// cancelled.
    #[serde(default)]
    pub term_cycles: Option<i64>,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub metadata: Option<Metadata>,
}

/// `POST /subscriptions` or `POST /subscriptions/create` parsed: what is past here is valid by
/// type; what it names (the customer, the prices, a mandate) is looked up by `create`.
#[derive(Debug)]
pub struct NewSubscription {
    /// The shop the subscription is made in.
    pub shop: crate::ids::ProfileId,
    pub customer_id: String,
    /// A fixed term of this many periods (1 to 1 000).
    pub term_cycles: Option<i64>,
    pub metadata: Metadata,
    pub billing: Billing,
}

/// Who charges a new subscription, and with what.
#[derive(Debug)]
pub enum Billing {
    /// payd charges `items` under the customer's multi-use mandate.
    Mandate {
        items: Vec<ItemInput>,
        mandate_id: String,
        payment_method_id: Option<String>,
    },
    /// The billing processor bills its plan, holding the buyer's method.
    ProcessorPlan {
        plan: &'static super::plans::PlanItem,
        quantity: i64,
    },
    /// The buyer pays the first cycle of `items` on the hosted checkout, saving the card.
    Checkout { items: Vec<ItemInput> },
}

impl CreateSubscriptionRequest {
    /// The request's fields checked, each refusal naming its field; `checkout` for `POST
    /// /subscriptions/create`.
    pub fn parse(
        self,
        caller: &crate::auth::keys::Caller,
        checkout: bool,
    ) -> Result<NewSubscription, ApiError> {
        let shop = caller.require_shop()?.clone();
        if self.term_cycles.is_some_and(|n| !(1..=1_000).contains(&n)) {
            return Err(ApiError::invalid_param(
                "term_cycles",
                "a fixed term is 1 to 1000 periods",
            ));
        }
        let metadata = crate::fields::check_metadata(self.metadata.as_ref())?.unwrap_or_default();
        let billing = match checkout {
            true => self.checkout_billing()?,
            false if self.plan_id.is_some() => self.plan_billing()?,
            false => self.mandate_billing()?,
        };
        Ok(NewSubscription {
            shop,
            customer_id: self.customer_id,
            term_cycles: self.term_cycles,
            metadata,
            billing,
        })
    }

    fn checkout_billing(&self) -> Result<Billing, ApiError> {
        for (field, given) in [
            ("mandate_id", self.mandate_id.is_some()),
            ("payment_method_id", self.payment_method_id.is_some()),
        ] {
            if given {
                return Err(ApiError::invalid_param(
                    field,
                    "the buyer gives the method on the hosted checkout: use POST /subscriptions to charge a saved one",
                ));
            }
        }
        self.no_plan()?;
        Ok(Billing::Checkout {
            items: self.items.clone(),
        })
    }

    fn plan_billing(&self) -> Result<Billing, ApiError> {
        for (field, given) in [
            ("items", !self.items.is_empty()),
            ("mandate_id", self.mandate_id.is_some()),
            ("payment_method_id", self.payment_method_id.is_some()),
        ] {
            if given {
                return Err(ApiError::invalid_param(
                    field,
                    "a processor plan (plan_id) is billed by the processor, which holds the buyer's method: send neither items nor a method",
                ));
            }
        }
        let plan = self.plan_id.as_deref().and_then(super::plans::plan);
        let plan = plan.ok_or_else(|| {
            ApiError::invalid_param("plan_id", "unknown plan; see GET /subscriptions/items")
        })?;
        let quantity = self.quantity.unwrap_or(1);
        check_quantity(quantity)?;
        Ok(Billing::ProcessorPlan { plan, quantity })
    }

    fn mandate_billing(&self) -> Result<Billing, ApiError> {
        self.no_plan()?;
        let mandate_id = self.mandate_id.clone().ok_or_else(|| {
            ApiError::invalid_param(
                "mandate_id",
                "a subscription is charged under a multi-use mandate of the customer: send mandate_id (or use POST /subscriptions/create for the hosted checkout)",
            )
        })?;
        Ok(Billing::Mandate {
            items: self.items.clone(),
            mandate_id,
            payment_method_id: self.payment_method_id.clone(),
        })
    }

    /// Items carry their own quantity; `plan_id` and `quantity` name a processor plan.
    fn no_plan(&self) -> Result<(), ApiError> {
        let field = match (&self.plan_id, &self.quantity) {
            (Some(_), _) => "plan_id",
            (None, Some(_)) => "quantity",
            (None, None) => return Ok(()),
        };
        Err(ApiError::invalid_param(
            field,
            "plan_id and quantity name a processor plan, made with POST /subscriptions; items carry their own quantity",
        ))
    }
}

/// `PUT /subscriptions/{subscription_id}/update`: new items (same currency and interval).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateRequest {
    pub items: Vec<ItemInput>,
    /// `create_prorations` (default: the difference for the rest of the period is added to the
    /// next renewal), `always_invoice` (charged now; a credit goes to the next renewal) or
    /// `none`.
    #[serde(default)]
    pub proration: Option<String>,
}

impl UpdateRequest {
    /// How the change settles the rest of the period (default `create_prorations`).
    pub fn proration(&self) -> Result<super::machine::Proration, ApiError> {
        let Some(p) = self.proration.as_deref() else {
            return Ok(super::machine::Proration::CreateProrations);
        };
        super::machine::Proration::parse(p).ok_or_else(|| {
            ApiError::invalid_param(
                "proration",
                format!("unknown proration {p:?}; create_prorations, always_invoice or none"),
            )
        })
    }
}

/// `POST /subscriptions/{subscription_id}/cancel`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelRequest {
    /// At the end of the current period (it stays active until then), else now.
    #[serde(default)]
    pub at_period_end: bool,
    /// At most 500 characters.
    #[serde(default)]
    pub reason: Option<String>,
}

/// `POST /subscriptions/{subscription_id}/confirm`: confirm a `created` subscription with a
/// saved method under a mandate instead of the hosted checkout.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfirmRequest {
    /// An active multi-use mandate of the customer.
    pub mandate_id: String,
}

/// `POST /subscriptions/{subscription_id}/resume`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResumeRequest {
    /// Charge under this active multi-use mandate of the customer from now on (an unpaid
    /// subscription's open cycle is tried with it at once).
    #[serde(default)]
    pub mandate_id: Option<String>,
}

/// A subscription. Every subscription event carries it (`content.type =
/// subscription_details`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Subscription {
    pub subscription_id: String,
    /// Rises by one with each committed change of this object: a receiver keeps, per object,
    /// the highest it has seen.
    pub version: i64,
    /// `created`, `active`, `paused`, `unpaid`, `cancelled` or `in_active`.
    pub status: String,
    /// New on every transition.
    pub transition_id: String,
    pub test_mode: bool,
    pub current_period_start: DateTime<Utc>,
    pub current_period_end: DateTime<Utc>,
    pub cancelled_at: Option<DateTime<Utc>>,
    pub cancellation_reason: Option<String>,
    pub cancel_at_period_end: bool,
    pub customer_id: String,
    pub payment_method_id: Option<String>,
    /// `null` while the buyer has not paid on the hosted checkout.
    pub mandate_id: Option<String>,
    /// Where the buyer confirms a subscription made with `POST /subscriptions/create`.
    pub checkout_url: Option<String>,
    pub items: Vec<Item>,
    /// What each cycle charges, in minor units.
    pub amount: i64,
    /// Prorations of plan changes the next renewal adds (negative: a credit it takes off).
    pub pending_adjustment: i64,
    pub currency: String,
    pub interval: String,
    pub interval_count: i64,
    /// A fixed term's number of periods; `null` until cancelled.
    pub term_cycles: Option<i64>,
    /// `payd`: payd charges each cycle; else the billing processor that collects them.
    pub billing: String,
    /// The billing processor's subscription (adopted ones).
    pub processor_subscription_id: Option<String>,
    pub profile_id: String,
    #[schema(value_type = Object)]
    pub metadata: Metadata,
    pub created: DateTime<Utc>,
}

/// A billing cycle (`GET /subscriptions/{subscription_id}/invoices`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Cycle {
    pub cycle_id: String,
    pub subscription_id: String,
    pub period_start: DateTime<Utc>,
    pub period_end: DateTime<Utc>,
    pub amount: i64,
    pub currency: String,
    /// `open` (being collected), `paid` or `void` (cancelled before it was paid).
    pub status: String,
    /// The payment of the last attempt; `null` before the first, and when a billing processor
    /// collects the cycle.
    pub payment_id: Option<String>,
    /// The billing processor's invoice of the last attempt (processor billing).
    pub processor_invoice_id: Option<String>,
    pub attempts: i64,
    /// When the next attempt is due, while the cycle is open.
    pub next_attempt_at: Option<DateTime<Utc>>,
    /// `period`: a whole period's charge; `proration`: what a plan change charged for the
    /// rest of a period (`always_invoice`).
    pub kind: String,
    pub test_mode: bool,
}

/// The cycles of a subscription, newest first.
#[derive(Debug, Serialize, ToSchema)]
pub struct Cycles {
    pub data: Vec<Cycle>,
    pub has_more: bool,
}

/// What the billing side can do with a subscription now.
#[derive(Debug, Serialize, ToSchema)]
pub struct Capabilities {
    pub subscription_id: String,
    pub billing: String,
    /// Of `pause`, `resume`, `cancel`, `cancel_at_period_end`.
    pub actions: Vec<String>,
}

/// `GET /subscriptions/estimate`: a new plan (`price_id`, `quantity`), an existing
/// subscription's next renewal (`subscription_id`), or a change of its plan (both).
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct EstimateQuery {
    #[serde(default)]
    pub price_id: Option<String>,
    /// A plan of the billing processor (`GET /subscriptions/items`) instead of a price.
    #[serde(default)]
    pub plan_id: Option<String>,
    /// 1 to 1 000 (default 1).
    #[serde(default)]
    pub quantity: Option<i64>,
    #[serde(default)]
    pub subscription_id: Option<String>,
}

/// What the next charge would be; nothing is stored.
#[derive(Debug, Serialize, ToSchema)]
pub struct Estimate {
    /// What the next charge is: the plan's amount with the prorations the renewal adds.
    pub amount: i64,
    /// For a plan change: what the rest of the current period is worth
    /// (`create_prorations`; negative: a credit), included in `amount`.
    pub proration: Option<i64>,
    pub currency: String,
    pub interval: String,
    pub interval_count: i64,
    /// The period the charge pays for.
    pub period_start: DateTime<Utc>,
    pub period_end: DateTime<Utc>,
    pub items: Vec<Item>,
    /// The subscription estimated, if any.
    pub subscription_id: Option<String>,
}

/// Filters of `GET /subscriptions/list`.
#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListSubscriptionsQuery {
    #[serde(default)]
    pub profile_id: Option<String>,
    #[serde(default)]
    pub customer_id: Option<String>,
    /// `created`, `active`, `paused`, `unpaid`, `cancelled` or `in_active`.
    #[serde(default)]
    pub status: Option<String>,
    /// 1 to 100 (default 10).
    #[serde(default)]
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<i64>,
    #[serde(default)]
    pub starting_after: Option<String>,
    #[serde(default)]
    pub ending_before: Option<String>,
}

impl ListSubscriptionsQuery {
    pub fn page_query(&self) -> ListQuery {
        ListQuery {
            limit: self.limit,
            starting_after: self.starting_after.clone(),
            ending_before: self.ending_before.clone(),
        }
    }
}

impl Subscription {
    pub fn render(s: &payd_entity::subscription::Model) -> Result<Self, sea_orm::DbErr> {
        Ok(Self {
            subscription_id: s.id.to_string(),
            version: s.version,
            status: s.status.to_string(),
            transition_id: s.transition_id.clone(),
            test_mode: s.test_mode,
            current_period_start: s.current_period_start,
            current_period_end: s.current_period_end,
            cancelled_at: s.cancelled_at,
            cancellation_reason: s.cancellation_reason.clone(),
            cancel_at_period_end: s.cancel_at_period_end,
            customer_id: s.customer_id.to_string(),
            payment_method_id: s.payment_method_id.as_ref().map(ToString::to_string),
            mandate_id: s.mandate_id.as_ref().map(ToString::to_string),
            checkout_url: s.checkout_url.clone(),
            items: s.items.0.clone(),
            amount: s.amount,
            pending_adjustment: s.pending_adjustment,
            currency: s.currency.clone(),
            interval: s.interval.to_string(),
            interval_count: s.interval_count,
            billing: s.billing.to_string(),
            processor_subscription_id: s
                .processor_subscription_id
                .as_ref()
                .map(ToString::to_string),
            term_cycles: s.term_cycles,
            profile_id: s.profile_id.to_string(),
            metadata: s.metadata.0.clone(),
            created: s.created_at,
        })
    }
}

/// The line id of a cycle's charge for plan changes.
pub const PRORATION_LINE: &str = "proration";

impl Cycle {
    pub fn render(
        c: &payd_entity::subscription_cycle::Model,
        test_mode: bool,
    ) -> Result<Self, sea_orm::DbErr> {
        let proration = matches!(&c.lines[..], [only] if only.line_id == PRORATION_LINE);
        Ok(Self {
            cycle_id: c.id.clone(),
            subscription_id: c.subscription_id.to_string(),
            period_start: c.period_start,
            period_end: c.period_end,
            amount: c.amount,
            currency: c.currency.clone(),
            status: c.status.to_string(),
            payment_id: c.payment_id.as_ref().map(ToString::to_string),
            processor_invoice_id: c.processor_invoice_id.as_ref().map(ToString::to_string),
            attempts: c.attempts,
            next_attempt_at: c.next_attempt_at,
            kind: if proration { "proration" } else { "period" }.to_owned(),
            test_mode,
        })
    }
}

/// `POST /subscriptions/adopt`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AdoptRequest {
    /// The billing processor's subscription (`bsub_…`), in the caller's shop.
    pub processor_subscription_id: String,
    /// The payd customer it bills; default: a new customer made from the processor's.
    #[serde(default)]
    pub customer_id: Option<String>,
}

/// `POST /subscriptions/import/apply`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyImportRequest {
    pub preview_id: String,
}

/// `GET /subscriptions/items`: the billing processor's plans and add-ons.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProcessorItems {
    /// The processor's name (`billing` of the subscriptions it bills).
    pub processor: String,
    pub data: Vec<super::plans::PlanItem>,
}

/// Sandbox: a subscription made at the billing processor (as in its own dashboard).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SandboxProcessorSubscription {
    /// 1 to 200 characters.
    pub customer_name: String,
    #[serde(default)]
    pub customer_email: Option<String>,
    /// One of the processor's plans.
    pub plan_id: String,
    /// 1 to 1 000 (default 1).
    #[serde(default = "one")]
    pub quantity: i64,
    /// Every collection is declined.
    #[serde(default)]
    pub declines: bool,
}

/// Sandbox: a change made at the billing processor; `POST …/sync` then brings it into payd.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct SandboxProcessorChange {
    /// `active`, `paused` or `cancelled`.
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub plan_id: Option<String>,
    #[serde(default)]
    pub quantity: Option<i64>,
    #[serde(default)]
    pub declines: Option<bool>,
}

/// The payload of `invoice_disputed`: a cycle the billing processor collected was charged
/// back at the processor.
#[derive(Debug, Serialize, ToSchema)]
pub struct InvoiceDisputed {
    /// The processor's dispute.
    pub dispute_id: String,
    pub subscription_id: String,
    /// The billing cycle (`cyc_…`) the invoice collected.
    pub invoice_id: Option<String>,
    pub amount: i64,
    pub currency: String,
    /// `needs_response` when it opens.
    pub dispute_status: String,
    pub test_mode: bool,
    /// The billing processor, as in the subscription's `billing`.
    pub processor: String,
    pub processor_subscription_id: Option<String>,
    pub processor_invoice_id: String,
}

/// The payload of `invoice_paid` and `invoice_payment_failed`: the subscription, the cycle and
/// its payment.
#[derive(Debug, Serialize, ToSchema)]
pub struct InvoicePaid {
    #[serde(flatten)]
    pub subscription: Subscription,
    pub invoice: Cycle,
    /// The cycle's payment as `GET /payments/{payment_id}` shows it; `null` when a billing
    /// processor collected the cycle, or the charge was refused before a payment was made.
    #[schema(value_type = Option<crate::payments::api::Payment>)]
    pub payment: Option<serde_json::Value>,
}

/// The tax one rule puts on a line.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LineTax {
    pub rule_id: Option<String>,
    pub rate_bps: i64,
    pub inclusive: bool,
    pub amount: i64,
}

/// What the shop's tax rules put on a cycle's lines for the subscription's customer at `at`
/// (each line priced by `quantity × unit_amount`), one answer per line. The rules are the
/// invoices' (`invoices::settings`), which implement this port; `app.rs` wires it, so
/// subscriptions never import invoices.
pub trait CycleTax: Send + Sync + 'static {
    fn tax<'a>(
        &'a self,
        s: &'a payd_entity::subscription::Model,
        lines: &'a [CycleLine],
        at: DateTime<Utc>,
    ) -> futures_util::future::LocalBoxFuture<'a, Result<Vec<LineTax>, sea_orm::DbErr>>;
}

/// `GET /subscriptions/estimate` parsed.
#[derive(Debug)]
pub enum EstimateAsk {
    /// What a billing processor's plan collects first, from now.
    ProcessorPlan {
        plan: &'static super::plans::PlanItem,
        quantity: i64,
    },
    /// A plan of one price: new in the shop, or a change of a subscription's plan.
    Price {
        price_id: String,
        quantity: i64,
        of: PlanOf,
    },
    /// A subscription's next renewal.
    Renewal(crate::ids::SubscriptionId),
}

/// Whose plan an estimate of a price is.
#[derive(Debug)]
pub enum PlanOf {
    /// A new subscription of this shop.
    Shop(crate::ids::ProfileId),
    /// A change of this subscription's plan.
    Subscription(crate::ids::SubscriptionId),
}

impl EstimateQuery {
    pub fn parse(&self, caller: &crate::auth::keys::Caller) -> Result<EstimateAsk, ApiError> {
        use crate::{fields::parse_id, ids::SubscriptionId};
        if let Some(plan_id) = &self.plan_id {
            let plan = super::plans::plan(plan_id)
                .ok_or_else(|| ApiError::not_found("plan").param("plan_id"))?;
            let quantity = self.quantity.unwrap_or(1);
            check_quantity(quantity)?;
            return Ok(EstimateAsk::ProcessorPlan { plan, quantity });
        }
        let subscription = self
            .subscription_id
            .as_deref()
            .map(parse_id::<SubscriptionId>)
            .transpose()?;
        match (&self.price_id, subscription) {
            (Some(price_id), subscription) => Ok(EstimateAsk::Price {
                price_id: price_id.clone(),
                quantity: self.quantity.unwrap_or(1),
                of: match subscription {
                    Some(id) => PlanOf::Subscription(id),
                    None => PlanOf::Shop(caller.require_shop()?.clone()),
                },
            }),
            (None, Some(id)) => Ok(EstimateAsk::Renewal(id)),
            (None, None) => Err(ApiError::invalid_param(
                "price_id",
                "send price_id (and quantity) for a new plan, subscription_id for the next renewal, or both for a plan change",
            )),
        }
    }
}

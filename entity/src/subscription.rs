//! A subscription: a customer billed every period for recurring prices of the catalog.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "subscriptions")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: payd_model::ids::SubscriptionId,
    pub merchant_id: payd_model::ids::MerchantId,
    pub profile_id: payd_model::ids::ProfileId,
    pub test_mode: bool,
    pub customer_id: payd_model::ids::CustomerId,
    pub payment_method_id: Option<payd_model::ids::PaymentMethodId>,
    /// None while a subscription made for the hosted checkout waits for the buyer.
    pub mandate_id: Option<payd_model::ids::MandateId>,
    pub checkout_url: Option<String>,
    pub items: payd_model::json::Json<Vec<payd_model::subscriptions::Item>>,
    pub amount: i64,
    /// Prorations for the next renewal (negative: a credit).
    pub pending_adjustment: i64,
    pub currency: String,
    pub interval: payd_model::catalog::Interval,
    pub interval_count: i64,
    pub status: payd_model::subscriptions::Status,
    pub anchor_at: DateTimeUtc,
    /// Which period is current (1 for the first).
    pub period_index: i64,
    /// The period number at `anchor_at`: period `k` ends `k − anchor_index` intervals after
    /// it (0 at creation; a resume that starts a new period anchors it there).
    pub anchor_index: i64,
    /// What a whole period is paid at for the current period: the plan's price when it was
    /// charged, moved by plan changes that settle the rest of the period.
    pub paid_rate: i64,
    /// A fixed term: it ends (`in_active`) when its period number `term_cycles` ends.
    pub term_cycles: Option<i64>,
    pub current_period_start: DateTimeUtc,
    pub current_period_end: DateTimeUtc,
    pub cancel_at_period_end: bool,
    pub cancelled_at: Option<DateTimeUtc>,
    pub cancellation_reason: Option<String>,
    pub billing: payd_model::subscriptions::Biller,
    /// The billing processor's subscription, when a billing processor bills it (adopted).
    pub processor_subscription_id: Option<payd_model::ids::ProcessorSubscriptionId>,
    pub transition_id: String,
    pub ever_active: bool,
    pub open_cycle_id: Option<String>,
    pub metadata: payd_model::json::Json<payd_model::metadata::Metadata>,
    pub version: i64,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

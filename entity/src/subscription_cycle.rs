//! One billing cycle of a subscription: a period's charge and the attempts to collect it.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "subscription_cycles")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub subscription_id: payd_model::ids::SubscriptionId,
    pub seq: i64,
    pub period_start: DateTimeUtc,
    pub period_end: DateTimeUtc,
    pub amount: i64,
    pub currency: String,
    pub lines: payd_model::json::Json<Vec<payd_model::subscriptions::CycleLine>>,
    pub status: payd_model::subscriptions::CycleStatus,
    pub attempts: i64,
    /// An attempt's payment is recorded and its outcome is not yet.
    pub charging: bool,
    pub payment_id: Option<payd_model::ids::PaymentId>,
    /// The billing processor's invoice that collected it (processor billing).
    pub processor_invoice_id: Option<payd_model::ids::ProcessorInvoiceId>,
    pub next_attempt_at: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

//! A subscription at the sandbox billing processor: the processor's own record, which payd
//! adopts and then follows.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "billing_subscriptions")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: payd_model::ids::ProcessorSubscriptionId,
    pub merchant_id: payd_model::ids::MerchantId,
    pub profile_id: payd_model::ids::ProfileId,
    pub test_mode: bool,
    pub customer_name: String,
    pub customer_email: Option<String>,
    pub plan_id: String,
    pub quantity: i64,
    pub status: payd_model::subscriptions::ProcessorStatus,
    pub current_period_start: DateTimeUtc,
    pub current_period_end: DateTimeUtc,
    /// Every collection is declined (a sandbox switch).
    pub declines: bool,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

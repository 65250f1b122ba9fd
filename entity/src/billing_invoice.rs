//! An invoice the sandbox billing processor collected (or failed to) for a subscription.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "billing_invoices")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: payd_model::ids::ProcessorInvoiceId,
    pub billing_subscription_id: payd_model::ids::ProcessorSubscriptionId,
    /// The collector's key: one invoice per key.
    #[sea_orm(unique)]
    pub collection_key: String,
    pub amount: i64,
    pub currency: String,
    pub status: payd_model::subscriptions::ProcessorInvoiceStatus,
    /// The processor's dispute once the buyer charged it back.
    pub dispute_id: Option<String>,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

//! A refund of a payment: its amount, its share of each product line, and its status.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "refunds")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: payd_model::ids::RefundId,
    pub payment_id: payd_model::ids::PaymentId,
    pub merchant_id: payd_model::ids::MerchantId,
    pub profile_id: payd_model::ids::ProfileId,
    pub test_mode: bool,
    pub status: payd_model::refunds::Status,
    pub amount: i64,
    pub currency: String,
    /// JSON array of `{line_id, quantity, amount}`.
    pub lines: payd_model::json::Json<Vec<payd_model::refunds::LineRefund>>,
    pub reason: Option<String>,
    pub metadata: payd_model::json::Json<payd_model::metadata::Metadata>,
    pub processor_reference: Option<String>,
    pub failure_reason: Option<String>,
    pub version: i64,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

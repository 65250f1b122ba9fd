//! A payout (`po_…`) of a shop's available balance to a bank account or a card.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "payouts")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: payd_model::ids::PayoutId,
    pub merchant_id: payd_model::ids::MerchantId,
    pub profile_id: payd_model::ids::ProfileId,
    pub test_mode: bool,
    pub status: payd_model::payouts::Status,
    pub amount: i64,
    pub currency: String,
    /// The destination, masked.
    pub destination: payd_model::json::Json<payd_model::payouts::Destination>,
    /// The processor's token for the destination (never the account number).
    pub recipient: String,
    pub description: Option<String>,
    /// JSON object.
    pub metadata: payd_model::json::Json<payd_model::metadata::Metadata>,
    pub auto_fulfill: bool,
    /// Whether its amount is held from the available balance now.
    pub reserved: bool,
    pub failure_code: Option<String>,
    pub failure_message: Option<String>,
    pub processor_reference: Option<String>,
    /// When the processor was asked to pay it out.
    pub submitted_at: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    pub version: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

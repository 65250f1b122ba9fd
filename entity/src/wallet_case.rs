//! A seller case at the sandbox wallet processor: the processor's own record of a buyer's
//! inquiry or chargeback, which payd imports as a dispute.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "wallet_cases")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub merchant_id: payd_model::ids::MerchantId,
    pub profile_id: payd_model::ids::ProfileId,
    pub test_mode: bool,
    pub payment_id: payd_model::ids::PaymentId,
    pub case_type: payd_model::wallet::CaseType,
    pub status: payd_model::wallet::Status,
    /// How a `RESOLVED` case ended.
    pub outcome: Option<payd_model::wallet::Outcome>,
    pub reason: String,
    pub amount: i64,
    pub currency: String,
    /// The seller's open offer, while the buyer considers it.
    pub offer_amount: Option<i64>,
    /// The buyer shipped the item back.
    pub return_shipped: bool,
    /// The seller's last message or evidence note.
    pub note: Option<String>,
    /// When the processor acts on the case next.
    pub due_at: Option<DateTimeUtc>,
    /// How many history entries the case has.
    pub entries: i64,
    pub version: i64,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

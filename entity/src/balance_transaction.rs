//! One movement of a shop's money (`bt_…`): immutable; a balance is the sum of its entries.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "balance_transactions")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub profile_id: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub test_mode: bool,
    #[sea_orm(primary_key, auto_increment = false)]
    pub currency: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub merchant_id: String,
    pub bucket: payd_model::ledger::Bucket,
    /// Signed, in minor units.
    pub amount: i64,
    pub kind: payd_model::ledger::Kind,
    /// The payment, refund, dispute or payout that moved the money.
    pub source_id: String,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

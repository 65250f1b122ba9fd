//! The row a payout's reservation updates first in its transaction, so that reservations of
//! one shop's currency are serialized (each then sees the others' entries).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "balance_locks")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub profile_id: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub test_mode: bool,
    #[sea_orm(primary_key, auto_increment = false)]
    pub currency: String,
    /// How many reservations were made (only its row lock matters).
    pub reservations: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

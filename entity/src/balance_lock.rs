//! The row a payout's reservation updates first in its transaction, so that reservations of
//! one shop's currency are serialized, and the running total of its available balance: the
//! available-bucket entries folded so far (the others wait in `balance_deltas`).

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
    /// The sum of the available-bucket entries folded into it (a reservation folds the
    /// deltas waiting, then needs this to cover it).
    pub available: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

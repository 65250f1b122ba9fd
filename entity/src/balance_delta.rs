//! An available-bucket ledger entry not yet folded into its shop's running total
//! (`balance_locks.available`): written with the entry (same id), deleted by the reservation
//! that folds it. The available balance is the running total plus the deltas waiting. Keyed
//! by account first: a fold reads and deletes a range of the one index.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "balance_deltas")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub profile_id: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub test_mode: bool,
    #[sea_orm(primary_key, auto_increment = false)]
    pub currency: String,
    /// The entry's id.
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub amount: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

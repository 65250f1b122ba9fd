//! The next number of one numbering series (a prefix) of a merchant's mode.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "invoice_counters")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub merchant_id: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub test_mode: bool,
    #[sea_orm(primary_key, auto_increment = false)]
    pub series: String,
    pub next_number: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

//! A merchant: the account that owns shops, keys and every object they create.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "merchants")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: payd_model::ids::MerchantId,
    pub name: String,
    pub created_at: DateTimeUtc,
    /// Seconds its sandbox test clock is ahead of the base time.
    pub sandbox_clock_offset: i64,
    /// When the operator suspended it: its keys are refused until it is reinstated.
    pub suspended_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

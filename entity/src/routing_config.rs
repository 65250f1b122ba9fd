//! A shop's routing rules in one mode, stored whole as JSON and replaced whole.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "routing_configs")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub profile_id: String,
    /// Test or live: each mode routes among its own accounts by its own rules.
    #[sea_orm(primary_key, auto_increment = false)]
    pub test_mode: bool,
    pub rules: payd_model::json::Json<payd_model::payments::RoutingRules>,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

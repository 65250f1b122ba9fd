//! A price of a product: its amount, currency and recurrence never change.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "prices")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: payd_model::ids::PriceId,
    pub product_id: payd_model::ids::ProductId,
    pub merchant_id: payd_model::ids::MerchantId,
    pub profile_id: payd_model::ids::ProfileId,
    pub test_mode: bool,
    pub unit_amount: i64,
    pub currency: String,
    /// None for a one-off price.
    pub recurring_interval: Option<payd_model::catalog::Interval>,
    pub recurring_interval_count: Option<i64>,
    pub nickname: Option<String>,
    /// JSON object.
    pub metadata: Option<payd_model::json::Json<payd_model::metadata::Metadata>>,
    pub active: bool,
    pub external_id: Option<String>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

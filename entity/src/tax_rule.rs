//! A tax rule of a merchant (`profile_id` empty) or of a shop, in one mode.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "tax_rules")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub merchant_id: String,
    pub profile_id: String,
    /// Its place in the set as saved.
    pub position: i64,
    pub rate_bps: i64,
    pub country: String,
    pub region: Option<String>,
    pub tax_category: Option<String>,
    pub inclusive: bool,
    pub valid_from: Option<DateTimeUtc>,
    pub valid_until: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
    /// Each mode has its own rules: a test key never changes the tax on live invoices.
    pub test_mode: bool,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

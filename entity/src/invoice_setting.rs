//! Invoice settings: a merchant's defaults (`profile_id` empty) or a shop's overrides (unset
//! fields fall back to the merchant's), in one mode.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "invoice_settings")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub merchant_id: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub profile_id: String,
    /// Each mode has its own settings.
    #[sea_orm(primary_key, auto_increment = false)]
    pub test_mode: bool,
    pub number_prefix: Option<String>,
    pub credit_note_prefix: Option<String>,
    pub seller: Option<payd_model::json::Json<payd_model::invoices::Party>>,
    pub footer: Option<String>,
    pub payment_terms_days: Option<i64>,
    pub locale: Option<payd_model::locale::Locale>,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

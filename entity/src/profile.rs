//! A shop (`prof_…`) of a merchant: the scope that shop-owned objects belong to.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "profiles")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: payd_model::ids::ProfileId,
    pub merchant_id: payd_model::ids::MerchantId,
    pub name: String,
    pub created_at: DateTimeUtc,
    /// The name buyers see on the hosted pages (`name` when unset).
    pub display_name: Option<String>,
    /// One of the merchant's uploaded images, shown on the hosted pages.
    pub logo_file_id: Option<String>,
    /// `#rrggbb`, with at least 4.5:1 contrast against white.
    pub accent_color: Option<String>,
    /// The origins that may frame the shop's card form: a JSON array of `scheme://host[:port]`.
    pub embed_origins: Option<payd_model::json::Json<Vec<String>>>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

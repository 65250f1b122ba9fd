//! A product of a shop's catalog, with its add-on groups and bundle components.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "products")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: payd_model::ids::ProductId,
    pub merchant_id: payd_model::ids::MerchantId,
    pub profile_id: payd_model::ids::ProfileId,
    pub test_mode: bool,
    pub name: String,
    pub description: Option<String>,
    pub category_id: Option<payd_model::ids::CategoryId>,
    /// JSON object.
    pub metadata: Option<payd_model::json::Json<payd_model::metadata::Metadata>>,
    /// JSON array of image ids.
    pub images: payd_model::json::Json<Vec<payd_model::ids::ImageId>>,
    pub active: bool,
    pub default_price_id: Option<payd_model::ids::PriceId>,
    /// Its components; none for a product that is not a bundle.
    pub bundle: Option<payd_model::json::Json<Vec<payd_model::catalog::Component>>>,
    /// Its add-on groups.
    pub addon_groups: payd_model::json::Json<Vec<payd_model::catalog::AddonGroup>>,
    /// The product's id at the catalog processor it was imported from.
    pub external_id: Option<String>,
    pub version: i64,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

//! A shop's webhook endpoint and its signing secrets (the previous one lives on during rotation).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "webhook_endpoints")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub merchant_id: String,
    #[sea_orm(unique)]
    pub profile_id: String,
    pub url: String,
    /// `whsec_…`: payd signs with it, so it is kept (and never shown again).
    pub secret: String,
    pub previous_secret: Option<String>,
    pub previous_secret_expires_at: Option<DateTimeUtc>,
    pub enabled: bool,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

//! A catalog import preview: what applying it will do, exactly.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "catalog_previews")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: payd_model::ids::ImportPreviewId,
    pub merchant_id: payd_model::ids::MerchantId,
    pub profile_id: payd_model::ids::ProfileId,
    pub test_mode: bool,
    /// The processor account previewed.
    pub account: String,
    /// What the import will do.
    pub plan: payd_model::json::Json<Vec<payd_model::catalog::Step>>,
    /// The shop catalog's fingerprint when the preview was made.
    pub fingerprint: String,
    pub applied_at: Option<DateTimeUtc>,
    /// The apply's answer, as JSON.
    pub result: Option<String>,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

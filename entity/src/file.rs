//! A file a merchant uploaded (dispute evidence): its bytes and their SHA-256.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "files")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: payd_model::ids::FileId,
    pub merchant_id: payd_model::ids::MerchantId,
    pub test_mode: bool,
    pub purpose: payd_model::files::Purpose,
    pub filename: String,
    pub content_type: String,
    pub size: i64,
    pub sha256: String,
    /// Empty for files uploaded in chunks (`file_chunks`), which all new files are.
    pub bytes: Vec<u8>,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

//! The PDF of a finalized invoice or credit note, rendered once.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "invoice_pdfs")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub invoice_id: payd_model::ids::InvoiceId,
    /// Hex SHA-256 of `bytes`.
    pub sha256: String,
    pub bytes: Vec<u8>,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

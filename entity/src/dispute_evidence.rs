//! A file attached to a dispute as evidence of one kind.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "dispute_evidence")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub dispute_id: payd_model::ids::DisputeId,
    #[sea_orm(primary_key, auto_increment = false)]
    pub file_id: payd_model::ids::FileId,
    pub evidence_type: payd_model::disputes::EvidenceType,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

//! One entry of a wallet case's append-only history: who did what, in which order.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "wallet_case_entries")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub case_id: String,
    /// 1, 2, 3 … in the order the entries were written.
    #[sea_orm(primary_key, auto_increment = false)]
    pub seq: i64,
    pub actor: payd_model::wallet::Actor,
    pub kind: payd_model::wallet::EntryKind,
    /// The case type (stage) when the entry was written.
    pub case_type: payd_model::wallet::CaseType,
    pub status_from: Option<payd_model::wallet::Status>,
    pub status_to: Option<payd_model::wallet::Status>,
    pub message: Option<String>,
    pub amount: Option<i64>,
    /// A JSON array of file ids.
    pub file_ids: Option<payd_model::json::Json<Vec<String>>>,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

//! Due work that must survive restarts: one row per (kind, entity), claimed with a lease.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "scheduled_jobs")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub kind: String,
    pub entity_id: String,
    pub due_at: DateTimeUtc,
    /// JSON text handed to the job's handler.
    pub payload: String,
    pub attempts: i32,
    pub last_error: Option<String>,
    pub lease_owner: Option<String>,
    pub lease_until: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
    /// The sandbox merchant on whose timeline it was scheduled (`due_at` is then that
    /// merchant's due time less its clock's offset); none on the base time.
    pub merchant_id: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

//! An event: the envelope exactly as it is posted, written with the change it announces.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "events")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: payd_model::ids::EventId,
    pub merchant_id: payd_model::ids::MerchantId,
    pub profile_id: Option<payd_model::ids::ProfileId>,
    pub test_mode: bool,
    pub event_type: String,
    pub object_id: String,
    /// The envelope's JSON text: the body of every delivery attempt, byte for byte.
    pub payload: String,
    pub created_at: DateTimeUtc,
    /// When the retention purge replaced the payload with a tombstone (`null`).
    pub purged_at: Option<DateTimeUtc>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

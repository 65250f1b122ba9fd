//! The delivery of one event to one endpoint: its status, failure counts and next attempt.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "deliveries")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub event_id: String,
    pub merchant_id: String,
    pub endpoint_id: String,
    pub status: payd_model::webhooks::DeliveryStatus,
    pub attempts: i32,
    pub transient_failures: i32,
    pub auth_failures: i32,
    pub next_attempt_at: DateTimeUtc,
    pub lease_owner: Option<String>,
    pub lease_until: Option<DateTimeUtc>,
    pub last_status_code: Option<i32>,
    /// The last failed attempt's error kind (`payd_model::webhooks::ErrorKind`), kept as text:
    /// the dispatcher's claim reads it back (`UPDATE … RETURNING`) for a whole batch, where a
    /// value that does not decode would hold back every merchant's deliveries in it.
    pub last_error: Option<String>,
    pub delivered_at: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

//! One HTTP attempt of a delivery, as the receiver answered it.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "delivery_attempts")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub delivery_id: String,
    pub event_id: String,
    pub number: i32,
    pub trigger: payd_model::webhooks::AttemptTrigger,
    /// JSON object of the request headers (the signature included; no secret).
    pub request_headers: payd_model::json::Json<std::collections::BTreeMap<String, String>>,
    pub response_status: Option<i32>,
    /// The first 16 KiB of the answer.
    pub response_body: Option<String>,
    /// When not delivered.
    pub error_kind: Option<payd_model::webhooks::ErrorKind>,
    pub duration_ms: i64,
    pub next_attempt_at: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

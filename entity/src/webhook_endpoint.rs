//! A shop's webhook endpoint and its signing secrets (the previous one lives on during rotation).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "webhook_endpoints")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub merchant_id: payd_model::ids::MerchantId,
    /// With `test_mode`, unique: a shop has one endpoint per mode.
    pub profile_id: payd_model::ids::ProfileId,
    pub url: String,
    /// `whsec_…`: payd signs with it, so it is kept (and never shown again).
    pub secret: String,
    pub previous_secret: Option<String>,
    pub previous_secret_expires_at: Option<DateTimeUtc>,
    pub enabled: bool,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    /// Attempts failed since the last success.
    pub consecutive_failures: i32,
    /// The first failure after the last success; `None` while healthy.
    pub failing_since: Option<DateTimeUtc>,
    pub last_success_at: Option<DateTimeUtc>,
    /// Set while disabled (`merchant` when NULL: rows from before the column).
    pub disabled_reason: Option<payd_model::webhooks::DisabledReason>,
    /// The most requests a second payd sends it; `None`: no limit.
    pub max_per_second: Option<i32>,
    /// The first moment (wall time) the next request to it may start, under `max_per_second`.
    pub next_send_at: Option<DateTimeUtc>,
    /// Its mode: only that mode's keys read or change it, and only that mode's events reach it.
    pub test_mode: bool,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

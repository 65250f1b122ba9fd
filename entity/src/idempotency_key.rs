//! A POST request's `Idempotency-Key`, its body fingerprint and, once answered, the answer.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "idempotency_keys")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub merchant_id: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub mode: payd_model::keys::Mode,
    /// `{key kind}:{bound shop or *}`: keys of another kind or shop never see these answers.
    #[sea_orm(primary_key, auto_increment = false)]
    pub scope: String,
    #[sea_orm(primary_key, auto_increment = false)]
    pub key: String,
    /// SHA-256 of method, path, query and body.
    pub fingerprint: String,
    pub state: payd_model::idempotency::KeyState,
    pub response_status: Option<i32>,
    /// JSON array of `[name, value]` pairs replayed with the body.
    pub response_headers: Option<payd_model::json::Json<Vec<(String, String)>>>,
    pub response_body: Option<String>,
    /// Set when the answer carries a one-time secret: it is replayed only to this API key.
    pub owner_key_id: Option<String>,
    pub created_at: DateTimeUtc,
    /// An `in_flight` key whose holder died is taken over after this time.
    pub locked_until: DateTimeUtc,
    /// The object the request committed a change to (in that change's transaction): a retry
    /// of a request whose answer was not stored resumes from it instead of running again.
    pub recovery_point: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

//! One security action on a merchant's account: who did what, to what, and when. Never holds a
//! secret.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "audit_log")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: payd_model::ids::AuditEntryId,
    pub merchant_id: payd_model::ids::MerchantId,
    /// The API key that acted; none for the operator (admin key).
    pub actor_key_id: Option<payd_model::ids::KeyId>,
    /// `api_key.created`, `api_key.revoked`, `webhook_endpoint.url_changed`,
    /// `webhook_endpoint.secret_rotated`, `processor_account.added`.
    pub action: payd_model::audit::Action,
    /// The id of what it acted on.
    pub target_id: String,
    /// JSON object: what changed (a URL, a shop, a name), never a secret.
    pub details: payd_model::json::Json<payd_model::json::Value>,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

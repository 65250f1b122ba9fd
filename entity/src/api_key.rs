//! An API key: only its peppered hash and last four characters are stored.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "api_keys")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: payd_model::ids::KeyId,
    pub merchant_id: payd_model::ids::MerchantId,
    /// The shop the key is bound to, if any.
    pub profile_id: Option<payd_model::ids::ProfileId>,
    pub kind: payd_model::keys::KeyKind,
    pub mode: payd_model::keys::Mode,
    #[sea_orm(unique)]
    pub key_hash: String,
    pub last4: String,
    pub name: Option<String>,
    pub created_at: DateTimeUtc,
    pub revoked_at: Option<DateTimeUtc>,
    /// The pepper `key_hash` was made with (first 8 hex digits of its SHA-256); none for a key
    /// made before payd recorded it.
    pub pepper_id: Option<String>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {
    #[sea_orm(
        belongs_to = "super::merchant::Entity",
        from = "Column::MerchantId",
        to = "super::merchant::Column::Id"
    )]
    Merchant,
}

impl Related<super::merchant::Entity> for Entity {
    fn to() -> RelationDef {
        Relation::Merchant.def()
    }
}

impl ActiveModelBehavior for ActiveModel {}

//! The lookups that authenticate a request: a key by its hash, and a shop of the caller's
//! merchant. Writing keys, shops and merchants is the accounts module's.

use payd_entity::{api_key, merchant, profile};
use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter};

use crate::ids::{MerchantId, ProfileId};

/// The key with this hash, and its merchant's sandbox clock offset (read in the same query:
/// every request on a sandbox key runs on that clock).
pub async fn find_key_by_hash(
    db: &impl ConnectionTrait,
    hash: &str,
) -> Result<Option<(api_key::Model, i64)>, DbErr> {
    Ok(api_key::Entity::find()
        .filter(api_key::Column::KeyHash.eq(hash))
        .find_also_related(merchant::Entity)
        .one(db)
        .await?
        .map(|(key, merchant)| (key, merchant.map_or(0, |m| m.sandbox_clock_offset))))
}

/// A shop of this merchant; `None` for another merchant's shop, so that its existence stays hidden.
pub async fn find_profile(
    db: &impl ConnectionTrait,
    merchant_id: &MerchantId,
    profile_id: &ProfileId,
) -> Result<Option<profile::Model>, DbErr> {
    profile::Entity::find_by_id(profile_id.as_str())
        .filter(profile::Column::MerchantId.eq(merchant_id.as_str()))
        .one(db)
        .await
}

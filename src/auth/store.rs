//! The lookups that authenticate a request: a key by its hash, and a shop of the caller's
//! merchant. Writing keys, shops and merchants is the accounts module's.

use payd_entity::{api_key, merchant, profile};
use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter};

use crate::ids::{MerchantId, ProfileId};
use crate::lookups::FoundKey;

/// The key with this hash.
pub async fn find_key_by_hash(
    db: &impl ConnectionTrait,
    hash: &str,
) -> Result<Option<FoundKey>, DbErr> {
    Ok(api_key::Entity::find()
        .filter(api_key::Column::KeyHash.eq(hash))
        .find_also_related(merchant::Entity)
        .one(db)
        .await?
        .map(|(key, merchant)| FoundKey {
            key,
            clock_offset: merchant.as_ref().map_or(0, |m| m.sandbox_clock_offset),
            suspended: merchant.is_some_and(|m| m.suspended_at.is_some()),
        }))
}

/// A shop of this merchant; `None` for another merchant's shop, so that its existence stays hidden.
pub async fn find_profile(
    db: &impl ConnectionTrait,
    merchant_id: &MerchantId,
    profile_id: &ProfileId,
) -> Result<Option<profile::Model>, DbErr> {
    profile::Entity::find_by_id(profile_id.clone())
        .filter(profile::Column::MerchantId.eq(merchant_id))
        .one(db)
        .await
}

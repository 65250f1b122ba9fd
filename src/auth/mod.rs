//! Who is calling: API keys (secret and publishable, sandbox and live), the selected shop,
//! and the admin key. Keys are stored as peppered HMACs and compared in constant time.

use actix_web::{dev::Payload, web, FromRequest, HttpMessage, HttpRequest};
use futures_util::future::LocalBoxFuture;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

pub mod keys;
pub mod store;

pub use keys::{generate_key, hash_key, parse_key, Caller, KeyKind, Mode, Scope};

use crate::{
    error::ApiError,
    ids::{Id, KeyId, MerchantId, ProfileId},
    state::AppState,
};

/// Resolves the caller once per request (the idempotency middleware and the route share it).
pub async fn authenticate(req: &HttpRequest, state: &AppState) -> Result<Caller, ApiError> {
    if let Some(caller) = req.extensions().get::<Caller>() {
        crate::clock::enter(caller.timeline());
        return Ok(caller.clone());
    }
    let presented = req
        .headers()
        .get("api-key")
        .ok_or_else(|| {
            ApiError::unauthenticated("missing_api_key", "send your API key in the api-key header")
        })?
        .to_str()
        .map_err(|_| invalid_key())?;
    let (kind, mode) = parse_key(presented).ok_or_else(invalid_key)?;
    let found = find_key(state, presented).await?.ok_or_else(invalid_key)?;
    let (row, clock_offset) = (&found.key, found.clock_offset);
    if row.revoked_at.is_some() {
        return Err(ApiError::unauthenticated(
            "api_key_revoked",
            "this API key has been revoked",
        ));
    }
    if found.suspended {
        return Err(ApiError::forbidden(
            "merchant_suspended",
            "this merchant's account is suspended by the operator: contact them",
        ));
    }
    let (Some(merchant_id), Some(key_id)) =
        (MerchantId::parse(&row.merchant_id), KeyId::parse(&row.id))
    else {
        return Err(ApiError::internal(format!("malformed key row {}", row.id)));
    };
    // Invariant: a key's stored kind and mode match its prefix.
    if row.kind != kind || row.mode != mode {
        return Err(invalid_key());
    }
    let bound_profile = row.profile_id.as_deref().and_then(ProfileId::parse);
    let profile = match req.headers().get("x-profile-id") {
        None => bound_profile.clone(),
        Some(value) => {
            let not_found = || ApiError::not_found("shop").param("x-profile-id");
            let asked = value
                .to_str()
                .ok()
                .and_then(ProfileId::parse)
                .ok_or_else(not_found)?;
            if !owns_shop(state, &merchant_id, &asked).await? {
                return Err(not_found());
            }
            if bound_profile.as_ref().is_some_and(|b| b != &asked) {
                return Err(ApiError::forbidden(
                    "profile_mismatch",
                    "this key is bound to another shop",
                )
                .param("x-profile-id"));
            }
            Some(asked)
        }
    };
    let caller = Caller {
        merchant_id,
        key_id,
        mode,
        kind,
        bound_profile,
        profile,
        clock_offset,
    };
    crate::clock::enter(caller.timeline());
    req.extensions_mut().insert(caller.clone());
    Ok(caller)
}

/// The key presented, looked up by its HMAC under the current pepper, then under each previous
/// one (`security.previous_key_peppers`, while a rotation's overlap lasts).
async fn find_key(
    state: &AppState,
    presented: &str,
) -> Result<Option<std::sync::Arc<crate::lookups::FoundKey>>, ApiError> {
    for (n, pepper) in state.settings.security.key_peppers().enumerate() {
        let hash = hash_key(pepper, presented);
        let found = state
            .keys
            .get_or_read(&hash, store::find_key_by_hash(&state.db, &hash))
            .await?
            .filter(|found| ct_eq(&found.key.key_hash, &hash));
        if found.is_some() {
            if n > 0 {
                metrics::counter!("payd_api_key_previous_pepper_uses_total").increment(1);
            }
            return Ok(found);
        }
    }
    Ok(None)
}

/// Whether the shop is the merchant's: known already (see [`KnownShops`](crate::state::KnownShops)), or looked up once
/// and then known.
pub async fn owns_shop(
    state: &AppState,
    merchant: &MerchantId,
    shop: &ProfileId,
) -> Result<bool, ApiError> {
    if state.shops.knows(merchant, shop) {
        return Ok(true);
    }
    let found = store::find_profile(&state.db, merchant, shop)
        .await?
        .is_some();
    if found {
        state.shops.learn(merchant, shop);
    }
    Ok(found)
}

/// The sandbox's own routes (its triggers, its test clock) answer only a test key of a
/// sandbox deployment: 404 otherwise, as if they did not exist.
pub fn sandbox_only(state: &AppState, caller: &Caller) -> Result<(), ApiError> {
    if state.settings.mode == crate::settings::DeploymentMode::Sandbox && caller.test_mode() {
        Ok(())
    } else {
        Err(ApiError::not_found("route"))
    }
}

fn invalid_key() -> ApiError {
    ApiError::unauthenticated("invalid_api_key", "the API key is not valid")
}

fn state(req: &HttpRequest) -> Result<web::Data<AppState>, ApiError> {
    req.app_data::<web::Data<AppState>>()
        .cloned()
        .ok_or_else(|| ApiError::internal("AppState missing from app data"))
}

/// A caller with a secret key: server-side routes.
pub struct SecretKey(pub Caller);

impl FromRequest for SecretKey {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let caller = authenticate(&req, &*state(&req)?).await?;
            if caller.kind != KeyKind::Secret {
                return Err(ApiError::forbidden(
                    "secret_key_required",
                    "this route needs a secret key; publishable keys work only on browser routes",
                ));
            }
            Ok(SecretKey(caller))
        })
    }
}

/// The shop named in a path (`/account/shops/{profile_id}/…`): the caller's own, and the
/// bound one for a shop-bound key; anything else is 404. A request that chose another shop
/// with `x-profile-id` contradicts itself: 403 `profile_mismatch`, as a list answers.
pub async fn shop_in_path(
    state: &AppState,
    caller: &Caller,
    raw: &str,
) -> Result<ProfileId, ApiError> {
    let not_found = || ApiError::not_found("shop");
    let id = ProfileId::parse(raw).ok_or_else(not_found)?;
    if !owns_shop(state, &caller.merchant_id, &id).await? {
        return Err(not_found());
    }
    if caller.bound_profile.as_ref().is_some_and(|b| *b != id) {
        return Err(not_found());
    }
    if caller.profile.as_ref().is_some_and(|p| *p != id) {
        return Err(ApiError::forbidden(
            "profile_mismatch",
            "x-profile-id names another shop than the path",
        )
        .param("x-profile-id"));
    }
    Ok(id)
}

/// A secret key and the shop its path names (`/account/shops/{profile_id}/…`), checked as
/// [`shop_in_path`] checks it: what every shop route starts with.
pub struct ShopKey(pub Caller, pub ProfileId);

impl FromRequest for ShopKey {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, payload: &mut Payload) -> Self::Future {
        let (req, key) = (req.clone(), SecretKey::from_request(req, payload));
        Box::pin(async move {
            let SecretKey(caller) = key.await?;
            let raw = req.match_info().get(ProfileId::PARAM).unwrap_or_default();
            let shop = shop_in_path(&*state(&req)?, &caller, raw).await?;
            Ok(ShopKey(caller, shop))
        })
    }
}

/// A caller with any key: browser routes (the route itself checks the object's `client_secret`).
pub struct AnyKey(pub Caller);

impl FromRequest for AnyKey {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move { Ok(AnyKey(authenticate(&req, &*state(&req)?).await?)) })
    }
}

/// The operator, holding the admin key from configuration.
pub struct Admin;

impl FromRequest for Admin {
    type Error = ApiError;
    type Future = LocalBoxFuture<'static, Result<Self, ApiError>>;

    fn from_request(req: &HttpRequest, _: &mut Payload) -> Self::Future {
        let req = req.clone();
        Box::pin(async move {
            let state = state(&req)?;
            if state.settings.admin_key.is_none() {
                return Err(ApiError::unauthenticated(
                    "admin_disabled",
                    "the admin API is disabled: start payd with PAYD_ADMIN_KEY set",
                ));
            }
            let presented = req
                .headers()
                .get("api-key")
                .and_then(|v| v.to_str().ok())
                .ok_or_else(|| {
                    ApiError::unauthenticated(
                        "missing_api_key",
                        "send the admin key in the api-key header",
                    )
                })?;
            // Every key is compared, so the time taken does not tell which one matched.
            let matched = state
                .settings
                .admin_keys()
                .map(|key| ct_eq(presented, key))
                .collect::<Vec<_>>();
            match matched.iter().position(|m| *m) {
                None => Err(ApiError::unauthenticated(
                    "invalid_api_key",
                    "the admin key is not valid",
                )),
                Some(0) => Ok(Admin),
                Some(_) => {
                    metrics::counter!("payd_admin_previous_key_uses_total").increment(1);
                    Ok(Admin)
                }
            }
        })
    }
}

fn ct_eq(a: &str, b: &str) -> bool {
    // Hash first so the comparison takes the same time whatever the lengths.
    let (a, b) = (Sha256::digest(a.as_bytes()), Sha256::digest(b.as_bytes()));
    a.ct_eq(&b).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip_their_kind_and_mode() {
        for (kind, mode) in [
            (KeyKind::Secret, Mode::Test),
            (KeyKind::Publishable, Mode::Test),
            (KeyKind::Secret, Mode::Live),
            (KeyKind::Publishable, Mode::Live),
        ] {
            let key = generate_key(kind, mode);
            assert_eq!(parse_key(&key), Some((kind, mode)), "{key}");
        }
        assert_eq!(parse_key("snd_short"), None);
        assert_eq!(
            parse_key("sk_test_0123456789012345678901234567890123456789"),
            None
        );
    }

    #[test]
    fn hashes_depend_on_the_pepper() {
        let key = generate_key(KeyKind::Secret, Mode::Test);
        assert_eq!(
            hash_key("pepper-a-pepper-a", &key),
            hash_key("pepper-a-pepper-a", &key)
        );
        assert_ne!(
            hash_key("pepper-a-pepper-a", &key),
            hash_key("pepper-b-pepper-b", &key)
        );
        assert!(ct_eq("abc", "abc"));
        assert!(!ct_eq("abc", "abd"));
    }
}

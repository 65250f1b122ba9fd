//! The operator's hold on merchants (admin key): one merchant, suspending and reinstating it,
//! issuing it keys (a sandbox merchant's first live keys), revoking any of its keys, and how
//! many keys each API-key pepper still serves during a rotation.

use actix_web::{web, HttpResponse};

use super::{
    api::{IssueKeysRequest, IssuedKeys, KeyPepper, MerchantSummary},
    routes::merchant_mode,
    store::{self, NewKey, Revoker},
};
use crate::{
    auth::{keys::pepper_id, Admin, KeyKind},
    error::ApiError,
    fields::Items,
    http::{ApiJson, PathId},
    idempotency,
    ids::{KeyId, MerchantId},
    settings::split_list,
    state::AppState,
};

crate::http::routes! {
    "/admin/merchants/{merchant_id}" => { get: get_merchant },
    "/admin/merchants/{merchant_id}/suspend" => { post: suspend_merchant },
    "/admin/merchants/{merchant_id}/reinstate" => { post: reinstate_merchant },
    "/admin/merchants/{merchant_id}/api-keys" => { post: issue_keys },
    "/admin/merchants/{merchant_id}/api-keys/{key_id}" => { delete: revoke_key },
    "/admin/key-peppers" => { get: key_peppers },
}

fn no_merchant() -> ApiError {
    ApiError::no_such::<MerchantId>()
}

/// One merchant, with its standing (admin key).
///
/// Answers the merchant's id, name, creation time and `suspended_at` (none while it is in good
/// standing). Needs the operator's admin key (`PAYD_ADMIN_KEY`).
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/admin/merchants/{merchant_id}", tag = "admin",
    params(("merchant_id" = String, Path)),
    responses((status = 200, body = MerchantSummary), (status = 404, body = crate::error::ErrorBody)),
    security(("admin_key" = [])))]
pub async fn get_merchant(
    _: Admin,
    state: web::Data<AppState>,
    PathId(id): PathId<MerchantId>,
) -> Result<HttpResponse, ApiError> {
    let merchant = store::find_merchant(&state.db, &id)
        .await?
        .ok_or_else(no_merchant)?;
    Ok(HttpResponse::Ok().json(MerchantSummary::from(merchant)))
}

async fn set_suspended(
    state: &AppState,
    id: &MerchantId,
    suspended: bool,
) -> Result<HttpResponse, ApiError> {
    let merchant = store::set_suspended(&state.db, state.clock.now(), id, suspended)
        .await?
        .ok_or_else(no_merchant)?;
    // In force on every instance when this answers.
    state.generation.changed().await;
    Ok(HttpResponse::Ok().json(MerchantSummary::from(merchant)))
}

/// Suspend a merchant: every key of it is refused, on every instance.
///
/// Every key of the merchant, secret or publishable, either mode, is refused with
/// `merchant_suspended` on every instance when this answers. Nothing is deleted; scheduled
/// work (renewals, payouts, webhook deliveries) goes on. Suspending a suspended merchant
/// changes nothing. Audited in the merchant's log. Needs the operator's admin key
/// (`PAYD_ADMIN_KEY`).
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(post, path = "/admin/merchants/{merchant_id}/suspend", tag = "admin",
    params(("merchant_id" = String, Path)),
    responses((status = 200, body = MerchantSummary), (status = 404, body = crate::error::ErrorBody)),
    security(("admin_key" = [])))]
pub async fn suspend_merchant(
    _: Admin,
    state: web::Data<AppState>,
    PathId(id): PathId<MerchantId>,
) -> Result<HttpResponse, ApiError> {
    set_suspended(&state, &id, true).await
}

/// Reinstate a suspended merchant: its unrevoked keys work again.
///
/// Clears `suspended_at`, in force on every instance when this answers; keys revoked meanwhile
/// stay revoked. Reinstating a merchant in good standing changes nothing. Audited in the
/// merchant's log. Needs the operator's admin key (`PAYD_ADMIN_KEY`).
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(post, path = "/admin/merchants/{merchant_id}/reinstate", tag = "admin",
    params(("merchant_id" = String, Path)),
    responses((status = 200, body = MerchantSummary), (status = 404, body = crate::error::ErrorBody)),
    security(("admin_key" = [])))]
pub async fn reinstate_merchant(
    _: Admin,
    state: web::Data<AppState>,
    PathId(id): PathId<MerchantId>,
) -> Result<HttpResponse, ApiError> {
    set_suspended(&state, &id, false).await
}

/// Issue a merchant a secret and a publishable key, not bound to a shop.
///
/// How a merchant made with sandbox keys gets its live keys: `mode` defaults to `production`
/// on a production deployment, and a sandbox deployment refuses it. The keys are shown only in
/// this answer and count toward `limits.max_api_keys_per_merchant`. Needs the operator's admin
/// key (`PAYD_ADMIN_KEY`).
///
/// Fails: `production_disabled` (403), `resource_missing` (404), `limit_reached` (409).
///
/// Events: none.
#[utoipa::path(post, path = "/admin/merchants/{merchant_id}/api-keys", tag = "admin",
    params(("merchant_id" = String, Path)), request_body = IssueKeysRequest,
    responses((status = 201, body = IssuedKeys), (status = 404, body = crate::error::ErrorBody),
        (status = 403, description = "`mode: production` on a sandbox deployment", body = crate::error::ErrorBody),
        (status = 409, description = "the merchant holds `limits.max_api_keys_per_merchant` keys", body = crate::error::ErrorBody)),
    security(("admin_key" = [])))]
pub async fn issue_keys(
    _: Admin,
    state: web::Data<AppState>,
    PathId(id): PathId<MerchantId>,
    body: ApiJson<IssueKeysRequest>,
) -> Result<HttpResponse, ApiError> {
    let mode = merchant_mode(body.0.mode, state.settings.mode)?;
    store::find_merchant(&state.db, &id)
        .await?
        .ok_or_else(no_merchant)?;
    let pepper = &state.settings.security.key_pepper;
    let max = state.settings.limits.max_api_keys_per_merchant;
    let new = |kind| NewKey {
        merchant_id: &id,
        kind,
        mode,
        profile_id: None,
        name: Some("issued by the operator".to_owned()),
    };
    let news = [new(KeyKind::Secret), new(KeyKind::Publishable)];
    let [(_, secret_key), (_, publishable_key)] =
        store::insert_keys(&state.db, state.clock.now(), pepper, news, None, Some(max)).await?;
    Ok(idempotency::one_time_secret(HttpResponse::Created().json(
        IssuedKeys {
            merchant_id: id.into_string(),
            secret_key,
            publishable_key,
            test_mode: mode == crate::auth::Mode::Test,
        },
    )))
}

/// Revoke any key of a merchant, in either mode and of any shop.
///
/// The key is refused on every instance when this answers, and the revocation is audited in
/// the merchant's log as the operator's. Revoking a revoked key changes nothing. Needs the
/// operator's admin key (`PAYD_ADMIN_KEY`).
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(delete, path = "/admin/merchants/{merchant_id}/api-keys/{key_id}", tag = "admin",
    params(("merchant_id" = String, Path), ("key_id" = String, Path)),
    responses((status = 200, body = super::api::ApiKey), (status = 404, body = crate::error::ErrorBody)),
    security(("admin_key" = [])))]
pub async fn revoke_key(
    _: Admin,
    state: web::Data<AppState>,
    PathId(merchant): PathId<MerchantId>,
    PathId(key_id): PathId<KeyId>,
) -> Result<HttpResponse, ApiError> {
    let by = Revoker {
        mode: None,
        only_profile: None,
        actor: None,
    };
    let row = store::revoke_key(&state.db, state.clock.now(), &merchant, &key_id, by)
        .await?
        .ok_or_else(|| ApiError::not_found("api key"))?;
    state.generation.changed().await;
    Ok(HttpResponse::Ok().json(super::api::ApiKey::from(row)))
}

/// How many unrevoked keys each API-key pepper serves.
///
/// Answers, per pepper id, its state (`current`, `previous`, `unknown` or `unrecorded`) and
/// how many unrevoked keys it serves: a rotation's old pepper may leave
/// `security.previous_key_peppers` once no key needs it (docs/operations.md). Needs the
/// operator's admin key (`PAYD_ADMIN_KEY`).
///
/// Fails: none beyond the common errors.
///
/// Events: none.
#[utoipa::path(get, path = "/admin/key-peppers", tag = "admin",
    responses((status = 200, body = Items<KeyPepper>)),
    security(("admin_key" = [])))]
pub async fn key_peppers(_: Admin, state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let security = &state.settings.security;
    let current = pepper_id(&security.key_pepper);
    let previous: Vec<String> = split_list(&security.previous_key_peppers)
        .map(pepper_id)
        .collect();
    let data = store::keys_by_pepper(&state.db)
        .await?
        .into_iter()
        .map(|(id, keys)| KeyPepper {
            state: match id.as_deref() {
                Some(id) if id == current => "current",
                Some(id) if previous.iter().any(|p| p == id) => "previous",
                Some(_) => "unknown",
                None => "unrecorded",
            },
            pepper_id: id,
            keys,
        })
        .collect();
    Ok(HttpResponse::Ok().json(Items { data }))
}

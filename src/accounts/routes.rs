//! Handlers of `POST /admin/merchants` and the `/account` routes.

use actix_web::{web, HttpResponse};

use super::{
    api::{
        parse_branding, parse_embed_origins, parse_name, Account, ApiKey, AuditEntry,
        CreateApiKeyRequest, CreateMerchantRequest, CreateShopRequest, CreatedApiKey,
        CreatedMerchant, MerchantSummary, PutShopRequest, RequestedMode, Shop,
    },
    store,
};
use crate::stored::Json;
use crate::{
    auth::{Admin, Caller, Mode, SecretKey, ShopKey},
    error::ApiError,
    http::{ApiJson, ApiQuery, PathId},
    idempotency,
    ids::{KeyId, ProfileId},
    pagination::{List, ListQuery, Page},
    settings::DeploymentMode,
    state::AppState,
};

crate::http::routes! {
    "/admin/merchants" => { get: list_merchants, post: create_merchant },
    "/account" => { get: get_account },
    "/account/shops" => { get: list_shops, post: create_shop },
    "/account/shops/{profile_id}" => { get: get_shop, put: put_shop },
    "/account/api-keys" => { get: list_api_keys, post: create_api_key },
    "/account/api-keys/{key_id}" => { delete: revoke_api_key },
    "/account/audit-log" => { get: list_audit_log },
}

/// The account's security actions, newest first.
///
/// Lists the keys created and revoked, webhook URLs changed, signing secrets rotated,
/// processor accounts added, shops changed and the operator's suspensions and reinstatements,
/// each with the key that acted (none for the operator), one page at a time (`limit`,
/// `starting_after`, `ending_before`); an entry never holds a secret. The log covers every
/// shop: it needs a secret key not bound to a shop.
///
/// Fails: `resource_missing` (400), `unbound_key_required` (403).
///
/// Events: none.
#[utoipa::path(get, path = "/account/audit-log", tag = "account", params(ListQuery),
    responses((status = 200, body = List<AuditEntry>),
        (status = 403, description = "a shop-bound key", body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn list_audit_log(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    if caller.bound_profile.is_some() {
        return Err(ApiError::forbidden(
            "unbound_key_required",
            "the account's audit log covers every shop: ask with a key not bound to a shop",
        ));
    }
    let page = Page::parse::<crate::ids::AuditEntryId>(&query)?;
    let entries = store::list_audit(&state.db, &caller.merchant_id, &page).await?;
    Ok(HttpResponse::Ok().json(entries.map(AuditEntry::from)))
}

/// Resolves the mode of the keys the operator asks for against what the deployment allows:
/// by default a production deployment's are live, a sandbox deployment's sandbox keys.
pub fn merchant_mode(
    asked: Option<RequestedMode>,
    deployment: DeploymentMode,
) -> Result<Mode, ApiError> {
    let default = match deployment {
        DeploymentMode::Production => RequestedMode::Production,
        DeploymentMode::Sandbox => RequestedMode::Sandbox,
    };
    match (asked.unwrap_or(default), deployment) {
        (RequestedMode::Sandbox, _) => Ok(Mode::Test),
        (RequestedMode::Production, DeploymentMode::Production) => Ok(Mode::Live),
        (RequestedMode::Production, DeploymentMode::Sandbox) => Err(ApiError::forbidden(
            "production_disabled",
            "this deployment runs in sandbox mode and issues only sandbox keys",
        )
        .param("mode")),
    }
}

/// Every merchant, newest first (admin key): to find a merchant's id.
///
/// Lists each merchant's id, name, creation time and `suspended_at`, one page at a time
/// (`limit`, `starting_after`, `ending_before`). Needs the operator's admin key
/// (`PAYD_ADMIN_KEY`).
///
/// Fails: `resource_missing` (400).
///
/// Events: none.
#[utoipa::path(get, path = "/admin/merchants", tag = "admin", params(ListQuery),
    responses((status = 200, body = List<MerchantSummary>),
        (status = 401, description = "admin key missing or wrong")),
    security(("admin_key" = [])))]
pub async fn list_merchants(
    _: Admin,
    state: web::Data<AppState>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let page = Page::parse::<crate::ids::MerchantId>(&query)?;
    let merchants = store::list_merchants(&state.db, &page).await?;
    Ok(HttpResponse::Ok().json(merchants.map(MerchantSummary::from)))
}

/// Create a merchant with a default shop and its first keys (admin key).
///
/// Makes the merchant, its first shop and a secret and a publishable key not bound to a shop,
/// in one commit: live keys on a production deployment unless `mode: sandbox` is asked,
/// sandbox keys on a sandbox deployment (which refuses `mode: production`). The keys are shown
/// only in this answer. Needs the operator's admin key (`PAYD_ADMIN_KEY`).
///
/// Fails: `production_disabled` (403).
///
/// Events: none.
#[utoipa::path(post, path = "/admin/merchants", tag = "admin",
    request_body = CreateMerchantRequest,
    responses((status = 201, body = CreatedMerchant), (status = 401, description = "admin key missing or wrong"),
        (status = 403, description = "`mode: production` on a sandbox deployment")),
    security(("admin_key" = [])))]
pub async fn create_merchant(
    _: Admin,
    state: web::Data<AppState>,
    body: ApiJson<CreateMerchantRequest>,
) -> Result<HttpResponse, ApiError> {
    let name = parse_name("name", &body.0.name)?;
    let mode = merchant_mode(body.0.mode, state.settings.mode)?;
    let created = store::create_merchant(
        &state.db,
        state.clock.now(),
        &state.settings.security.key_pepper,
        &name,
        mode,
    )
    .await?;
    Ok(HttpResponse::Created().json(CreatedMerchant::from(created)))
}

impl From<store::NewMerchant> for CreatedMerchant {
    fn from(m: store::NewMerchant) -> Self {
        Self {
            merchant_id: m.merchant.id.into(),
            profile_id: m.profile.id.into(),
            secret_key: m.secret_key,
            publishable_key: m.publishable_key,
            test_mode: m.mode == Mode::Test,
        }
    }
}

/// The merchant behind the calling key.
///
/// Answers the merchant's id and name, whether the key is a test key, and the shop the request
/// is scoped to (the key's bound shop or `x-profile-id`), if any. Needs a secret key.
///
/// Fails: none beyond the common errors.
///
/// Events: none.
#[utoipa::path(get, path = "/account", tag = "account",
    responses((status = 200, body = Account)), security(("api_key" = [])))]
pub async fn get_account(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let merchant = store::find_merchant(&state.db, &caller.merchant_id)
        .await?
        .ok_or_else(|| ApiError::not_found("merchant"))?;
    Ok(HttpResponse::Ok().json(Account {
        merchant_id: merchant.id.into(),
        name: merchant.name,
        test_mode: caller.test_mode(),
        profile_id: caller.profile.map(ProfileId::into_string),
        created: merchant.created_at,
    }))
}

/// List the merchant's shops (a shop-bound key sees only its shop).
///
/// Lists the merchant's shops with their branding, newest first, one page at a time (`limit`,
/// `starting_after`, `ending_before`). Needs a secret key.
///
/// Fails: `resource_missing` (400).
///
/// Events: none.
#[utoipa::path(get, path = "/account/shops", tag = "account", params(ListQuery),
    responses((status = 200, body = List<Shop>)), security(("api_key" = [])))]
pub async fn list_shops(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let page = Page::parse::<ProfileId>(&query)?;
    let shops = store::list_profiles(
        &state.db,
        &caller.merchant_id,
        caller.bound_profile.as_ref(),
        &page,
    )
    .await?;
    Ok(HttpResponse::Ok().json(shops.map(Shop::from)))
}

/// Create a shop.
///
/// Adds a shop to the merchant: payments, catalogs, invoices, keys and settings can then be
/// scoped to it. A merchant has at most `limits.max_shops_per_merchant` shops, counted inside
/// the commit. Needs a secret key not bound to a shop.
///
/// Fails: `shop_bound_key` (403), `limit_reached` (409).
///
/// Events: none.
#[utoipa::path(post, path = "/account/shops", tag = "account", request_body = CreateShopRequest,
    responses((status = 201, body = Shop)), security(("api_key" = [])))]
pub async fn create_shop(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    body: ApiJson<CreateShopRequest>,
) -> Result<HttpResponse, ApiError> {
    caller.refuse_bound("a key bound to one shop cannot manage the merchant's other shops")?;
    let name = parse_name("name", &body.0.name)?;
    let max = state.settings.limits.max_shops_per_merchant;
    let now = state.clock.now();
    let shop = store::insert_profile(&state.db, now, &caller.merchant_id, &name, max).await?;
    Ok(HttpResponse::Created().json(Shop::from(shop)))
}

/// A shop, with its branding.
///
/// Answers the shop's name and how the hosted pages show it to buyers (display name, logo,
/// accent colour). Another merchant's shop, or another shop than a shop-bound key's, reads as
/// missing. Needs a secret key.
///
/// Fails: `profile_mismatch` (403), `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/account/shops/{profile_id}", tag = "account",
    params(("profile_id" = String, Path)),
    responses((status = 200, body = Shop), (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn get_shop(
    ShopKey(caller, id): ShopKey,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let shop = own_shop(&state, &caller, &id).await?;
    Ok(HttpResponse::Ok().json(Shop::from(shop)))
}

/// The shop a [`ShopKey`] named, as stored.
async fn own_shop(
    state: &AppState,
    caller: &Caller,
    id: &ProfileId,
) -> Result<payd_entity::profile::Model, ApiError> {
    crate::auth::store::find_profile(&state.db, &caller.merchant_id, id)
        .await?
        .ok_or_else(|| ApiError::not_found("shop"))
}

/// The image types a logo may be: what every browser shows, and nothing that runs (no SVG).
const LOGO_TYPES: [&str; 4] = ["image/png", "image/jpeg", "image/gif", "image/webp"];

/// Change a shop's name, how the hosted pages show it to buyers, or who may embed them.
///
/// Changes the fields sent: `name`; `branding`: the name buyers see, a logo from the
/// merchant's uploaded files (PNG, JPEG, GIF or WebP), an accent colour with at least 4.5:1
/// contrast against white; `embed_origins`: the origins whose pages may frame the shop's card
/// form with `/js/payd.js` (docs/embedded-checkout.md). Audited in the account's log. Needs a
/// secret key.
///
/// Fails: `profile_mismatch` (403), `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(put, path = "/account/shops/{profile_id}", tag = "account",
    params(("profile_id" = String, Path)), request_body = PutShopRequest,
    responses((status = 200, body = Shop), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn put_shop(
    ShopKey(caller, id): ShopKey,
    state: web::Data<AppState>,
    body: ApiJson<PutShopRequest>,
) -> Result<HttpResponse, ApiError> {
    let ask = body.0;
    let name = ask.name.map(|n| parse_name("name", &n)).transpose()?;
    let branding = ask.branding.map(parse_branding).transpose()?;
    let embed_origins = ask.embed_origins.map(parse_embed_origins).transpose()?;
    let mut shop = own_shop(&state, &caller, &id).await?;
    if let Some(logo) = branding.as_ref().and_then(|b| b.logo_file_id.as_deref()) {
        check_logo(&state, &caller, logo).await?;
    }
    if let Some(name) = name {
        shop.name = name;
    }
    if let Some(b) = branding {
        shop.display_name = b.display_name;
        shop.logo_file_id = b.logo_file_id;
        shop.accent_color = b.accent_color;
    }
    if let Some(origins) = embed_origins {
        shop.embed_origins = (!origins.is_empty()).then_some(Json(origins));
    }
    store::update_profile(&state.db, state.clock.now(), &shop, Some(&caller.key_id)).await?;
    Ok(HttpResponse::Ok().json(Shop::from(shop)))
}

/// A logo must be one of the merchant's files, in the key's mode, of a [`LOGO_TYPES`] type.
async fn check_logo(state: &AppState, caller: &Caller, logo: &str) -> Result<(), ApiError> {
    let param = "branding.logo_file_id";
    let content_type = match crate::ids::FileId::parse(logo) {
        Some(id) => {
            store::file_type(&state.db, &id, &caller.merchant_id, caller.test_mode()).await?
        }
        None => None,
    }
    .ok_or_else(|| ApiError::not_found("file").param(param))?;
    if LOGO_TYPES.contains(&content_type.as_str()) {
        return Ok(());
    }
    Err(ApiError::invalid_param(
        param,
        format!(
            "the file is {content_type}; a logo must be one of {}",
            LOGO_TYPES.join(", ")
        ),
    ))
}

/// List the API keys of the calling key's mode (last four characters only).
///
/// Lists the merchant's keys of the calling key's mode, revoked ones included, newest first,
/// one page at a time; a shop-bound key sees only the keys bound to its shop. A key's secret
/// is never shown again. Needs a secret key.
///
/// Fails: `resource_missing` (400).
///
/// Events: none.
#[utoipa::path(get, path = "/account/api-keys", tag = "account", params(ListQuery),
    responses((status = 200, body = List<ApiKey>)), security(("api_key" = [])))]
pub async fn list_api_keys(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    ApiQuery(query): ApiQuery<ListQuery>,
) -> Result<HttpResponse, ApiError> {
    let page = Page::parse::<KeyId>(&query)?;
    let keys = store::list_keys(
        &state.db,
        &caller.merchant_id,
        caller.mode,
        caller.bound_profile.as_ref(),
        &page,
    )
    .await?;
    Ok(HttpResponse::Ok().json(keys.map(ApiKey::from)))
}

/// Create an API key of the calling key's mode; the key is shown once.
///
/// Makes a secret or publishable key, in the calling key's mode unless `test_mode` says
/// otherwise (a test key makes no live keys), optionally bound to one shop (`profile_id`; a
/// shop-bound key makes only keys bound to its shop). The key is shown only in this answer: a
/// retry with the same `Idempotency-Key` replays it to the calling key alone. A merchant holds
/// at most `limits.max_api_keys_per_merchant` keys. Audited. Needs a secret key.
///
/// Fails: `live_key_from_test_key` (403), `profile_mismatch` (403), `resource_missing` (404), `limit_reached` (409).
///
/// Events: none.
#[utoipa::path(post, path = "/account/api-keys", tag = "account", request_body = CreateApiKeyRequest,
    responses((status = 201, body = CreatedApiKey)), security(("api_key" = [])))]
pub async fn create_api_key(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    body: ApiJson<CreateApiKeyRequest>,
) -> Result<HttpResponse, ApiError> {
    let ask = body.0.parse(&caller)?;
    if let Some(id) = &ask.profile_id {
        crate::auth::store::find_profile(&state.db, &caller.merchant_id, id)
            .await?
            .ok_or_else(ApiError::no_such::<ProfileId>)?;
    }
    let new = store::NewKey {
        merchant_id: &caller.merchant_id,
        kind: ask.kind,
        mode: ask.mode,
        profile_id: ask.profile_id.as_ref(),
        name: ask.name,
    };
    let pepper = &state.settings.security.key_pepper;
    let now = state.clock.now();
    let max = state.settings.limits.max_api_keys_per_merchant;
    let (row, key) =
        store::insert_key(&state.db, now, pepper, new, Some(&caller.key_id), Some(max)).await?;
    Ok(idempotency::one_time_secret(HttpResponse::Created().json(
        CreatedApiKey {
            api_key: row.into(),
            key,
        },
    )))
}

/// Revoke an API key; it stops working on every instance before this answers.
///
/// Marks the key revoked (audited): requests with it are refused with `api_key_revoked` from
/// then on. The calling key reaches the keys of its own mode, a shop-bound key only those
/// bound to its shop; any other reads as missing. Revoking a revoked key changes nothing.
/// Needs a secret key.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(delete, path = "/account/api-keys/{key_id}", tag = "account",
    params(("key_id" = String, Path, description = "the key's id (key_…)")),
    responses((status = 200, body = ApiKey), (status = 404, description = "no such key")),
    security(("api_key" = [])))]
pub async fn revoke_api_key(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathId(key_id): PathId<crate::ids::KeyId>,
) -> Result<HttpResponse, ApiError> {
    let not_found = || ApiError::not_found("api key");
    let by = store::Revoker {
        mode: Some(caller.mode),
        only_profile: caller.bound_profile.as_ref(),
        actor: Some(&caller.key_id),
    };
    let row = store::revoke_key(
        &state.db,
        state.clock.now(),
        &caller.merchant_id,
        &key_id,
        by,
    )
    .await?
    .ok_or_else(not_found)?;
    // Refused by every instance when this answers.
    state.generation.changed().await;
    Ok(HttpResponse::Ok().json(ApiKey::from(row)))
}

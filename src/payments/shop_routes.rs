//! Handlers of a shop's payment settings: its processor accounts and its routing rules.

use actix_web::{web, HttpResponse};
use payd_entity::processor_account;

use super::{routing::RoutingRules, store};
use crate::{
    accounts::shop_in_path,
    auth::{Admin, SecretKey},
    error::ApiError,
    fields::Items,
    http::ApiJson,
    outbound::Policy,
    processors::remote::RemoteConfig,
    state::AppState,
    webhooks::routes::check_url,
};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(
        web::resource("/account/shops/{profile_id}/processors")
            .route(web::get().to(list_processors))
            .route(web::post().to(add_processor)),
    )
    .service(
        web::resource("/account/shops/{profile_id}/routing")
            .route(web::get().to(get_routing))
            .route(web::put().to(put_routing)),
    )
    .service(web::resource("/admin/processors").route(web::get().to(pending_processors)))
    .service(
        web::resource("/admin/processors/{processor_account_id}/approve")
            .route(web::post().to(approve_processor)),
    );
}

/// A processor account of a shop.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct ProcessorAccount {
    pub processor_account_id: String,
    pub merchant_id: String,
    pub profile_id: String,
    pub name: String,
    pub kind: String,
    pub enabled: bool,
    /// `approved`, or `pending` until the operator approves it (with
    /// `processors.require_operator_approval` on); a pending account is never routed to.
    pub approval: String,
    pub created: chrono::DateTime<chrono::Utc>,
}

impl From<processor_account::Model> for ProcessorAccount {
    fn from(a: processor_account::Model) -> Self {
        Self {
            processor_account_id: a.id,
            merchant_id: a.merchant_id,
            profile_id: a.profile_id,
            name: a.name,
            kind: a.kind,
            enabled: a.enabled,
            approval: a.approval,
            created: a.created_at,
        }
    }
}

#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddProcessorRequest {
    /// Unique within the shop: letters, digits, `-` and `_`.
    pub name: String,
    /// `sandbox` (default) or `remote`.
    #[serde(default)]
    pub kind: Option<String>,
    /// `remote`: the processor's base URL (`docs/processor-protocol.md`).
    #[serde(default)]
    pub url: Option<String>,
    /// `remote`: the secret shared with the processor (16 to 200 characters); signs requests.
    #[serde(default)]
    pub secret: Option<String>,
    /// `remote`: per-request timeout (default `processors.default_timeout_ms`).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// The shop's processor accounts (a shop without any uses one named `sandbox`).
#[utoipa::path(get, path = "/account/shops/{profile_id}/processors", tag = "account",
    params(("profile_id" = String, Path)),
    responses((status = 200, body = Items<ProcessorAccount>)), security(("api_key" = [])))]
pub async fn list_processors(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    profile: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let shop = shop_in_path(&state, &caller, &profile).await?;
    let data: Vec<ProcessorAccount> = store::accounts(&state.db, shop.as_str())
        .await?
        .into_iter()
        .map(ProcessorAccount::from)
        .collect();
    Ok(HttpResponse::Ok().json(Items { data }))
}

/// Add a sandbox processor account to a shop.
#[utoipa::path(post, path = "/account/shops/{profile_id}/processors", tag = "account",
    params(("profile_id" = String, Path)), request_body = AddProcessorRequest,
    responses((status = 201, body = ProcessorAccount), (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn add_processor(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    profile: web::Path<String>,
    ApiJson(req): ApiJson<AddProcessorRequest>,
) -> Result<HttpResponse, ApiError> {
    let shop = shop_in_path(&state, &caller, &profile).await?;
    let name = req.name.trim();
    if name.is_empty()
        || name.len() > 40
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(ApiError::invalid_param(
            "name",
            "1 to 40 letters, digits, - or _",
        ));
    }
    let config =
        match req.kind.as_deref().unwrap_or("sandbox") {
            // Live payments never reach the sandbox: a live key cannot add one.
            "sandbox" if !caller.test_mode() => return Err(ApiError::invalid_param(
                "kind",
                "a live key adds remote processors only; sandbox processors answer test payments",
            )),
            "sandbox" => None,
            "remote" => {
                let settings = &state.settings.processors;
                let url = req.url.as_deref().ok_or_else(|| {
                    ApiError::invalid("parameter_missing", "a remote processor needs a url")
                        .param("url")
                })?;
                let policy =
                    Policy::from_settings(settings.allow_private_urls, &state.settings.security);
                let url = check_url(url, &policy)?;
                let secret = req
                    .secret
                    .clone()
                    .filter(|s| (16..=200).contains(&s.len()))
                    .ok_or_else(|| {
                        ApiError::invalid_param(
                            "secret",
                            "a remote processor needs a shared secret of 16 to 200 characters",
                        )
                    })?;
                let timeout_ms = req.timeout_ms.unwrap_or(settings.default_timeout_ms);
                if !(100..=120_000).contains(&timeout_ms) {
                    return Err(ApiError::invalid_param(
                        "timeout_ms",
                        "timeout_ms must be 100 to 120000",
                    ));
                }
                serde_json::to_string(&RemoteConfig {
                    url,
                    secret,
                    timeout_ms,
                })
                .ok()
            }
            _ => return Err(ApiError::invalid_param("kind", "kind is sandbox or remote")),
        };
    // A remote processor receives card data: the operator may want to see it first.
    let approval = if config.is_some() && state.settings.processors.require_operator_approval {
        "pending"
    } else {
        "approved"
    };
    let row = store::insert_account(
        &state.db,
        caller.merchant_id.as_str(),
        shop.as_str(),
        name,
        // The connection (with its shared secret) is stored sealed.
        config.map(|c| state.keyring.seal(&c)),
        approval,
        state.clock.now(),
        &caller.key_id,
    )
    .await?
    .ok_or_else(|| {
        ApiError::conflict(
            "processor_exists",
            format!("the shop already has a processor named {name:?}"),
        )
        .param("name")
    })?;
    Ok(HttpResponse::Created().json(ProcessorAccount::from(row)))
}

/// Remote processor accounts waiting for the operator's approval (every merchant's).
#[utoipa::path(get, path = "/admin/processors", tag = "admin",
    responses((status = 200, body = Items<ProcessorAccount>)), security(("admin_key" = [])))]
pub async fn pending_processors(
    _: Admin,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let data = store::pending_accounts(&state.db)
        .await?
        .into_iter()
        .map(ProcessorAccount::from)
        .collect();
    Ok(HttpResponse::Ok().json(Items { data }))
}

/// Approve a remote processor account: from now on it is routed to.
#[utoipa::path(post, path = "/admin/processors/{processor_account_id}/approve", tag = "admin",
    params(("processor_account_id" = String, Path)),
    responses((status = 200, body = ProcessorAccount), (status = 404, body = crate::error::ErrorBody)),
    security(("admin_key" = [])))]
pub async fn approve_processor(
    _: Admin,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let row = store::approve_account(&state.db, &id, state.clock.now())
        .await?
        .ok_or_else(|| ApiError::not_found("processor account"))?;
    Ok(HttpResponse::Ok().json(ProcessorAccount::from(row)))
}

/// The shop's routing rules.
#[utoipa::path(get, path = "/account/shops/{profile_id}/routing", tag = "account",
    params(("profile_id" = String, Path)),
    responses((status = 200, body = RoutingRules)), security(("api_key" = [])))]
pub async fn get_routing(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    profile: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let shop = shop_in_path(&state, &caller, &profile).await?;
    Ok(HttpResponse::Ok().json(store::routing_rules(&state.db, shop.as_str()).await?))
}

/// Replace the shop's routing rules.
#[utoipa::path(put, path = "/account/shops/{profile_id}/routing", tag = "account",
    params(("profile_id" = String, Path)), request_body = RoutingRules,
    responses((status = 200, body = RoutingRules), (status = 400, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn put_routing(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    profile: web::Path<String>,
    ApiJson(rules): ApiJson<RoutingRules>,
) -> Result<HttpResponse, ApiError> {
    let shop = shop_in_path(&state, &caller, &profile).await?;
    let names: Vec<String> = store::accounts(&state.db, shop.as_str())
        .await?
        .into_iter()
        .map(|a| a.name)
        .collect();
    rules.validate(&names)?;
    store::put_routing_rules(&state.db, shop.as_str(), &rules, state.clock.now()).await?;
    Ok(HttpResponse::Ok().json(rules))
}

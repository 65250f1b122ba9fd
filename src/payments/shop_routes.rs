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
    processors::{
        connect,
        remote::RemoteConfig,
        stripe::{self, StripeConfig},
    },
    state::AppState,
    webhooks::routes::check_url,
};

crate::http::routes! {
    "/account/shops/{profile_id}/processors" => { get: list_processors, post: add_processor },
    "/account/shops/{profile_id}/routing" => { get: get_routing, put: put_routing },
    "/admin/processors" => { get: pending_processors },
    "/admin/processors/{processor_account_id}/approve" => { post: approve_processor },
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
    /// `sandbox` (default), `remote` or `stripe` (`docs/processors/stripe.md`).
    #[serde(default)]
    pub kind: Option<String>,
    /// `remote`: the processor's base URL (`docs/processor-protocol.md`).
    #[serde(default)]
    pub url: Option<String>,
    /// `remote`: the secret shared with the processor (16 to 200 characters); signs requests.
    #[serde(default)]
    pub secret: Option<String>,
    /// `remote` and `stripe`: per-request timeout (default `processors.default_timeout_ms`).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// `stripe`: the account's secret key, `sk_test_…` for a test-mode shop, `sk_live_…` for
    /// a live one (a restricted `rk_…` key likewise). Stored sealed; never shown again.
    #[serde(default)]
    pub secret_key: Option<String>,
    /// `stripe`: the signing secret of the webhook endpoint set up at Stripe (`whsec_…`);
    /// verifies the events Stripe posts to `/processor-webhooks/{processor_account_id}`.
    #[serde(default)]
    pub webhook_secret: Option<String>,
    /// `stripe`: the scheme and host of Stripe's API (default `https://api.stripe.com`), for a
    /// regional proxy or a test server; plain `http` only for a loopback address.
    #[serde(default)]
    pub api_base: Option<String>,
}

impl AddProcessorRequest {
    /// The account's name: 1 to 40 letters, digits, `-` or `_`.
    fn checked_name(&self) -> Result<&str, ApiError> {
        let name = self.name.trim();
        let ok = (1..=40).contains(&name.len())
            && name
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
        if !ok {
            return Err(ApiError::invalid_param(
                "name",
                "1 to 40 letters, digits, - or _",
            ));
        }
        Ok(name)
    }
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

/// The connection a processor of `kind` is added with (none for a sandbox one, which answers
/// test payments only), as it is stored before sealing.
fn connection(
    state: &AppState,
    req: &AddProcessorRequest,
    kind: &str,
    test_mode: bool,
) -> Result<Option<String>, ApiError> {
    match kind {
        // Live payments never reach the sandbox: a live key cannot add one.
        connect::SANDBOX if !test_mode => {
            Err(ApiError::invalid_param(
                "kind",
                "a live key adds remote or stripe processors only; sandbox processors answer test payments",
            ))
        }
        connect::SANDBOX => Ok(None),
        connect::REMOTE => Ok(Some(remote_config(state, req)?)),
        connect::STRIPE => Ok(Some(stripe_config(state, req, test_mode)?)),
        _ => {
            Err(ApiError::invalid_param(
                "kind",
                "kind is sandbox, remote or stripe",
            ))
        }
    }
}

/// Add a processor account to a shop: the sandbox, a remote processor, or a Stripe account.
///
/// Every instance can route to it when this answers (instances cache a shop's processors: the
/// answer waits `database.lookup_staleness_ms`).
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
    let name = req.checked_name()?;
    let kind = req.kind.as_deref().unwrap_or(connect::SANDBOX);
    let config = connection(&state, &req, kind, caller.test_mode())?;
    // A remote or Stripe processor receives card data: the operator may want to see it first.
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
        kind,
        // The connection (with its secrets) is stored sealed.
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
    // Routed to by every instance when this answers.
    state.generation.changed().await;
    Ok(HttpResponse::Created().json(ProcessorAccount::from(row)))
}

/// The connection settings of a `remote` account, checked.
fn remote_config(state: &AppState, req: &AddProcessorRequest) -> Result<String, ApiError> {
    let settings = &state.settings.processors;
    let url = req.url.as_deref().ok_or_else(|| {
        ApiError::invalid("parameter_missing", "a remote processor needs a url").param("url")
    })?;
    let policy = Policy::from_settings(settings.allow_private_urls, &state.settings.security);
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
    let config = RemoteConfig {
        url,
        secret,
        timeout_ms: timeout_ms(state, req)?,
    };
    serde_json::to_string(&config).map_err(ApiError::internal)
}

fn timeout_ms(state: &AppState, req: &AddProcessorRequest) -> Result<u64, ApiError> {
    let timeout_ms = req
        .timeout_ms
        .unwrap_or(state.settings.processors.default_timeout_ms);
    if !(100..=120_000).contains(&timeout_ms) {
        return Err(ApiError::invalid_param(
            "timeout_ms",
            "timeout_ms must be 100 to 120000",
        ));
    }
    Ok(timeout_ms)
}

/// The connection settings of a `stripe` account, checked: a key of the shop's mode, a
/// webhook secret, and an API base that is a scheme and host the outbound guard lets through.
fn stripe_config(
    state: &AppState,
    req: &AddProcessorRequest,
    test_mode: bool,
) -> Result<String, ApiError> {
    let key = req.secret_key.as_deref().unwrap_or("").trim();
    let (fits, mode) = if test_mode {
        (
            StripeConfig::is_test_key(key),
            "a test-mode shop takes a test key (sk_test_…)",
        )
    } else {
        (
            StripeConfig::is_live_key(key),
            "a live shop takes a live key (sk_live_…)",
        )
    };
    if !fits || key.len() > 255 || !key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
        return Err(ApiError::invalid_param(
            "secret_key",
            format!("a Stripe secret key is needed; {mode}"),
        ));
    }
    let webhook_secret = req.webhook_secret.as_deref().unwrap_or("").trim();
    if !(8..=255).contains(&webhook_secret.len()) || webhook_secret.chars().any(char::is_whitespace)
    {
        return Err(ApiError::invalid_param(
            "webhook_secret",
            "the signing secret of the account's webhook endpoint at Stripe (whsec_…) is needed",
        ));
    }
    let api_base = api_base(state, req.api_base.as_deref().unwrap_or(stripe::API_BASE))?;
    let config = StripeConfig {
        secret_key: key.to_owned(),
        webhook_secret: webhook_secret.to_owned(),
        api_base,
        timeout_ms: timeout_ms(state, req)?,
    };
    serde_json::to_string(&config).map_err(ApiError::internal)
}

/// A Stripe API base: `https://host[:port]`, or `http://` to a loopback address (a test
/// server); no path, and through the same outbound guard as every outgoing request.
fn api_base(state: &AppState, raw: &str) -> Result<String, ApiError> {
    let settings = &state.settings.processors;
    let policy = Policy::from_settings(settings.allow_private_urls, &state.settings.security);
    let url = check_url(raw, &policy).map_err(|mut e| {
        e.param = Some("api_base".into());
        e
    })?;
    let bad = |why: &str| ApiError::invalid("invalid_url", why.to_owned()).param("api_base");
    let (scheme, rest) = url.split_once("://").unwrap_or(("", &url));
    let rest = rest.trim_end_matches('/');
    if rest.contains(['/', '?', '#']) {
        return Err(bad("api_base is a scheme and host only (payd adds /v1/…)"));
    }
    let host = match rest.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => rest.split(':').next().unwrap_or(""),
    };
    let loopback = host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback());
    if scheme != "https" && !loopback {
        return Err(bad(
            "api_base must use https (http only for a loopback test server)",
        ));
    }
    Ok(format!("{scheme}://{rest}"))
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
///
/// Every instance routes to it when this answers (after `database.lookup_staleness_ms`).
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
    state.generation.changed().await;
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
///
/// Every instance routes by them when this answers (instances cache a shop's routing: the
/// answer waits `database.lookup_staleness_ms`).
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
    // In force on every instance when this answers.
    state.generation.changed().await;
    Ok(HttpResponse::Ok().json(rules))
}

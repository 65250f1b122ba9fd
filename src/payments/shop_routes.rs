//! Handlers of a shop's payment settings: its processor accounts and its routing rules.

use actix_web::{web, HttpResponse};
use payd_entity::processor_account;

use super::{
    processor_accounts,
    routing::{self, RoutingRules},
};
use crate::{
    auth::{Admin, ShopKey},
    error::ApiError,
    fields::Items,
    http::{ApiJson, ApiQuery},
    outbound::Policy,
    processors::{
        connect::{AccountKind, Approval, Connections, ProcessorConnection},
        remote::RemoteConfig,
        stripe::{self, StripeConfig},
    },
    state::AppState,
    webhooks::routes::check_url,
};

crate::http::routes! {
    "/account/shops/{profile_id}/processors" => { get: list_processors, post: add_processor },
    "/account/shops/{profile_id}/processors/{processor_account_id}" => { patch: update_processor },
    "/account/shops/{profile_id}/routing" => { get: get_routing, put: put_routing },
    "/admin/processors" => { get: admin_processors },
    "/admin/processors/{processor_account_id}" => { get: admin_processor },
    "/admin/processors/{processor_account_id}/approve" => { post: approve_processor },
    "/admin/processors/{processor_account_id}/reject" => { post: reject_processor },
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
    /// `approved`; `pending` until the operator approves it (with
    /// `processors.require_operator_approval` on); `rejected` when the operator refused it.
    /// Only an approved account is routed to or heard from.
    pub approval: String,
    /// The mode it serves: test payments only (`true`) or live payments only. Only keys of
    /// its mode see it.
    pub test_mode: bool,
    pub created: chrono::DateTime<chrono::Utc>,
}

impl From<processor_account::Model> for ProcessorAccount {
    fn from(a: processor_account::Model) -> Self {
        Self {
            processor_account_id: a.id,
            merchant_id: a.merchant_id.into(),
            profile_id: a.profile_id.into(),
            name: a.name,
            kind: a.kind.to_string(),
            enabled: a.enabled,
            approval: a.approval.to_string(),
            test_mode: a.test_mode,
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
    /// `remote` and `stripe`: per-request timeout (default `processors.default_timeout_ms`,
    /// for `stripe` at least 30 000).
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
    /// `stripe`: the account's publishable key (`pk_test_…` for a test-mode shop, `pk_live_…`
    /// for a live one), with which the hosted checkout's Stripe.js takes the card.
    #[serde(default)]
    pub publishable_key: Option<String>,
    /// `stripe`: send Stripe the card numbers typed in (default false). Only for an account
    /// Stripe approved for raw card data, whose merchant is PCI DSS SAQ D compliant; off, a
    /// card reaches Stripe only through Stripe.js (`payment_method_data.stripe`).
    #[serde(default)]
    pub raw_card_data: Option<bool>,
    /// `stripe`: what follows the account's statement descriptor on the buyer's card
    /// statement, on every payment (Stripe's `statement_descriptor_suffix`): 1 to 22 Latin
    /// characters with a letter among them, none of `< > \ ' " *`.
    #[serde(default)]
    #[schema(min_length = 1, max_length = 22)]
    pub statement_descriptor_suffix: Option<String>,
}

/// What a merchant may change of a processor account in place: its id (so the webhook URL at
/// Stripe, the saved cards and the payments it served) stays, and so do its kind, mode,
/// destination and approval. Only the fields sent change.
#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateProcessorRequest {
    /// Route to it (`true`) or not (`false`); a disabled account keeps its payments, which
    /// it still captures, refunds and syncs.
    #[serde(default)]
    pub enabled: Option<bool>,
    /// `remote` and `stripe`: per-request timeout, 100 to 120 000 ms.
    #[serde(default)]
    pub timeout_ms: Option<u64>,
    /// `remote`: a new shared secret (16 to 200 characters).
    #[serde(default)]
    pub secret: Option<String>,
    /// `stripe`: a new secret key of the account's mode (Stripe's key roll).
    #[serde(default)]
    pub secret_key: Option<String>,
    /// `stripe`: a new publishable key of the account's mode.
    #[serde(default)]
    pub publishable_key: Option<String>,
    /// `stripe`: the endpoint's signing secret; the one it replaces is still accepted for 24
    /// hours, while Stripe's roll keeps both.
    #[serde(default)]
    pub webhook_secret: Option<String>,
    /// `stripe`: whether payd may send Stripe card numbers typed in.
    #[serde(default)]
    pub raw_card_data: Option<bool>,
    /// `stripe`: the statement descriptor suffix (as on creation); `""` removes it.
    #[serde(default)]
    #[schema(max_length = 22)]
    pub statement_descriptor_suffix: Option<String>,
}

/// How long a replaced webhook secret is still accepted: as long as Stripe's roll lets the
/// old one sign (at most 24 hours, docs.stripe.com/webhooks#roll-endpoint-secrets).
const WEBHOOK_SECRET_OVERLAP_HOURS: i64 = 24;

/// Change a processor account in place: its credentials, its timeout, whether it is enabled.
///
/// Changes only the fields sent: a Stripe account's secret and publishable keys (of the
/// account's mode), webhook secret (the one it replaces is still accepted for 24 hours),
/// `raw_card_data` and statement descriptor suffix, a remote account's shared secret, the
/// timeout, `enabled`; a field the account's kind does not have is 400. The id stays, and so
/// do the kind, the mode, the destination and the operator's approval. Audited
/// (`processor_account.updated`, naming the fields changed); in force on every instance when
/// this answers. Needs a secret key that reaches the shop.
///
/// Fails: `profile_mismatch` (403), `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(patch, path = "/account/shops/{profile_id}/processors/{processor_account_id}", tag = "account",
    params(("profile_id" = String, Path), ("processor_account_id" = String, Path)),
    request_body = UpdateProcessorRequest,
    responses((status = 200, body = ProcessorAccount), (status = 400, body = crate::error::ErrorBody),
        (status = 403, body = crate::error::ErrorBody), (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn update_processor(
    ShopKey(caller, shop): ShopKey,
    state: web::Data<AppState>,
    connections: web::Data<Connections>,
    path: web::Path<(String, String)>,
    ApiJson(req): ApiJson<UpdateProcessorRequest>,
) -> Result<HttpResponse, ApiError> {
    let (_, id) = path.into_inner();
    let mut account = processor_accounts::find_account(&state.db, &id)
        .await?
        .filter(|a| {
            a.merchant_id == caller.merchant_id.as_str()
                && a.profile_id == shop.as_str()
                && a.test_mode == caller.test_mode()
        })
        .ok_or_else(|| ApiError::not_found("processor account").param("processor_account_id"))?;
    let now = state.clock.now();
    let mut changed = reconfigure(&state, &connections, &mut account, &req, now)?;
    if let Some(enabled) = req.enabled {
        account.enabled = enabled;
        changed.push("enabled");
    }
    let row =
        processor_accounts::update_account(&state.db, &account, &changed, now, &caller.key_id)
            .await?
            .ok_or_else(|| {
                ApiError::not_found("processor account").param("processor_account_id")
            })?;
    // Routed to (or not) with its new settings by every instance when this answers.
    state.generation.changed().await;
    Ok(HttpResponse::Ok().json(ProcessorAccount::from(row)))
}

/// Changes an account's sealed settings as `req` asks, for its kind (a field its kind does not
/// have is 400); the names of the fields changed.
fn reconfigure(
    state: &AppState,
    connections: &Connections,
    account: &mut processor_account::Model,
    req: &UpdateProcessorRequest,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<&'static str>, ApiError> {
    let mut changed = Vec::new();
    match account.kind {
        AccountKind::Stripe => {
            let mut c = connections
                .stripe(account)
                .ok_or_else(|| ApiError::internal("a Stripe account's settings cannot be read"))?;
            changed.extend(restripe(state, &mut c, req, account.test_mode, now)?);
            account.config = Some(
                state
                    .keyring
                    .seal(&serde_json::to_string(&c).map_err(ApiError::internal)?),
            );
        }
        AccountKind::Remote => {
            not_for(
                "remote",
                [
                    ("secret_key", req.secret_key.is_some()),
                    ("publishable_key", req.publishable_key.is_some()),
                    ("webhook_secret", req.webhook_secret.is_some()),
                    ("raw_card_data", req.raw_card_data.is_some()),
                    (
                        "statement_descriptor_suffix",
                        req.statement_descriptor_suffix.is_some(),
                    ),
                ],
            )?;
            let mut c: RemoteConfig = connections
                .remote(account)
                .ok_or_else(|| ApiError::internal("a remote account's settings cannot be read"))?;
            if let Some(secret) = &req.secret {
                if !(16..=200).contains(&secret.len()) {
                    return Err(ApiError::invalid_param("secret", "16 to 200 characters"));
                }
                c.secret = secret.clone();
                changed.push("secret");
            }
            if req.timeout_ms.is_some() {
                c.timeout_ms = timeout_ms(state, req.timeout_ms, 0)?;
                changed.push("timeout_ms");
            }
            account.config = Some(
                state
                    .keyring
                    .seal(&serde_json::to_string(&c).map_err(ApiError::internal)?),
            );
        }
        AccountKind::Sandbox => not_for(
            "sandbox",
            [
                ("secret_key", req.secret_key.is_some()),
                ("publishable_key", req.publishable_key.is_some()),
                ("webhook_secret", req.webhook_secret.is_some()),
                ("raw_card_data", req.raw_card_data.is_some()),
                (
                    "statement_descriptor_suffix",
                    req.statement_descriptor_suffix.is_some(),
                ),
                ("secret", req.secret.is_some()),
                ("timeout_ms", req.timeout_ms.is_some()),
            ],
        )?,
    }
    Ok(changed)
}

/// Refuses (400 naming it) the first field sent that an account of `kind` does not have.
fn not_for<const N: usize>(kind: &str, sent: [(&str, bool); N]) -> Result<(), ApiError> {
    match sent.iter().find(|(_, sent)| *sent) {
        Some((field, _)) => Err(ApiError::invalid_param(
            field,
            format!("a {kind} account has no {field}"),
        )),
        None => Ok(()),
    }
}

/// A Stripe account's settings with the request's changes, each checked as on creation (a
/// key of the account's own mode); the names of the fields changed. A new webhook secret keeps
/// the one it replaces for [`WEBHOOK_SECRET_OVERLAP_HOURS`].
fn restripe(
    state: &AppState,
    c: &mut StripeConfig,
    req: &UpdateProcessorRequest,
    test_mode: bool,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<&'static str>, ApiError> {
    not_for("stripe", [("secret", req.secret.is_some())])?;
    let mut changed = Vec::new();
    if let Some(key) = &req.secret_key {
        c.secret_key = secret_key(key, test_mode)?;
        changed.push("secret_key");
    }
    if let Some(pk) = &req.publishable_key {
        c.publishable_key = Some(publishable_key(pk, test_mode)?);
        changed.push("publishable_key");
    }
    if let Some(s) = &req.webhook_secret {
        let new = webhook_secret(s)?;
        if new != c.webhook_secret {
            let old = std::mem::replace(&mut c.webhook_secret, new);
            c.previous_webhook_secret = Some(old).filter(|o| !o.is_empty());
            c.previous_webhook_secret_until = c
                .previous_webhook_secret
                .as_ref()
                .map(|_| now + chrono::Duration::hours(WEBHOOK_SECRET_OVERLAP_HOURS));
        }
        changed.push("webhook_secret");
    }
    if req.timeout_ms.is_some() {
        c.timeout_ms = timeout_ms(state, req.timeout_ms, stripe::DEFAULT_TIMEOUT_MS)?;
        changed.push("timeout_ms");
    }
    if let Some(raw) = req.raw_card_data {
        c.raw_card_data = raw;
        changed.push("raw_card_data");
    }
    if let Some(suffix) = &req.statement_descriptor_suffix {
        c.statement_descriptor_suffix = match suffix.as_str() {
            "" => None,
            s => Some(descriptor_suffix(s)?),
        };
        changed.push("statement_descriptor_suffix");
    }
    Ok(changed)
}

/// A processor account as the operator sees it before approving it: the account, and where
/// its requests go with which credential (never the credential itself).
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct AdminProcessorAccount {
    #[serde(flatten)]
    pub account: ProcessorAccount,
    /// None for a sandbox account (nothing leaves payd), or one whose settings cannot be read.
    pub connection: Option<ProcessorConnection>,
}

impl AdminProcessorAccount {
    fn of(connections: &Connections, a: processor_account::Model) -> Self {
        Self {
            connection: connections.seen(&a),
            account: ProcessorAccount::from(a),
        }
    }
}

impl AddProcessorRequest {
    /// The account's name: 1 to 40 letters, digits, `-` or `_`, and not `sandbox`.
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
        // A payment the implicit sandbox served names it: no account may take its name.
        if name.eq_ignore_ascii_case(routing::DEFAULT_PROCESSOR) {
            return Err(ApiError::invalid_param(
                "name",
                "sandbox is reserved for the implicit sandbox of a shop without accounts",
            ));
        }
        Ok(name)
    }
}

/// The shop's processor accounts of the key's mode.
///
/// Each account with its kind, whether it is enabled and its operator approval. A shop without
/// any test-mode account uses the implicit `sandbox` for test payments, which is not listed.
/// Read only; needs a secret key that reaches the shop.
///
/// Fails: `profile_mismatch` (403), `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/account/shops/{profile_id}/processors", tag = "account",
    params(("profile_id" = String, Path)),
    responses((status = 200, body = Items<ProcessorAccount>)), security(("api_key" = [])))]
pub async fn list_processors(
    ShopKey(caller, shop): ShopKey,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let data: Vec<ProcessorAccount> =
        processor_accounts::accounts(&state.db, shop.as_str(), caller.test_mode())
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
    kind: AccountKind,
    test_mode: bool,
) -> Result<Option<String>, ApiError> {
    match kind {
        // Live payments never reach the sandbox: a live key cannot add one.
        AccountKind::Sandbox if !test_mode => {
            Err(ApiError::invalid_param(
                "kind",
                "a live key adds remote or stripe processors only; sandbox processors answer test payments",
            ))
        }
        AccountKind::Sandbox => Ok(None),
        AccountKind::Remote => Ok(Some(remote_config(state, req)?)),
        AccountKind::Stripe => Ok(Some(stripe_config(state, req, test_mode)?)),
    }
}

/// Add a processor account to a shop: the sandbox, a remote processor, or a Stripe account.
///
/// The account serves the key's mode alone (a Stripe key must be of that mode; a live key
/// cannot add a sandbox) and its credentials are stored sealed. With
/// `processors.require_operator_approval` on, a remote or Stripe account is added `pending`
/// and is never routed to until the operator approves it. Every instance can route to it when
/// this answers (instances cache a shop's processors: the answer waits
/// `database.lookup_staleness_ms`); audited as `processor_account.added`.
///
/// Fails: `invalid_url` (400), `profile_mismatch` (403), `resource_missing` (404), `processor_exists` (409).
///
/// Events: none.
#[utoipa::path(post, path = "/account/shops/{profile_id}/processors", tag = "account",
    params(("profile_id" = String, Path)), request_body = AddProcessorRequest,
    responses((status = 201, body = ProcessorAccount), (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn add_processor(
    ShopKey(caller, shop): ShopKey,
    state: web::Data<AppState>,
    ApiJson(req): ApiJson<AddProcessorRequest>,
) -> Result<HttpResponse, ApiError> {
    let name = req.checked_name()?;
    let kind = match req.kind.as_deref() {
        None => AccountKind::Sandbox,
        Some(k) => AccountKind::parse(k)
            .ok_or_else(|| ApiError::invalid_param("kind", "kind is sandbox, remote or stripe"))?,
    };
    let config = connection(&state, &req, kind, caller.test_mode())?;
    let approval = approval_of(&state, config.is_some());
    let row = processor_accounts::insert_account(
        &state.db,
        &caller.merchant_id,
        &shop,
        name,
        kind,
        // The connection (with its secrets) is stored sealed.
        config.map(|c| state.keyring.seal(&c)),
        approval,
        caller.test_mode(),
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

/// A new account's approval: a remote or Stripe processor (one with a connection) receives
/// card data, so the operator may want to see it first.
fn approval_of(state: &AppState, connected: bool) -> Approval {
    if connected && state.settings.processors.require_operator_approval {
        Approval::Pending
    } else {
        Approval::Approved
    }
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
        timeout_ms: timeout_ms(state, req.timeout_ms, 0)?,
    };
    serde_json::to_string(&config).map_err(ApiError::internal)
}

/// The account's timeout per request: its own, else the operator's default (at least
/// `floor`: Stripe's is 30 seconds).
fn timeout_ms(state: &AppState, asked: Option<u64>, floor: u64) -> Result<u64, ApiError> {
    let timeout_ms = asked.unwrap_or(state.settings.processors.default_timeout_ms.max(floor));
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
    let secret_key = secret_key(req.secret_key.as_deref().unwrap_or(""), test_mode)?;
    // The endpoint's URL at Stripe names the account: its secret may come after (PATCH).
    let webhook_secret = match req.webhook_secret.as_deref() {
        Some(s) => webhook_secret(s)?,
        None => String::new(),
    };
    let api_base = api_base(state, req.api_base.as_deref().unwrap_or(stripe::API_BASE))?;
    let publishable_key = req
        .publishable_key
        .as_deref()
        .map(|pk| publishable_key(pk, test_mode))
        .transpose()?;
    let config = StripeConfig {
        secret_key,
        webhook_secret,
        previous_webhook_secret: None,
        previous_webhook_secret_until: None,
        api_base,
        timeout_ms: timeout_ms(state, req.timeout_ms, stripe::DEFAULT_TIMEOUT_MS)?,
        publishable_key,
        raw_card_data: req.raw_card_data.unwrap_or(false),
        statement_descriptor_suffix: req
            .statement_descriptor_suffix
            .as_deref()
            .map(descriptor_suffix)
            .transpose()?,
    };
    serde_json::to_string(&config).map_err(ApiError::internal)
}

/// A Stripe secret key of the shop's mode (`sk_test_…`/`rk_test_…` for a test-mode shop,
/// `sk_live_…`/`rk_live_…` for a live one), checked.
fn secret_key(key: &str, test_mode: bool) -> Result<String, ApiError> {
    let key = key.trim();
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
    Ok(key.to_owned())
}

/// A Stripe webhook signing secret, checked.
fn webhook_secret(s: &str) -> Result<String, ApiError> {
    let s = s.trim();
    if !is_webhook_secret(s) {
        return Err(ApiError::invalid_param(
            "webhook_secret",
            "the signing secret of the account's webhook endpoint at Stripe: whsec_ and at least 24 letters and digits",
        ));
    }
    Ok(s.to_owned())
}

/// A Stripe publishable key of the shop's mode, checked.
fn publishable_key(pk: &str, test_mode: bool) -> Result<String, ApiError> {
    let pk = pk.trim();
    let prefix = if test_mode { "pk_test_" } else { "pk_live_" };
    let fits = pk.starts_with(prefix)
        && pk.len() <= 255
        && pk.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    if !fits {
        return Err(ApiError::invalid_param(
            "publishable_key",
            format!("the account's publishable key of the shop's mode: {prefix}…"),
        ));
    }
    Ok(pk.to_owned())
}

/// A statement descriptor suffix as Stripe takes it
/// (docs.stripe.com/get-started/account/statement-descriptors): Latin characters only, at most
/// 22 (with the account's prefix, Stripe shortens the whole to 22), at least one letter, none
/// of `< > \ ' " *`.
fn descriptor_suffix(s: &str) -> Result<String, ApiError> {
    let param = "statement_descriptor_suffix";
    let s = s.trim();
    if !(1..=22).contains(&s.chars().count()) {
        return Err(ApiError::invalid_param(param, "1 to 22 characters"));
    }
    if let Some(c) = s
        .chars()
        .find(|c| !(' '..='~').contains(c) || "<>\\'\"*".contains(*c))
    {
        return Err(ApiError::invalid_param(
            param,
            format!("Stripe takes Latin letters, digits and punctuation other than < > \\ ' \" *, not {c:?}"),
        ));
    }
    if !s.chars().any(|c| c.is_ascii_alphabetic()) {
        return Err(ApiError::invalid_param(param, "at least one letter"));
    }
    Ok(s.to_owned())
}

/// Whether `s` has the form of a Stripe webhook signing secret: `whsec_` and 24 to 200
/// letters and digits (Stripe's are `whsec_` and 32; a short guessable one would let anyone
/// forge the account's events).
fn is_webhook_secret(s: &str) -> bool {
    s.strip_prefix("whsec_").is_some_and(|rest| {
        (24..=200).contains(&rest.len()) && rest.bytes().all(|b| b.is_ascii_alphanumeric())
    })
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
    if scheme != "https" && !crate::settings::is_loopback_authority(rest) {
        return Err(bad(
            "api_base must use https (http only for a loopback test server)",
        ));
    }
    Ok(format!("{scheme}://{rest}"))
}

/// Which accounts the operator lists.
#[derive(serde::Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct AdminProcessorsQuery {
    /// `pending` (default), `approved` or `rejected`.
    #[serde(default)]
    pub approval: Option<String>,
}

/// Every merchant's processor accounts in one approval state.
///
/// By default those waiting for the operator (`approval=pending`; also `approved` or
/// `rejected`), each with where it sends requests and with which credential (its mode and last
/// four characters, never the credential). Read only; needs the admin key.
///
/// Fails: none beyond the common errors.
///
/// Events: none.
#[utoipa::path(get, path = "/admin/processors", tag = "admin", params(AdminProcessorsQuery),
    responses((status = 200, body = Items<AdminProcessorAccount>), (status = 400, body = crate::error::ErrorBody)),
    security(("admin_key" = [])))]
pub async fn admin_processors(
    _: Admin,
    state: web::Data<AppState>,
    connections: web::Data<Connections>,
    ApiQuery(q): ApiQuery<AdminProcessorsQuery>,
) -> Result<HttpResponse, ApiError> {
    let approval = match q.approval.as_deref() {
        None => Approval::Pending,
        Some(a) => Approval::parse(a).ok_or_else(|| {
            ApiError::invalid_param("approval", "approval is pending, approved or rejected")
        })?,
    };
    let data = processor_accounts::accounts_in(&state.db, approval)
        .await?
        .into_iter()
        .map(|a| AdminProcessorAccount::of(&connections, a))
        .collect();
    Ok(HttpResponse::Ok().json(Items { data }))
}

/// One processor account, any merchant's, as the operator sees it before approving it.
///
/// The account with where its requests go and with which credential (never the credential
/// itself). Read only; needs the admin key.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/admin/processors/{processor_account_id}", tag = "admin",
    params(("processor_account_id" = String, Path)),
    responses((status = 200, body = AdminProcessorAccount), (status = 404, body = crate::error::ErrorBody)),
    security(("admin_key" = [])))]
pub async fn admin_processor(
    _: Admin,
    state: web::Data<AppState>,
    connections: web::Data<Connections>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let row = processor_accounts::find_account(&state.db, &id)
        .await?
        .ok_or_else(|| ApiError::not_found("processor account").param("processor_account_id"))?;
    Ok(HttpResponse::Ok().json(AdminProcessorAccount::of(&connections, row)))
}

/// Sets an account's approval and answers it as the operator sees it.
async fn decide(
    state: &AppState,
    connections: &Connections,
    id: &str,
    approval: Approval,
) -> Result<HttpResponse, ApiError> {
    let row = processor_accounts::decide_account(&state.db, id, approval, state.clock.now())
        .await?
        .ok_or_else(|| ApiError::not_found("processor account").param("processor_account_id"))?;
    // In force on every instance when this answers.
    state.generation.changed().await;
    Ok(HttpResponse::Ok().json(AdminProcessorAccount::of(connections, row)))
}

/// Approve a processor account (of either mode).
///
/// From now on it is routed to and its events are heard (`approval: approved`). Every instance
/// routes to it when this answers (after `database.lookup_staleness_ms`). Needs the admin key.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(post, path = "/admin/processors/{processor_account_id}/approve", tag = "admin",
    params(("processor_account_id" = String, Path)),
    responses((status = 200, body = AdminProcessorAccount), (status = 404, body = crate::error::ErrorBody)),
    security(("admin_key" = [])))]
pub async fn approve_processor(
    _: Admin,
    state: web::Data<AppState>,
    connections: web::Data<Connections>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    decide(&state, &connections, &id, Approval::Approved).await
}

/// Reject a processor account: it is never routed to and its events are refused.
///
/// Sets `approval: rejected`: an approved account stops being routed to and heard from when
/// this answers, on every instance. Needs the admin key.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(post, path = "/admin/processors/{processor_account_id}/reject", tag = "admin",
    params(("processor_account_id" = String, Path)),
    responses((status = 200, body = AdminProcessorAccount), (status = 404, body = crate::error::ErrorBody)),
    security(("admin_key" = [])))]
pub async fn reject_processor(
    _: Admin,
    state: web::Data<AppState>,
    connections: web::Data<Connections>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    decide(&state, &connections, &id, Approval::Rejected).await
}

/// The shop's routing rules of the key's mode.
///
/// The rules as last put, tried in order: the first whose conditions hold decides which
/// accounts a payment goes to. A shop that never put any has none. Read only; needs a secret
/// key that reaches the shop.
///
/// Fails: `profile_mismatch` (403), `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/account/shops/{profile_id}/routing", tag = "account",
    params(("profile_id" = String, Path)),
    responses((status = 200, body = RoutingRules)), security(("api_key" = [])))]
pub async fn get_routing(
    ShopKey(caller, shop): ShopKey,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    let rules =
        processor_accounts::routing_rules(&state.db, shop.as_str(), caller.test_mode()).await?;
    Ok(HttpResponse::Ok().json(rules))
}

/// Replace the shop's routing rules of the key's mode.
///
/// The rules may name only the shop's accounts of that mode (400 naming the field otherwise).
/// Every instance routes by them when this answers (instances cache a shop's routing: the
/// answer waits `database.lookup_staleness_ms`). Needs a secret key that reaches the shop.
///
/// Fails: `profile_mismatch` (403), `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(put, path = "/account/shops/{profile_id}/routing", tag = "account",
    params(("profile_id" = String, Path)), request_body = RoutingRules,
    responses((status = 200, body = RoutingRules), (status = 400, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn put_routing(
    ShopKey(caller, shop): ShopKey,
    state: web::Data<AppState>,
    ApiJson(rules): ApiJson<RoutingRules>,
) -> Result<HttpResponse, ApiError> {
    let mode = caller.test_mode();
    let names: Vec<String> = processor_accounts::accounts(&state.db, shop.as_str(), mode)
        .await?
        .into_iter()
        .map(|a| a.name)
        .collect();
    super::routing::validate(&rules, &names)?;
    processor_accounts::put_routing_rules(
        &state.db,
        shop.as_str(),
        mode,
        &rules,
        state.clock.now(),
    )
    .await?;
    // In force on every instance when this answers.
    state.generation.changed().await;
    Ok(HttpResponse::Ok().json(rules))
}

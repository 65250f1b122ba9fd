//! Typed configuration: built-in defaults, then an optional file, then `PAYD_*` variables.

use std::time::Duration;

use config::{Config, Environment, File, FileFormat};
use serde::Deserialize;

/// The defaults, compiled in so the binary runs with nothing beside it.
const DEFAULTS: &str = include_str!("../../config/default.toml");

/// What production mode changes in the defaults: every guard on (applied before the
/// operator's file and variables, which may still turn one off).
const PRODUCTION_DEFAULTS: &str = include_str!("../../config/production-defaults.toml");

/// The pepper shipped in `config/default.toml`; production refuses to run with it.
const SANDBOX_PEPPER: &str = "payd-sandbox-pepper-change-me";

#[derive(Debug, thiserror::Error)]
pub enum SettingsError {
    #[error("invalid configuration: {0}")]
    Invalid(#[from] config::ConfigError),
    #[error("invalid configuration: `{key}`: {message}")]
    Key { key: &'static str, message: String },
}

/// How the deployment runs: `sandbox` has only test keys; `production` may also issue live keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DeploymentMode {
    Sandbox,
    Production,
}

/// Every key must be known, sections included: `PAYD_DATABSE__URL` (a typo) is refused at
/// start-up, naming it, instead of being ignored.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Settings {
    pub mode: DeploymentMode,
    pub listen: String,
    #[serde(default)]
    pub admin_key: Option<String>,
    /// Older admin keys, comma-separated, still accepted while an operator's tools move to
    /// `admin_key` (each use is counted in `payd_admin_previous_key_uses_total`).
    #[serde(default)]
    pub previous_admin_keys: String,
    pub database: DatabaseSettings,
    pub security: SecuritySettings,
    pub http: HttpSettings,
    pub actors: ActorSettings,
    pub scheduler: SchedulerSettings,
    pub idempotency: IdempotencySettings,
    pub log: LogSettings,
    pub sandbox: SandboxSettings,
    pub webhooks: WebhookSettings,
    pub limits: LimitSettings,
    pub processors: ProcessorSettings,
    #[serde(default)]
    pub subscriptions: SubscriptionSettings,
    pub risk: RiskSettings,
}

/// Shops' risk bands: how often and over what window they are assessed, and the rates at
/// which a shop enters each band.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RiskSettings {
    /// Between two scheduled assessments of every shop (`30m`, `1h`, `2d`, or seconds).
    #[serde(deserialize_with = "span")]
    pub assess_every: Duration,
    /// The rolling window the figures are counted over.
    #[serde(deserialize_with = "span")]
    pub window: Duration,
    /// Fewer payments decided in the window than this: the rates are not judged (band `low`).
    pub min_payments: u64,
    pub elevated: RiskThresholds,
    pub high: RiskThresholds,
    pub critical: RiskThresholds,
}

pub use payd_model::risk::RiskThresholds;

/// A span written as seconds (`3600`) or with a unit (`90s`, `30m`, `1h`, `30d`).
fn span<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Secs(u64),
        Text(String),
    }
    let secs = match Raw::deserialize(d)? {
        Raw::Secs(n) => Some(n),
        Raw::Text(t) => {
            let t = t.trim();
            let (n, unit) = t.split_at(t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len()));
            let unit = match unit {
                "" | "s" => Some(1),
                "m" => Some(60),
                "h" => Some(3600),
                "d" => Some(86_400),
                _ => None,
            };
            n.parse::<u64>()
                .ok()
                .zip(unit)
                .and_then(|(n, u)| n.checked_mul(u))
        }
    };
    match secs {
        Some(s) if s > 0 => Ok(Duration::from_secs(s)),
        _ => Err(serde::de::Error::custom(
            "expected a positive number of seconds or a span such as 30m, 1h or 30d",
        )),
    }
}

/// Remote processors.
/// How subscriptions bill.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SubscriptionSettings {
    /// Days to wait before each retry of a cycle that could not be collected; when they run
    /// out the subscription is `unpaid`.
    #[serde(default = "default_retry_schedule")]
    pub retry_schedule_days: Vec<u32>,
    /// How long a subscription whose first charge failed stays `created` before it expires.
    #[serde(default = "default_confirm_within")]
    pub confirm_within_hours: u32,
}

fn default_retry_schedule() -> Vec<u32> {
    vec![1, 3, 5]
}

fn default_confirm_within() -> u32 {
    24
}

impl Default for SubscriptionSettings {
    fn default() -> Self {
        Self {
            retry_schedule_days: default_retry_schedule(),
            confirm_within_hours: default_confirm_within(),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProcessorSettings {
    /// Consecutive failures (timeouts, 5xx, network) that open a processor's circuit.
    pub circuit_failure_threshold: u32,
    /// How long an open circuit stays open before one probe may pass.
    pub circuit_cooldown_secs: u64,
    /// Default per-request timeout of a remote processor account.
    pub default_timeout_ms: u64,
    /// Accept processor URLs on private, loopback and link-local addresses.
    pub allow_private_urls: bool,
    /// A remote account a merchant adds is `pending` (never routed to) until an operator
    /// approves it through `POST /admin/processors/{id}/approve`.
    pub require_operator_approval: bool,
    /// How often each Stripe account's events are read from Stripe's `GET /v1/events`, so
    /// that one whose delivery was missed still reaches payd.
    pub stripe_events_catch_up_secs: u64,
    /// The full URL of Stripe.js that the hosted checkout loads for a Stripe account: Stripe's
    /// own (`https://js.stripe.com/v3/`), or a loopback address (a test server's stand-in).
    pub stripe_js_url: String,
}

/// Stripe.js, which the hosted checkout loads for a Stripe account
/// (docs.stripe.com/js: always from js.stripe.com, never bundled or self-hosted).
pub const STRIPE_JS_URL: &str = "https://js.stripe.com/v3/";

/// The origin (`scheme://host[:port]`) of a Stripe.js URL payd may load: Stripe's own, or one
/// on a loopback address (a test server's stand-in); `None` for any other.
pub fn stripe_js_origin(url: &str) -> Option<String> {
    let url = url.trim();
    if url == STRIPE_JS_URL {
        return Some("https://js.stripe.com".into());
    }
    let (scheme, rest) = url.split_once("://")?;
    let authority = rest.split(['/', '?', '#']).next()?;
    if !matches!(scheme, "http" | "https") || authority.contains('@') {
        return None;
    }
    is_loopback_authority(authority).then(|| format!("{scheme}://{authority}"))
}

/// Whether a URL's `host[:port]` (`[v6]:port` for IPv6) names a loopback address: `localhost`,
/// `127.…`, `[::1]`.
pub fn is_loopback_authority(authority: &str) -> bool {
    let host = match authority.strip_prefix('[') {
        Some(v6) => v6.split(']').next().unwrap_or(""),
        None => authority.split(':').next().unwrap_or(""),
    };
    host == "localhost"
        || host
            .parse::<std::net::IpAddr>()
            .is_ok_and(|ip| ip.is_loopback())
}

/// Abuse limits.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LimitSettings {
    /// Requests a second per secret key, per client address and per payment (0: no limits).
    pub requests_per_second: u32,
    /// How many requests a key may send at once after a quiet time.
    pub burst: u32,
    /// Requests a second of all of a merchant's secret keys together (0: no merchant limit).
    pub merchant_requests_per_second: u32,
    pub merchant_burst: u32,
    /// The header a trusted reverse proxy puts the client's address in (`x-real-ip`); unset,
    /// the TCP peer is the client.
    #[serde(default)]
    pub client_address_header: Option<String>,
    /// The largest file `POST /files` accepts, in bytes.
    pub max_file_bytes: usize,
    /// API keys a merchant may hold (revoked keys do not count).
    pub max_api_keys_per_merchant: u64,
    pub max_shops_per_merchant: u64,
    /// Files a merchant may store, and their bytes together.
    pub max_files_per_merchant: u64,
    pub max_file_bytes_per_merchant: u64,
    /// The largest amount of a payment, in minor units (a capture or refund is bounded by it).
    #[serde(default = "default_max_amount")]
    pub max_amount: i64,
    /// The largest product image `POST /products/images` accepts, in bytes.
    #[serde(default = "default_max_image_bytes")]
    pub max_image_bytes: usize,
    /// Products one shop's catalog may hold (archived ones count).
    #[serde(default = "default_max_products_per_shop")]
    pub max_products_per_shop: u64,
}

fn default_max_amount() -> i64 {
    99_999_999_999
}

fn default_max_image_bytes() -> usize {
    5 * 1024 * 1024
}

fn default_max_products_per_shop() -> u64 {
    10_000
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DatabaseSettings {
    pub url: String,
    /// Pool size: 4 on SQLite (one connection writes, the others read alongside; 1 in
    /// memory), 10 on PostgreSQL.
    #[serde(default)]
    pub max_connections: Option<u32>,
    /// How long a request waits for a connection before it answers 503
    /// `database_unavailable`.
    #[serde(default = "default_acquire_timeout_ms")]
    pub acquire_timeout_ms: u64,
    /// Group writers: each writes the changes that arrive together in one transaction.
    /// Defaults to 1 on SQLite (it has one writer anyway) and to 4 on PostgreSQL.
    #[serde(default)]
    pub writers: Option<usize>,
    /// At most this many changes share a transaction.
    #[serde(default = "default_max_batch")]
    pub max_batch: usize,
    /// PostgreSQL: announce the deliveries a commit queued to the other instances and hear
    /// theirs (`NOTIFY`/`LISTEN`).
    #[serde(default = "yes")]
    pub notify: bool,
    /// How stale a cached API key or shop routing may be on another instance (`lookups.rs`);
    /// 0 turns the caches off.
    #[serde(default = "default_lookup_staleness_ms")]
    pub lookup_staleness_ms: u64,
    /// SQLite: the group writer holds its connection for a whole transaction and runs its
    /// statements on its own thread (`commit::direct`) instead of handing each one to the
    /// connection's thread (on by default: 12 % less CPU per payment, `docs/performance.md`).
    #[serde(default = "yes")]
    pub sqlite_direct: bool,
}

impl DatabaseSettings {
    pub fn is_sqlite(&self) -> bool {
        self.url.starts_with("sqlite:")
    }

    /// The number of group writers to start.
    pub fn writers(&self) -> usize {
        self.writers.unwrap_or(if self.is_sqlite() { 1 } else { 4 })
    }
}

fn default_lookup_staleness_ms() -> u64 {
    500
}

fn default_max_batch() -> usize {
    64
}

fn yes() -> bool {
    true
}

fn default_acquire_timeout_ms() -> u64 {
    5_000
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecuritySettings {
    pub key_pepper: String,
    /// Older peppers, comma-separated: keys hashed under them still authenticate, and new keys
    /// are hashed under `key_pepper` (`GET /admin/key-peppers` counts each pepper's keys).
    #[serde(default)]
    pub previous_key_peppers: String,
    /// Networks outgoing requests (webhooks, remote processors) may reach although private,
    /// comma-separated CIDRs: an operator's allow-list (e.g. `10.1.2.0/24`).
    #[serde(default)]
    pub allowed_outbound_cidrs: String,
    /// Host names pinned to an address for outgoing requests, `name=address` comma-separated
    /// (like `curl --resolve`); the outbound guard still judges the address.
    #[serde(default)]
    pub resolve_overrides: String,
    /// The key that seals stored secrets (webhook signing secrets, processor credentials):
    /// 32 bytes, base64. Production refuses to start without one; the sandbox falls back to
    /// a fixed, public key.
    #[serde(default)]
    pub master_key: Option<String>,
    /// Older master keys, comma-separated: what they sealed still opens, and is sealed again
    /// with `master_key` at start-up.
    #[serde(default)]
    pub previous_master_keys: String,
}

impl SecuritySettings {
    /// `key_pepper` first, then `previous_key_peppers`: the peppers a presented key is tried
    /// under.
    pub fn key_peppers(&self) -> impl Iterator<Item = &str> {
        std::iter::once(self.key_pepper.as_str()).chain(split_list(&self.previous_key_peppers))
    }

    /// `allowed_outbound_cidrs`, read.
    pub fn allowed_outbound(&self) -> Result<Vec<ipnet::IpNet>, String> {
        self.allowed_outbound_cidrs
            .split_terminator(',')
            .map(|c| {
                c.trim()
                    .parse()
                    .map_err(|_| format!("{:?} is not a CIDR (e.g. 10.1.2.0/24)", c.trim()))
            })
            .collect()
    }

    /// `resolve_overrides`, read.
    pub fn pinned_hosts(&self) -> Result<Vec<(String, std::net::IpAddr)>, String> {
        self.resolve_overrides
            .split_terminator(',')
            .map(|pair| {
                let (name, ip) = pair.trim().split_once('=').ok_or("expected name=address")?;
                let ip = ip
                    .trim()
                    .parse()
                    .map_err(|_| format!("{ip:?} is not an address"))?;
                Ok((name.trim().to_ascii_lowercase(), ip))
            })
            .collect()
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpSettings {
    pub max_body_bytes: usize,
    pub shutdown_timeout_secs: u64,
    /// A request still running after this many seconds is answered 503 `request_timeout`.
    pub request_timeout_secs: u64,
    /// Worker threads; 0 means one per core.
    #[serde(default)]
    pub workers: usize,
    /// A second listen address for the operator's routes (`/metrics`, `/admin/…`), which then
    /// answer only there; unset, every route answers on `listen`.
    #[serde(default)]
    pub operator_listen: Option<String>,
    /// The address buyers reach payd at (the base of `checkout_url`); defaults to
    /// `http://<listen address>`.
    #[serde(default)]
    pub public_url: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ActorSettings {
    pub mailbox_capacity: usize,
    pub idle_timeout_secs: u64,
    /// Arbiter threads that host actors; 0 means one per core.
    #[serde(default)]
    pub arbiters: usize,
    /// How long a payment actor keeps its row after its last message; then it holds only its
    /// id until the next message reads the row again (or the idle timeout passivates it).
    #[serde(default = "default_row_cache_ms")]
    pub row_cache_ms: u64,
}

fn default_row_cache_ms() -> u64 {
    2000
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SchedulerSettings {
    pub poll_interval_ms: u64,
    pub lease_secs: u64,
    pub batch_size: u64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct IdempotencySettings {
    pub ttl_hours: u64,
    /// How long an unanswered key stays locked before another request may take it over.
    pub lock_secs: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LogFormat {
    Pretty,
    Json,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LogSettings {
    pub format: LogFormat,
    pub filter: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SandboxSettings {
    /// Create a demo merchant and shop on first start and write their keys to `data_dir`.
    pub demo_merchant: bool,
    pub data_dir: String,
    /// How long asynchronous and review test cards take to settle.
    pub async_delay_secs: u64,
    /// A fault for tests: operations (`authorize`, `challenge`, `capture`, `void`, `refund`) whose
    /// first commit of a processor's answer, per instance, fails as a database error would.
    /// Refused in production mode.
    #[serde(default)]
    pub fail_outcome_commits: String,
    /// The most subscriptions a sandbox merchant may have that have not ended (`created`,
    /// `active`, `paused` or `unpaid`): the test clock renews every one of them.
    #[serde(default = "max_sandbox_subscriptions")]
    pub max_subscriptions: u64,
    /// The most subscription charges (renewals) one advance of a test clock may make.
    #[serde(default = "max_advance_charges")]
    pub max_advance_charges: u64,
}

fn max_sandbox_subscriptions() -> u64 {
    100
}

fn max_advance_charges() -> u64 {
    1_000
}

/// Webhook delivery: schedules are seconds between attempts.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct WebhookSettings {
    /// After network errors, timeouts, 5xx, 408 and 429.
    #[serde(deserialize_with = "schedule")]
    pub transient_retry_schedule: Vec<u64>,
    /// After 401 and 403.
    #[serde(deserialize_with = "schedule")]
    pub auth_retry_schedule: Vec<u64>,
    /// Spread retries by up to ±10 %.
    pub jitter: bool,
    /// Requests open at once to one endpoint from one instance (a merchant's queue sends to
    /// its other endpoints beside one at this bound).
    pub max_in_flight_per_endpoint: usize,
    pub request_timeout_secs: u64,
    /// Accept endpoints on private, loopback and link-local addresses.
    pub allow_private_urls: bool,
    pub poll_interval_ms: u64,
    pub lease_secs: u64,
    pub batch_size: u64,
    /// The most events one `POST /events/{merchant_id}/replay` queues (never more than a
    /// merchant's queue takes: see [`WebhookSettings::replay_bound`]).
    pub replay_max: u64,
    /// Whether this instance sends webhooks (false: an API-only node).
    #[serde(default = "yes")]
    pub dispatch: bool,
    /// An endpoint that has failed without one success for this long is disabled.
    pub disable_after_secs: u64,
    /// How often the retention purge (and the sweep for failing endpoints) runs.
    pub purge_interval_secs: u64,
    /// Delivery attempts older than this are deleted.
    pub attempt_retention_secs: u64,
    /// Event payloads older than this are replaced with a tombstone (the event stays listed).
    pub payload_retention_secs: u64,
}

impl WebhookSettings {
    /// A merchant whose queue holds this much is skipped by the dispatcher's claims, and its
    /// queue takes no more manual retries. At least a claim's batch, so the next claim arrives
    /// while the queue still has work.
    pub fn backlog_limit(&self) -> usize {
        Ord::max(
            self.max_in_flight_per_endpoint * 4,
            self.batch_size as usize,
        )
    }

    /// The most events one replay queues: `replay_max`, within what an empty queue takes.
    pub fn replay_bound(&self) -> u64 {
        Ord::min(self.replay_max, self.backlog_limit() as u64)
    }
}

/// A schedule written as `5,300,1800` (or a TOML array, or one number).
fn schedule<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<u64>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Text(String),
        One(u64),
        List(Vec<u64>),
    }
    let parsed = match Raw::deserialize(d)? {
        Raw::One(n) => vec![n],
        Raw::List(v) => v,
        Raw::Text(s) => s
            .split(',')
            .map(|p| p.trim().parse::<u64>())
            .collect::<Result<_, _>>()
            .map_err(|_| {
                serde::de::Error::custom("expected comma-separated seconds, e.g. 5,300,1800")
            })?,
    };
    if parsed.is_empty() || parsed.len() > 50 {
        return Err(serde::de::Error::custom("a schedule has 1 to 50 entries"));
    }
    Ok(parsed)
}

/// A comma-separated setting's entries, trimmed, the empty ones skipped.
pub fn split_list(list: &str) -> impl Iterator<Item = &str> + Clone {
    list.split(',').map(str::trim).filter(|s| !s.is_empty())
}

impl Settings {
    /// `admin_key` first, then `previous_admin_keys`.
    pub fn admin_keys(&self) -> impl Iterator<Item = &str> {
        self.admin_key
            .as_deref()
            .into_iter()
            .chain(split_list(&self.previous_admin_keys))
    }

    /// Reads the layers from the process environment.
    pub fn load() -> Result<Self, SettingsError> {
        Self::load_from(std::env::vars().collect())
    }

    /// Reads the layers from the given variables (tests pass their own). Production mode's
    /// defaults follow the mode: the layers are read once to learn the mode, and again with
    /// [`PRODUCTION_DEFAULTS`] over the built-in ones when it is production.
    pub fn load_from(vars: Vec<(String, String)>) -> Result<Self, SettingsError> {
        let settings = Self::layered_for_mode(&vars)?;
        settings.validate()?;
        Ok(settings)
    }

    /// The layers with only `listen` and `database.*` checked: what `payd migrate`, `payd
    /// backup` and `payd health` need, so that they run without the application's secrets.
    pub fn load_for_database() -> Result<Self, SettingsError> {
        let vars: Vec<(String, String)> = std::env::vars().collect();
        let settings = Self::layered_for_mode(&vars)?;
        settings.validate_listen_and_database()?;
        Ok(settings)
    }

    /// The layers, with production's defaults when the mode they give is production.
    fn layered_for_mode(vars: &[(String, String)]) -> Result<Self, SettingsError> {
        let settings = Self::layered(vars, false)?;
        if settings.mode == DeploymentMode::Production {
            return Self::layered(vars, true);
        }
        Ok(settings)
    }

    /// The guards that are off in production mode, each with what that lets through: logged
    /// as a warning at every start. Empty in the sandbox.
    pub fn production_warnings(&self) -> Vec<String> {
        if self.mode != DeploymentMode::Production {
            return Vec::new();
        }
        let off = [
            (
                self.webhooks.allow_private_urls,
                "webhooks.allow_private_urls is on: merchants' webhook URLs may name loopback, private and link-local addresses",
            ),
            (
                self.processors.allow_private_urls,
                "processors.allow_private_urls is on: remote processors and Stripe api_base may name loopback, private and link-local addresses",
            ),
            (
                !self.processors.require_operator_approval,
                "processors.require_operator_approval is off: a processor account a merchant adds receives card data without the operator's approval",
            ),
        ];
        off.iter()
            .filter(|(is_off, _)| *is_off)
            .map(|(_, warning)| (*warning).to_owned())
            .collect()
    }

    /// The layers, unchecked: defaults (and production's over them), the file, the variables.
    fn layered(vars: &[(String, String)], production: bool) -> Result<Self, SettingsError> {
        let get = |name: &str| {
            // The last occurrence wins, as when a variable is set twice.
            vars.iter()
                .rev()
                .find(|(k, _)| k == name)
                .map(|(_, v)| v.clone())
                .filter(|v| !v.is_empty())
        };
        let mut builder = Config::builder().add_source(File::from_str(DEFAULTS, FileFormat::Toml));
        if production {
            builder = builder.add_source(File::from_str(PRODUCTION_DEFAULTS, FileFormat::Toml));
        }
        if let Some(path) = get("PAYD_CONFIG") {
            builder = builder.add_source(File::with_name(&path).required(true));
        }
        let env: config::Map<String, String> = vars
            .iter()
            .filter(|(k, _)| k.starts_with("PAYD_") && k.contains("__"))
            .cloned()
            .collect();
        builder = builder.add_source(
            Environment::with_prefix("PAYD")
                .prefix_separator("_")
                .separator("__")
                .try_parsing(true)
                .source(Some(env)),
        );
        // The documented shortcuts, applied last so they win over the file.
        if let Some(v) = get("PAYD_LISTEN") {
            builder = builder.set_override("listen", v)?;
        }
        if let Some(v) = get("PAYD_DATABASE_URL").or_else(|| get("DATABASE_URL")) {
            builder = builder.set_override("database.url", v)?;
        }
        if let Some(v) = get("PAYD_ADMIN_KEY") {
            builder = builder.set_override("admin_key", v)?;
        }
        if let Some(v) = get("PAYD_PREVIOUS_ADMIN_KEYS") {
            builder = builder.set_override("previous_admin_keys", v)?;
        }
        if let Some(v) = get("PAYD_MODE") {
            builder = builder.set_override("mode", v)?;
        }
        Ok(builder.build()?.try_deserialize()?)
    }

    pub fn is_sqlite(&self) -> bool {
        self.database.url.starts_with("sqlite:")
    }

    pub fn idle_timeout(&self) -> Duration {
        Duration::from_secs(self.actors.idle_timeout_secs)
    }
}

mod validate;

#[cfg(test)]
mod tests;

//! Structured logs through `tracing`: pretty for people, JSON for machines. Nothing logged
//! carries a key, a secret or a card number: requests are logged by method, path and id only.

use std::sync::atomic::{AtomicBool, Ordering};

use tracing_subscriber::{fmt, EnvFilter};

use crate::settings::{LogFormat, LogSettings};

/// Installs the global subscriber; `RUST_LOG` overrides the configured filter.
pub fn init(log: &LogSettings) {
    let mut filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&log.filter))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    // The migration library's notices at every start ("No pending migrations", each step)
    // are noise to an operator: payd logs the migrations it applied itself (`db::migrate`).
    // A filter that names the library keeps its own say.
    let spec = std::env::var("RUST_LOG").unwrap_or_else(|_| log.filter.clone());
    if !spec.contains("sea_orm_migration") {
        if let Ok(quiet) = "sea_orm_migration=warn".parse() {
            filter = filter.add_directive(quiet);
        }
    }
    // Standard error, so that commands' own output (JSON on stdout) stays clean.
    let builder = fmt()
        .with_env_filter(filter)
        .with_target(false)
        .with_writer(std::io::stderr);
    let _ = match log.format {
        LogFormat::Json => builder.json().flatten_event(true).try_init(),
        LogFormat::Pretty => builder.try_init(),
    };
}

/// Gives every family of the service's own metrics its help text, and makes the HTTP rate
/// limit's exist at 0 from start-up, so a dashboard or an alert on a fresh server reads 0, not
/// "no data". The other families register their zeros where their labels are known: the actor
/// registries per kind, the dispatcher per delivery outcome, the scheduler per job kind, the
/// remote processors per outcome. docs/operations.md lists them all; `tests/api/metrics.rs` holds the two
/// together.
pub fn describe_metrics() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_gauge!(
        "payd_build_info",
        "1, labelled with the running release: which instances run which build"
    );
    metrics::gauge!("payd_build_info", "version" => env!("CARGO_PKG_VERSION")).set(1.0);
    describe_counter!("payd_http_requests_total", "HTTP requests answered");
    describe_counter!(
        "payd_lookups_total",
        "Reads of an API key or a shop's routing: answered by the instance's cache (hit) or the database (miss)"
    );
    for lookup in ["api_key", "shop_routing"] {
        for outcome in ["hit", "miss"] {
            metrics::counter!("payd_lookups_total", "lookup" => lookup, "outcome" => outcome)
                .increment(0);
        }
    }
    describe_histogram!(
        "payd_http_request_duration_seconds",
        Unit::Seconds,
        "Time to answer an HTTP request"
    );
    describe_counter!(
        "payd_http_rate_limited_total",
        "Requests refused by a rate limit"
    );
    describe_gauge!(
        "payd_scheduler_lag_seconds",
        Unit::Seconds,
        "How late the most overdue job of the last claim was"
    );
    describe_counter!("payd_scheduler_jobs_total", "Scheduled jobs run");
    describe_histogram!(
        "payd_commit_batch_size",
        "Changes written in one transaction by a group writer"
    );
    describe_histogram!(
        "payd_commit_batch_seconds",
        Unit::Seconds,
        "Time a group writer took to write and commit one batch"
    );
    // Registered now, so the families are exported before the first batch (the writers start
    // before the recorder is installed).
    let _ = metrics::histogram!("payd_commit_batch_size");
    let _ = metrics::histogram!("payd_commit_batch_seconds");
    describe_database_metrics();
    describe_webhook_metrics();
    describe_key_metrics();
    describe_processor_metrics();
    metrics::counter!("payd_http_rate_limited_total").increment(0);
}

/// The database's families: its pools, the statements sent, whether it answers.
fn describe_database_metrics() {
    use metrics::{describe_counter, describe_gauge, Unit};
    describe_gauge!(
        "payd_database_connections",
        "Connections of each database pool at the scrape: in use, idle, and the most it opens"
    );
    describe_gauge!(
        "payd_database_acquire_seconds",
        Unit::Seconds,
        "How long the scrape waited for a connection of each pool (at most 1 s): what a statement waits before it runs"
    );
    describe_counter!(
        "payd_database_statements_total",
        "Statements this instance sent to the database (with the group writers' BEGIN and COMMIT)"
    );
    describe_gauge!(
        "payd_database_up",
        "1 when the last readiness check reached the database, else 0"
    );
    describe_counter!(
        "payd_database_outages_total",
        "Database outages this instance saw begin (each logged once at its start and once at its end)"
    );
    metrics::counter!("payd_database_outages_total").increment(0);
}

/// The webhook dispatcher's families: its queue, attempts, endpoints and retention.
fn describe_webhook_metrics() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_gauge!(
        "payd_webhook_queue_depth",
        "Deliveries not yet delivered or given up: due, being sent, or waiting for a retry"
    );
    describe_gauge!(
        "payd_webhook_in_flight",
        "Deliveries this instance has claimed and is sending"
    );
    describe_gauge!(
        "payd_webhook_oldest_pending_seconds",
        Unit::Seconds,
        "How long the oldest delivery not yet delivered or given up has waited"
    );
    describe_counter!(
        "payd_webhook_deliveries_total",
        "Delivery attempts by what they left the delivery: delivered, retrying, failed"
    );
    describe_gauge!(
        "payd_webhook_endpoints_disabled",
        "Endpoints payd disabled because they failed without a success for webhooks.disable_after_secs"
    );
    describe_gauge!(
        "payd_webhook_endpoints_failing",
        "Enabled endpoints that have failed without a success for more than an hour"
    );
    describe_counter!(
        "payd_webhook_purged_rows_total",
        "Rows the retention purge removed: delivery attempts deleted (kind=attempt), event payloads replaced by a tombstone (kind=payload)"
    );
    describe_histogram!(
        "payd_webhook_attempt_seconds",
        Unit::Seconds,
        "Time of one delivery attempt"
    );
}

/// The credentials still accepted from before a rotation, each use counted, so an operator
/// sees when the old one may go (docs/operations.md).
fn describe_key_metrics() {
    use metrics::describe_counter;
    describe_counter!(
        "payd_admin_previous_key_uses_total",
        "Requests authenticated with an admin key from previous_admin_keys"
    );
    describe_counter!(
        "payd_api_key_previous_pepper_uses_total",
        "Requests whose API key was found under a pepper from security.previous_key_peppers"
    );
    metrics::counter!("payd_admin_previous_key_uses_total").increment(0);
    metrics::counter!("payd_api_key_previous_pepper_uses_total").increment(0);
}

/// The processors' families: requests, open circuits, Stripe orphans given back.
fn describe_processor_metrics() {
    use metrics::{describe_counter, describe_gauge};
    describe_counter!(
        "payd_processor_requests_total",
        "Requests to remote processors by outcome"
    );
    describe_gauge!(
        "payd_processor_circuits_open",
        "Remote processor accounts whose circuit breaker is open"
    );
    describe_counter!(
        "payd_processor_outcomes_total",
        "Authorization attempts by processor account (its id, or sandbox) and outcome: approved, declined, challenge, review, refused, unavailable, unknown"
    );
    describe_counter!(
        "payd_stripe_orphans_total",
        "PaymentIntents made for a payment that does not hold them, given back at Stripe"
    );
    for action in ["canceled", "refunded"] {
        metrics::counter!("payd_stripe_orphans_total", "action" => action).increment(0);
    }
}

/// Whether this instance is in a database outage: it found the database unreachable (or not
/// taking writes) and has not seen it answer since.
static DATABASE_OUTAGE: AtomicBool = AtomicBool::new(false);

/// The database could not be reached or written. The outage this begins is logged once (warn)
/// and counted in `payd_database_outages_total`; the requests it fails are not logged one by
/// one (each answers 503 `database_unavailable`).
pub fn database_outage(cause: &dyn std::fmt::Display) {
    if !DATABASE_OUTAGE.swap(true, Ordering::AcqRel) {
        metrics::counter!("payd_database_outages_total").increment(1);
        metrics::gauge!("payd_database_up").set(0.0);
        tracing::warn!(%cause, "database outage: requests answer 503 database_unavailable and readiness 503 until the database takes writes again");
    }
}

/// Whether this instance is in a database outage now.
pub fn database_unavailable_now() -> bool {
    DATABASE_OUTAGE.load(Ordering::Acquire)
}

/// The database took a write or answered the readiness check: an outage under way is over
/// (logged once, warn).
pub fn database_answered() {
    if DATABASE_OUTAGE.load(Ordering::Acquire) && DATABASE_OUTAGE.swap(false, Ordering::AcqRel) {
        metrics::gauge!("payd_database_up").set(1.0);
        tracing::warn!("database outage over: the database takes writes again");
    }
}

/// `text` with the password of every URL in it replaced (`postgres://payd:[redacted]@db/…`):
/// for errors and log lines that can carry a connection string.
pub fn redact_credentials(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("://") {
        let (head, tail) = rest.split_at(at + 3);
        out.push_str(head);
        // The authority ends at the first `/`, `?`, `#`, quote or space; its userinfo at its
        // last `@`.
        let end = tail
            .find(['/', '?', '#', '\'', '"', ' '])
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(userinfo_end) => {
                let userinfo = &authority[..userinfo_end];
                let user = userinfo.split(':').next().unwrap_or("");
                if userinfo.contains(':') {
                    out.push_str(user);
                    out.push_str(":[redacted]");
                } else {
                    out.push_str(userinfo);
                }
                out.push_str(&authority[userinfo_end..]);
            }
            None => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    // The key/value form: `password=…` up to the next space.
    match out.find("password=") {
        None => out,
        Some(_) => out
            .split(' ')
            .map(|word| match word.split_once("password=") {
                Some((lead, _)) => format!("{lead}password=[redacted]"),
                None => word.to_owned(),
            })
            .collect::<Vec<_>>()
            .join(" "),
    }
}

#[cfg(test)]
mod tests {
    use super::redact_credentials;

    #[test]
    fn passwords_in_connection_strings_are_redacted() {
        assert_eq!(
            redact_credentials("The connection string 'postgres://payd:s3cret@h1:5432,h2:5432/payd?target_session_attrs=read-write' cannot be parsed"),
            "The connection string 'postgres://payd:[redacted]@h1:5432,h2:5432/payd?target_session_attrs=read-write' cannot be parsed"
        );
        assert_eq!(
            redact_credentials("postgres://payd@db/payd"),
            "postgres://payd@db/payd"
        );
        assert_eq!(
            redact_credentials("host=a,b user=payd password=s3cret dbname=payd"),
            "host=a,b user=payd password=[redacted] dbname=payd"
        );
        assert_eq!(redact_credentials("no url here"), "no url here");
    }
}

//! Structured logs through `tracing`: pretty for people, JSON for machines. Nothing logged
//! carries a key, a secret or a card number: requests are logged by method, path and id only.

use tracing_subscriber::{fmt, EnvFilter};

use crate::settings::{LogFormat, LogSettings};

/// Installs the global subscriber; `RUST_LOG` overrides the configured filter.
pub fn init(log: &LogSettings) {
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(&log.filter))
        .unwrap_or_else(|_| EnvFilter::new("info"));
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
/// remote processors per outcome. docs/operations.md lists them all; `tests/metrics.rs` holds the two
/// together.
pub fn describe_metrics() {
    use metrics::{describe_counter, describe_gauge, describe_histogram, Unit};
    describe_counter!("payd_http_requests_total", "HTTP requests answered");
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
    describe_gauge!(
        "payd_database_up",
        "1 when the last readiness check reached the database, else 0"
    );
    describe_counter!(
        "payd_processor_requests_total",
        "Requests to remote processors by outcome"
    );
    describe_gauge!(
        "payd_processor_circuits_open",
        "Remote processor accounts whose circuit breaker is open"
    );
    metrics::counter!("payd_http_rate_limited_total").increment(0);
}

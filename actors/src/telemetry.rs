//! Metric names and recording helpers; every series is labelled by actor kind only.
//!
//! Entity ids are never used as labels: they are unbounded and would explode
//! the cardinality of every series.

use metrics::{Counter, Gauge, Histogram};

/// Gauge: actors currently activated, per kind.
pub const ACTORS_LIVE: &str = "payd_actors_live";
/// Counter: calls to `Registry::send`, per kind, whatever their outcome.
pub const MESSAGES_TOTAL: &str = "payd_actor_messages_total";
/// Histogram: seconds from `Registry::send` to the actor's reply, per kind.
pub const MESSAGE_SECONDS: &str = "payd_actor_message_seconds";
/// Counter: actors found dead and removed so that a fresh one is loaded, per kind.
pub const RESTARTS_TOTAL: &str = "payd_actor_restarts_total";
/// Gauge: messages in flight (accepted, not yet answered) across all actors of a kind.
pub const MAILBOX_DEPTH: &str = "payd_actor_mailbox_depth";
/// Counter: messages rejected because the actor's mailbox was full, per kind.
pub const OVERLOADED_TOTAL: &str = "payd_actor_overloaded_total";
/// Counter: failed calls to `KeyedActor::load`, per kind (an id with no entity is not one).
pub const LOAD_FAILURES_TOTAL: &str = "payd_actor_load_failures_total";
/// Counter: actors stopped because they were idle (or at shutdown), per kind.
pub const PASSIVATIONS_TOTAL: &str = "payd_actor_passivations_total";

/// Registers help texts for this crate's metrics with the installed recorder.
///
/// Optional: call once after installing the recorder so exporters can show
/// descriptions.
pub fn describe_metrics() {
    metrics::describe_gauge!(ACTORS_LIVE, "Actors currently activated");
    metrics::describe_counter!(MESSAGES_TOTAL, "Messages sent to actors");
    metrics::describe_histogram!(
        MESSAGE_SECONDS,
        metrics::Unit::Seconds,
        "Time from sending a message to the actor's reply"
    );
    metrics::describe_counter!(
        RESTARTS_TOTAL,
        "Actors found dead and replaced by a freshly loaded one"
    );
    metrics::describe_gauge!(
        MAILBOX_DEPTH,
        "Messages in flight across all actors of the kind"
    );
    metrics::describe_counter!(
        OVERLOADED_TOTAL,
        "Messages rejected because the actor's mailbox was full"
    );
    metrics::describe_counter!(
        LOAD_FAILURES_TOTAL,
        "Actor loads that failed (an id with no entity behind it is not counted)"
    );
    metrics::describe_counter!(
        PASSIVATIONS_TOTAL,
        "Actors stopped because they were idle, or at shutdown"
    );
}

/// Makes every series of one actor kind exist at 0, so that a fresh server's `/metrics`
/// shows each kind before its first message (a dashboard or an alert reads 0, not "no data").
/// `Registry::new` calls it.
pub fn register_kind(kind: &'static str) {
    // Adding 0 registers a series without touching a value another registry of the same kind
    // (a second instance in one test process) has already recorded.
    live(kind).increment(0.0);
    mailbox_depth(kind).increment(0.0);
    messages(kind).increment(0);
    restarts(kind).increment(0);
    overloaded(kind).increment(0);
    load_failures(kind).increment(0);
    passivations(kind).increment(0);
    // A histogram exists once registered; it shows a count of 0 until the first sample.
    let _ = message_seconds(kind);
}

// Handles are looked up on every use rather than cached in the registry, so
// a registry built before the recorder was installed still reports.

pub(crate) fn live(kind: &'static str) -> Gauge {
    metrics::gauge!(ACTORS_LIVE, "kind" => kind)
}

pub(crate) fn messages(kind: &'static str) -> Counter {
    metrics::counter!(MESSAGES_TOTAL, "kind" => kind)
}

pub(crate) fn message_seconds(kind: &'static str) -> Histogram {
    metrics::histogram!(MESSAGE_SECONDS, "kind" => kind)
}

pub(crate) fn restarts(kind: &'static str) -> Counter {
    metrics::counter!(RESTARTS_TOTAL, "kind" => kind)
}

pub(crate) fn mailbox_depth(kind: &'static str) -> Gauge {
    metrics::gauge!(MAILBOX_DEPTH, "kind" => kind)
}

pub(crate) fn overloaded(kind: &'static str) -> Counter {
    metrics::counter!(OVERLOADED_TOTAL, "kind" => kind)
}

pub(crate) fn load_failures(kind: &'static str) -> Counter {
    metrics::counter!(LOAD_FAILURES_TOTAL, "kind" => kind)
}

pub(crate) fn passivations(kind: &'static str) -> Counter {
    metrics::counter!(PASSIVATIONS_TOTAL, "kind" => kind)
}

//! A fresh server's `/metrics` names every actor and webhook series at 0, before anything
//! happened: dashboards and alerts read 0, not "no data"; and the metrics table of
//! docs/operations.md is what `/metrics` exports, with help text for each family. Nothing
//! here sends a message to an actor or queues a delivery, so no test's traffic can move the
//! series the first one reads (the recorder is global to the process).

mod common;

use actix_web::http::Method;
use common::spawn_app;

#[actix_web::test]
async fn every_actor_and_webhook_series_exists_at_zero_from_start_up() {
    let app = spawn_app().await;
    let metrics = app.send(Method::GET, "/metrics", None, None, &[]).await;
    assert_eq!(metrics.status, 200);
    let text = String::from_utf8_lossy(&metrics.raw);
    let value = |series: &str| {
        text.lines()
            .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
            .map(|l| l[series.len()..].trim().to_owned())
    };
    for kind in ["payment", "dispute", "webhook"] {
        for name in [
            "payd_actors_live",
            "payd_actor_mailbox_depth",
            "payd_actor_messages_total",
            "payd_actor_restarts_total",
            "payd_actor_overloaded_total",
            "payd_actor_load_failures_total",
            "payd_actor_passivations_total",
        ] {
            let series = format!("{name}{{kind=\"{kind}\"}}");
            assert_eq!(value(&series).as_deref(), Some("0"), "{series} in:\n{text}");
        }
        let count = format!("payd_actor_message_seconds_count{{kind=\"{kind}\"}}");
        assert_eq!(value(&count).as_deref(), Some("0"), "{count} in:\n{text}");
    }
    // `writes` on both databases (SQLite adds `reads`, PostgreSQL `webhooks`).
    for pool in ["writes"] {
        for state in ["in_use", "idle", "max"] {
            let series = format!("payd_database_connections{{pool=\"{pool}\",state=\"{state}\"}}");
            assert!(value(&series).is_some(), "{series} in:\n{text}");
        }
        let acquire = format!("payd_database_acquire_seconds{{pool=\"{pool}\"}}");
        let took: f64 = value(&acquire).and_then(|v| v.parse().ok()).unwrap_or(-1.0);
        assert!((0.0..1.0).contains(&took), "{acquire} in:\n{text}");
    }
    for series in [
        "payd_webhook_queue_depth",
        "payd_webhook_oldest_pending_seconds",
        "payd_webhook_deliveries_total{outcome=\"delivered\"}",
        "payd_webhook_deliveries_total{outcome=\"retrying\"}",
        "payd_webhook_deliveries_total{outcome=\"failed\"}",
        "payd_webhook_attempt_seconds_count",
        "payd_webhook_endpoints_disabled",
        "payd_webhook_endpoints_failing",
        "payd_webhook_purged_rows_total{kind=\"attempt\"}",
        "payd_webhook_purged_rows_total{kind=\"payload\"}",
    ] {
        assert_eq!(value(series).as_deref(), Some("0"), "{series} in:\n{text}");
    }
    app.stop().await;
}

/// The families of the metrics table in docs/operations.md: (name, type).
fn documented() -> Vec<(String, String)> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/operations.md"))
        .expect("docs/operations.md");
    let table = doc
        .split("## Metrics")
        .nth(1)
        .expect("a Metrics section")
        .split("\n## ")
        .next()
        .unwrap_or_default();
    table
        .lines()
        .filter_map(|line| {
            let mut cells = line.split('|').map(str::trim).skip(1);
            let name = cells.next()?.strip_prefix('`')?.strip_suffix('`')?;
            let kind = cells.next()?;
            name.starts_with("payd_")
                .then(|| (name.to_owned(), kind.to_owned()))
        })
        .collect()
}

#[actix_web::test]
async fn the_documented_metrics_are_the_exported_ones_each_with_help() {
    let app = spawn_app().await;
    // One request first, so that the HTTP families have a series.
    app.send(Method::GET, "/health/ready", None, None, &[])
        .await;
    let scrape = app.send(Method::GET, "/metrics", None, None, &[]).await;
    let text = String::from_utf8_lossy(&scrape.raw).into_owned();
    let exported: Vec<(String, String)> = text
        .lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .filter_map(|l| l.split_once(' '))
        .filter(|(name, _)| name.starts_with("payd_"))
        .map(|(name, kind)| (name.to_owned(), kind.to_owned()))
        .collect();
    let documented = documented();
    assert!(documented.len() > 10, "the table was read: {documented:?}");
    let build = format!(
        "payd_build_info{{version=\"{}\"}} 1",
        env!("CARGO_PKG_VERSION")
    );
    assert!(text.lines().any(|l| l == build), "{build} in:\n{text}");
    for process in [
        "process_resident_memory_bytes ",
        "process_open_fds ",
        "process_cpu_seconds_total ",
    ] {
        assert!(
            text.lines().any(|l| l.starts_with(process)),
            "the process family {process}in:\n{text}"
        );
    }
    for (name, kind) in &documented {
        assert!(
            exported.contains(&(name.clone(), kind.clone())),
            "documented {name} ({kind}) is not exported as such:\n{text}"
        );
        assert!(
            text.lines()
                .any(|l| l.starts_with(&format!("# HELP {name} "))),
            "{name} has no help text"
        );
    }
    for (name, kind) in &exported {
        assert!(
            documented.contains(&(name.clone(), kind.clone())),
            "exported {name} ({kind}) is missing from docs/operations.md"
        );
    }
    app.stop().await;
}

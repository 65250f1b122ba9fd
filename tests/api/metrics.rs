//! payd's `/metrics`, read off a `payd` of its own in a child process: the recorder is global
//! to a process, and a server inside the test binary would count every other test's traffic.
//! A fresh server names every actor and webhook series at 0, before anything happened
//! (dashboards and alerts read 0, not "no data"); the metrics table of docs/operations.md is
//! what `/metrics` exports, with help text for each family; and the series that must move when
//! something happens do: an idle actor's passivation, a webhook delivery waiting for its retry
//! (the retry backlog).

use std::time::{Duration, Instant};

use serde_json::json;

use crate::common::{
    child::{self, Server},
    receiver::{Receiver, Reply},
    TestDb,
};

/// A `payd serve` of its own, on a database of its own.
struct Alone {
    server: Server,
    _db: TestDb,
    _dir: tempfile::TempDir,
}

impl Alone {
    async fn start(settings: &[(&str, &str)]) -> Alone {
        let db = TestDb::new().await;
        let dir = tempfile::tempdir().unwrap();
        let mut cmd = child::payd(&db.url, dir.path());
        cmd.env("PAYD_SANDBOX__DEMO_MERCHANT", "false")
            .env("PAYD_LIMITS__REQUESTS_PER_SECOND", "0");
        for (name, value) in settings {
            cmd.env(name, value);
        }
        Alone {
            server: Server::start(cmd),
            _db: db,
            _dir: dir,
        }
    }

    fn port(&self) -> u16 {
        self.server.port
    }

    /// The whole scrape.
    async fn scrape(&self) -> String {
        let mut res = crate::common::client()
            .get(format!("http://127.0.0.1:{}/metrics", self.port()))
            .send()
            .await
            .expect("/metrics answers");
        assert_eq!(res.status().as_u16(), 200);
        let body = res.body().limit(8 << 20).await.expect("the scrape");
        String::from_utf8_lossy(&body).into_owned()
    }

    /// The value of one series (name with its labels).
    async fn sample(&self, series: &str) -> Option<f64> {
        value(&self.scrape().await, series).and_then(|v| v.parse().ok())
    }

    /// Polls `series` until `holds` (every 100 ms, at most 10 s); returns the last value.
    async fn until(&self, series: &str, holds: impl Fn(f64) -> bool) -> f64 {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let value = self.sample(series).await.unwrap_or(f64::NAN);
            if holds(value) || Instant::now() > deadline {
                return value;
            }
            actix_web::rt::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// The text of one series' value in a scrape.
fn value(text: &str, series: &str) -> Option<String> {
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .map(|l| l[series.len()..].trim().to_owned())
}

#[actix_web::test]
async fn every_actor_and_webhook_series_exists_at_zero_from_start_up() {
    let payd = Alone::start(&[]).await;
    let text = payd.scrape().await;
    let value = |series: &str| value(&text, series);
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
    let payd = Alone::start(&[]).await;
    // One request first, so that the HTTP families have a series.
    assert_eq!(child::get(payd.port(), "/health/ready", None).await.0, 200);
    let text = payd.scrape().await;
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
}

#[actix_web::test]
async fn passivation_and_the_retry_backlog_show_in_metrics() {
    // An idle actor goes after a second; a failed delivery's retry waits a minute.
    let payd = Alone::start(&[
        ("PAYD_ACTORS__IDLE_TIMEOUT_SECS", "1"),
        ("PAYD_WEBHOOKS__TRANSIENT_RETRY_SCHEDULE", "60,60"),
        ("PAYD_WEBHOOKS__POLL_INTERVAL_MS", "100"),
    ])
    .await;
    let port = payd.port();
    let receiver = Receiver::start().await;
    receiver.set_default(Reply::status(500));
    let (key, shop) = child::merchant_with_endpoint(port, &receiver.url).await;

    // A payment's actor, idle past its timeout, is passivated and counted.
    let passivated = "payd_actor_passivations_total{kind=\"payment\"}";
    let before = payd.sample(passivated).await.expect(passivated);
    let payment_id = child::pay(port, &key, &shop).await;
    let after = payd.until(passivated, |v| v > before).await;
    assert!(after > before, "{passivated}: {before} then {after}");

    // A refund of a payment that does not exist is the client's 404, not a failed load.
    let failures = "payd_actor_load_failures_total{kind=\"payment\"}";
    let missing = format!("pay_{}", "0".repeat(32));
    let (status, body) = child::post_json(
        port,
        "/refunds",
        &key,
        Some(&shop),
        json!({"payment_id": missing}),
    )
    .await;
    assert_eq!(status, 404, "{body}");
    assert_eq!(payd.sample(failures).await, Some(0.0), "{failures}");

    // Its event's delivery met a 500 and waits for its retry: it is in the backlog, and its
    // age grows while it waits.
    receiver.wait_for(1).await;
    let depth = payd.until("payd_webhook_queue_depth", |v| v == 1.0).await;
    assert_eq!(depth, 1.0, "the delivery waiting for its retry is queued");
    let age = payd
        .until("payd_webhook_oldest_pending_seconds", |v| v >= 3.0)
        .await;
    assert!(age >= 3.0, "the oldest pending delivery's age: {age}");

    // Delivered by a manual retry: counted as delivered, and the backlog is empty again.
    let delivered = "payd_webhook_deliveries_total{outcome=\"delivered\"}";
    let before = payd.sample(delivered).await.expect(delivered);
    receiver.set_default(Reply::status(200));
    let merchant = child::merchant_id_of(port, &key).await;
    let (status, events) = child::post_json(
        port,
        &format!("/events/{merchant}"),
        &key,
        None,
        json!({"object_id": payment_id}),
    )
    .await;
    assert_eq!(status, 200, "{events}");
    let event_id = events["data"][0]["event_id"].as_str().expect("an event");
    let (status, body) = child::post_json(
        port,
        &format!("/events/{merchant}/{event_id}/retry"),
        &key,
        None,
        json!({}),
    )
    .await;
    assert!(status < 300, "{body}");
    receiver.wait_for(2).await;
    let after = payd.until(delivered, |v| v > before).await;
    assert_eq!(after, before + 1.0, "{delivered}");
    assert_eq!(
        payd.until("payd_webhook_queue_depth", |v| v == 0.0).await,
        0.0
    );
    assert_eq!(
        payd.until("payd_webhook_oldest_pending_seconds", |v| v == 0.0)
            .await,
        0.0
    );
}

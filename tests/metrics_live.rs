//! Metrics that must move when something happens: an idle actor's passivation, and a webhook
//! delivery waiting for its next retry (the retry backlog). A binary of its own: the recorder
//! is global to the process, and another test's server would move these series too.

mod common;

use std::time::{Duration, Instant};

use actix_web::http::Method;
use common::{receiver::Receiver, receiver::Reply, spawn_with, TestApp, TestDb};
use serde_json::json;

/// The value of one series (name with its labels) in a scrape.
async fn sample(app: &TestApp, series: &str) -> Option<f64> {
    let scrape = app.send(Method::GET, "/metrics", None, None, &[]).await;
    let text = String::from_utf8_lossy(&scrape.raw).into_owned();
    text.lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l[series.len()..].trim().parse().ok())
}

/// Polls `series` until `holds` (every 100 ms, at most 10 s); returns the last value.
async fn until(app: &TestApp, series: &str, holds: impl Fn(f64) -> bool) -> f64 {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let value = sample(app, series).await.unwrap_or(f64::NAN);
        if holds(value) || Instant::now() > deadline {
            return value;
        }
        actix_web::rt::time::sleep(Duration::from_millis(100)).await;
    }
}

#[actix_web::test]
async fn passivation_and_the_retry_backlog_show_in_metrics() {
    let db = std::sync::Arc::new(TestDb::new().await);
    let app = spawn_with(db, &[("PAYD_ACTORS__IDLE_TIMEOUT_SECS", "1")]).await;
    let m = app.create_merchant("Acme").await;
    let receiver = Receiver::start().await;
    receiver.set_default(Reply::status(500));
    app.set_webhook(&m, &receiver.url).await;

    // A payment's actor, idle past its timeout, is passivated and counted.
    let passivated = "payd_actor_passivations_total{kind=\"payment\"}";
    let before = sample(&app, passivated).await.expect(passivated);
    let p = app
        .create_payment(
            &m,
            json!({"amount": 500, "currency": "USD", "confirm": true,
                "payment_method_data": common::card("4242424242424242")}),
        )
        .await;
    assert_eq!(p.status, 201, "{}", p.body);
    let after = until(&app, passivated, |v| v > before).await;
    assert!(after > before, "{passivated}: {before} then {after}");

    // A refund of a payment that does not exist is the client's 404, not a failed load.
    let failures = "payd_actor_load_failures_total{kind=\"payment\"}";
    let missing = format!("pay_{}", "0".repeat(32));
    let r = app
        .call(
            &m,
            Method::POST,
            "/refunds",
            Some(json!({"payment_id": missing})),
        )
        .await;
    assert_eq!(r.status, 404, "{}", r.body);
    assert_eq!(sample(&app, failures).await, Some(0.0), "{failures}");

    // Its event's delivery met a 500 and waits for its retry (5 s later on the test's clock):
    // it is in the backlog, and its age grows while it waits.
    receiver.wait_for(1).await;
    app.clock.advance(chrono::Duration::seconds(3));
    let depth = until(&app, "payd_webhook_queue_depth", |v| v == 1.0).await;
    assert_eq!(depth, 1.0, "the delivery waiting for its retry is queued");
    let age = until(&app, "payd_webhook_oldest_pending_seconds", |v| v >= 3.0).await;
    assert!(age >= 3.0, "the oldest pending delivery's age: {age}");

    // Delivered by a manual retry: counted as delivered, and the backlog is empty again.
    let delivered = "payd_webhook_deliveries_total{outcome=\"delivered\"}";
    let before = sample(&app, delivered).await.expect(delivered);
    receiver.set_default(Reply::status(200));
    let events = app
        .post(
            &format!("/events/{}", m.merchant_id),
            &m.secret_key,
            json!({"object_id": p.body["payment_id"]}),
        )
        .await;
    let event_id = events.body["data"][0]["event_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = app
        .post(
            &format!("/events/{}/{event_id}/retry", m.merchant_id),
            &m.secret_key,
            json!({}),
        )
        .await;
    assert!(r.status < 300, "{}", r.body);
    receiver.wait_for(2).await;
    let after = until(&app, delivered, |v| v > before).await;
    assert_eq!(after, before + 1.0, "{delivered}");
    let depth = until(&app, "payd_webhook_queue_depth", |v| v == 0.0).await;
    assert_eq!(depth, 0.0);
    assert_eq!(
        until(&app, "payd_webhook_oldest_pending_seconds", |v| v == 0.0).await,
        0.0
    );
}

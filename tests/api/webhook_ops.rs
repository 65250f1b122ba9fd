//! Webhook operations for the long run: an endpoint's health and its disabling after
//! `webhooks.disable_after_secs` without a success, the retention purge of attempts and
//! payloads, and a per-endpoint rate limit. Windows are seconds, moved by the test clock.

use crate::common;

use std::{
    sync::Arc,
    time::{Duration as StdDuration, Instant},
};

use actix_web::http::Method;
use chrono::Duration;
use common::{
    card,
    receiver::{Receiver, Reply},
    spawn_with, Merchant, TestApp, TestDb,
};
use payd::clock::Clock;
use serde_json::{json, Value};

async fn app_with(extra: &[(&str, &str)]) -> TestApp {
    spawn_with(Arc::new(TestDb::new().await), extra).await
}

async fn endpoint(app: &TestApp, m: &Merchant) -> Value {
    let path = format!("/account/shops/{}/webhook", m.profile_id);
    let r = app.call(m, Method::GET, &path, None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body
}

async fn put_endpoint(app: &TestApp, m: &Merchant, body: Value) -> common::Answer {
    let path = format!("/account/shops/{}/webhook", m.profile_id);
    app.call(m, Method::PUT, &path, Some(body)).await
}

async fn events(app: &TestApp, m: &Merchant, filter: Value) -> Vec<Value> {
    let path = format!("/events/{}", m.merchant_id);
    let r = app.call(m, Method::POST, &path, Some(filter)).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["data"].as_array().unwrap().clone()
}

async fn retry(app: &TestApp, m: &Merchant, event_id: &str) -> common::Answer {
    let path = format!("/events/{}/{event_id}/retry", m.merchant_id);
    app.call(m, Method::POST, &path, None).await
}

/// Polls (bounded: ten seconds) until `done` holds of what `read` reads.
async fn until<T, F, Fut>(what: &str, mut read: F, done: impl Fn(&T) -> bool) -> T
where
    T: std::fmt::Debug,
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = T>,
{
    let deadline = Instant::now() + StdDuration::from_secs(10);
    loop {
        let got = read().await;
        if done(&got) {
            return got;
        }
        assert!(Instant::now() < deadline, "never {what}: {got:?}");
        actix_web::rt::time::sleep(StdDuration::from_millis(25)).await;
    }
}

async fn attempts_of(app: &TestApp, m: &Merchant, event_id: &str) -> Vec<Value> {
    let path = format!("/events/{}/{event_id}/attempts", m.merchant_id);
    let r = app.call(m, Method::GET, &path, None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["data"].as_array().unwrap().clone()
}

/// An endpoint answering 500 is `failing` from its first failure and disabled once it has
/// failed without a success for `disable_after_secs`: it gets nothing more, the merchant's
/// events list `webhook_endpoint_disabled` (never sent), and enabled again it receives what
/// waited.
#[actix_web::test]
async fn a_failing_endpoint_is_disabled_and_gets_what_waited_once_enabled() {
    let app = app_with(&[
        ("PAYD_WEBHOOKS__DISABLE_AFTER_SECS", "60"),
        (
            "PAYD_WEBHOOKS__TRANSIENT_RETRY_SCHEDULE",
            "10,10,10,10,10,10,10,10,10,10",
        ),
    ])
    .await;
    let receiver = Receiver::start().await;
    receiver.set_default(Reply::status(500));
    let m = app.create_merchant("Acme").await;
    app.set_webhook(&m, &receiver.url).await;
    assert_eq!(endpoint(&app, &m).await["health"]["status"], "healthy");

    let first = app.succeeded_payment(&m).await;
    receiver.wait_for(1).await;
    let failing = until(
        "failing",
        || endpoint(&app, &m),
        |e| e["health"]["consecutive_failures"] == 1,
    )
    .await;
    assert_eq!(failing["health"]["status"], "failing", "{failing}");
    assert_eq!(failing["enabled"], true);
    let since = failing["health"]["failing_since"].clone();
    assert!(since.is_string(), "{failing}");

    // Each retry fails; the one past the window disables it. The clock moves only once an
    // attempt is recorded (its retry is scheduled from the time its answer was written).
    let event_id = events(&app, &m, json!({"object_id": first})).await[0]["event_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let start = app.clock.now();
    for k in 1..=6 {
        until(
            "the attempt recorded",
            || attempts_of(&app, &m, &event_id),
            |a| a.len() == k,
        )
        .await;
        assert_eq!(
            endpoint(&app, &m).await["enabled"],
            true,
            "disabled too early"
        );
        app.clock.set(start + Duration::seconds(10 * k as i64 + 1));
    }
    let disabled = until("disabled", || endpoint(&app, &m), |e| e["enabled"] == false).await;
    assert_eq!(
        (
            disabled["health"]["status"].as_str(),
            disabled["health"]["disabled_reason"].as_str()
        ),
        (Some("disabled"), Some("failing")),
        "{disabled}"
    );
    assert_eq!(disabled["health"]["failing_since"], since);
    let sent = receiver.received().len();
    let listed = events(&app, &m, json!({"event_type": "webhook_endpoint_disabled"})).await;
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(listed[0]["delivery_status"], "none");
    assert_eq!(listed[0]["test_mode"], true);
    let object = &listed[0]["envelope"]["content"]["object"];
    assert_eq!(object["health"]["disabled_reason"], "failing");
    assert_eq!(object["endpoint_id"], disabled["endpoint_id"]);
    let retry = retry(&app, &m, listed[0]["event_id"].as_str().unwrap()).await;
    assert_eq!((retry.status, retry.code()), (409, "event_not_sent"));

    // Disabled: new events and due retries wait.
    let second = app.succeeded_payment(&m).await;
    app.clock.set(start + Duration::seconds(200));
    app.settle_deliveries().await;
    assert_eq!(
        receiver.received().len(),
        sent,
        "a disabled endpoint got a request"
    );
    let metrics = app.send(Method::GET, "/metrics", None, None, &[]).await;
    let text = String::from_utf8_lossy(&metrics.raw);
    assert!(text.contains("payd_webhook_endpoints_disabled"), "{text}");
    assert!(text.contains("payd_webhook_endpoints_failing"), "{text}");

    // Enabled again, answering: what waited arrives, and its health starts afresh.
    receiver.set_default(Reply::status(200));
    let r = put_endpoint(&app, &m, json!({"url": receiver.url, "enabled": true})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        (
            r.body["health"]["status"].as_str(),
            r.body["health"]["consecutive_failures"].as_i64()
        ),
        (Some("healthy"), Some(0))
    );
    let got = receiver.wait_for(sent + 2).await;
    let bodies: Vec<Value> = got[sent..]
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect();
    for id in [&first, &second] {
        assert!(
            bodies
                .iter()
                .any(|b| b["content"]["object"]["payment_id"] == id.as_str()),
            "{id} not delivered after enabling: {bodies:?}"
        );
    }
    let healthy = until(
        "a success recorded",
        || endpoint(&app, &m),
        |e| e["health"]["last_success_at"].is_string(),
    )
    .await;
    assert_eq!(healthy["health"]["status"], "healthy", "{healthy}");
}

/// The sweep disables an endpoint whose only delivery waits hours for its next retry: no
/// attempt comes to check it, and it is disabled on time anyway.
#[actix_web::test]
async fn the_sweep_disables_an_endpoint_whose_retries_wait() {
    let app = app_with(&[
        ("PAYD_WEBHOOKS__DISABLE_AFTER_SECS", "60"),
        ("PAYD_WEBHOOKS__PURGE_INTERVAL_SECS", "5"),
        ("PAYD_WEBHOOKS__TRANSIENT_RETRY_SCHEDULE", "86400"),
    ])
    .await;
    let receiver = Receiver::start().await;
    receiver.set_default(Reply::status(503));
    let m = app.create_merchant("Acme").await;
    app.set_webhook(&m, &receiver.url).await;
    app.succeeded_payment(&m).await;
    receiver.wait_for(1).await;
    until(
        "failing",
        || endpoint(&app, &m),
        |e| e["health"]["status"] == "failing",
    )
    .await;
    app.clock.set(app.clock.now() + Duration::seconds(30));
    app.run_due_jobs().await;
    assert_eq!(
        endpoint(&app, &m).await["enabled"],
        true,
        "disabled too early"
    );
    app.clock.set(app.clock.now() + Duration::seconds(40));
    let e = until(
        "disabled by the sweep",
        || endpoint(&app, &m),
        |e| e["enabled"] == false,
    )
    .await;
    assert_eq!(e["health"]["disabled_reason"], "failing");
    assert_eq!(receiver.received().len(), 1);
    // Paused by its merchant, an endpoint says so.
    let r = put_endpoint(&app, &m, json!({"url": receiver.url, "enabled": true})).await;
    assert_eq!(r.status, 200);
    let r = put_endpoint(&app, &m, json!({"url": receiver.url, "enabled": false})).await;
    assert_eq!(
        (
            r.body["health"]["status"].as_str(),
            r.body["health"]["disabled_reason"].as_str()
        ),
        (Some("disabled"), Some("merchant"))
    );
}

/// Attempts older than their window are deleted and payloads older than theirs replaced by a
/// tombstone: the event stays listed (`purged`, `envelope: null`) and cannot be sent again
/// (410). A payload whose delivery still waits is kept.
#[actix_web::test]
async fn attempts_and_payloads_are_purged_and_the_events_stay_listed() {
    let app = app_with(&[
        ("PAYD_WEBHOOKS__PURGE_INTERVAL_SECS", "5"),
        ("PAYD_WEBHOOKS__ATTEMPT_RETENTION_SECS", "100"),
        ("PAYD_WEBHOOKS__PAYLOAD_RETENTION_SECS", "200"),
    ])
    .await;
    let receiver = Receiver::start().await;
    let m = app.create_merchant("Acme").await;
    app.set_webhook(&m, &receiver.url).await;
    let delivered = app.succeeded_payment(&m).await;
    receiver.wait_for(1).await;
    let event = until(
        "delivered",
        || events(&app, &m, json!({"object_id": delivered})),
        |e| e.iter().all(|e| e["delivery_status"] == "delivered"),
    )
    .await;
    let event_id = event[0]["event_id"].as_str().unwrap().to_owned();
    assert_eq!(attempts_of(&app, &m, &event_id).await.len(), 1);
    // Another shop's endpoint is paused: its event's delivery waits, and its payload with it.
    let other = app.create_merchant("Other").await;
    put_endpoint(&app, &other, json!({"url": receiver.url, "enabled": false})).await;
    let waiting = app.succeeded_payment(&other).await;

    let start = app.clock.now();
    app.clock.set(start + Duration::seconds(150));
    until(
        "attempts purged",
        || attempts_of(&app, &m, &event_id),
        |a| a.is_empty(),
    )
    .await;
    let kept = events(&app, &m, json!({"object_id": delivered})).await;
    assert_eq!(kept[0]["purged"], false);
    assert!(kept[0]["envelope"]["content"].is_object());

    app.clock.set(start + Duration::seconds(250));
    let purged = until(
        "payload purged",
        || events(&app, &m, json!({"object_id": delivered})),
        |e| e[0]["purged"] == true,
    )
    .await;
    assert_eq!(purged[0]["envelope"], Value::Null);
    assert_eq!(purged[0]["event_id"], event_id.as_str());
    assert_eq!(purged[0]["delivery_status"], "delivered");
    let retry = retry(&app, &m, &event_id).await;
    assert_eq!(
        (retry.status, retry.code()),
        (410, "event_payload_purged"),
        "{}",
        retry.body
    );
    let held = events(&app, &other, json!({"object_id": waiting})).await;
    assert_eq!(
        (
            held[0]["purged"].as_bool(),
            held[0]["delivery_status"].as_str()
        ),
        (Some(false), Some("paused"))
    );
    let scrape = app.send(Method::GET, "/metrics", None, None, &[]).await;
    let metrics = String::from_utf8_lossy(&scrape.raw);
    for kind in ["attempt", "payload"] {
        assert!(
            metrics.contains(&format!(
                "payd_webhook_purged_rows_total{{kind=\"{kind}\"}}"
            )),
            "{metrics}"
        );
    }
}

/// With `max_per_second: 5`, thirty events arrive no faster than five a second; without a
/// limit the same burst arrives at once.
#[actix_web::test]
async fn an_endpoint_rate_limit_spaces_its_requests() {
    let app = app_with(&[]).await;
    let receiver = Receiver::start().await;
    let m = app.create_merchant("Acme").await;
    let bad = put_endpoint(&app, &m, json!({"url": receiver.url, "max_per_second": 0})).await;
    assert_eq!(
        (bad.status, bad.body["error"]["param"].as_str()),
        (400, Some("max_per_second"))
    );
    let r = put_endpoint(&app, &m, json!({"url": receiver.url, "max_per_second": 5})).await;
    assert_eq!(
        (r.status, r.body["max_per_second"].as_i64()),
        (200, Some(5))
    );
    // A change without the field keeps it.
    let r = put_endpoint(&app, &m, json!({"url": receiver.url})).await;
    assert_eq!(r.body["max_per_second"], 5);

    let mut payments = 0;
    while events(&app, &m, json!({"limit": 100})).await.len() < 30 {
        app.succeeded_payment(&m).await;
        payments += 1;
        assert!(payments <= 30, "no events");
    }
    let got = receiver.wait_for(30).await;
    // Sends are 200 ms apart; arrival times carry the loopback's jitter (a loaded machine
    // delays one request by up to ~150 ms: seen with the whole suite on two instances). Over
    // eleven requests (2 000 ms at 5 a second) that jitter stays under the margin, while 6 a
    // second (1 667 ms for eleven) does not.
    let at: Vec<Instant> = got.iter().map(|r| r.at).collect();
    for w in at.windows(11) {
        let span = w[10] - w[0];
        assert!(
            span >= StdDuration::from_millis(1_750),
            "eleven requests within {span:?}: more than 5 a second"
        );
    }
    let all = at[29] - at[0];
    assert!(
        all >= StdDuration::from_millis(5_700),
        "thirty requests within {all:?}: more than 5 a second"
    );

    // `null` lifts the limit.
    let r = put_endpoint(
        &app,
        &m,
        json!({"url": receiver.url, "max_per_second": null}),
    )
    .await;
    assert_eq!(r.body["max_per_second"], Value::Null);
}

/// Deleting a customer erases its personal data from the stored payloads of the events that
/// name it; ids, and events that do not name it, are left as they were.
#[actix_web::test]
async fn deleting_a_customer_redacts_it_in_stored_event_payloads() {
    let app = app_with(&[]).await;
    let m = app.create_merchant("Acme").await;
    let c = app
        .call(
            &m,
            Method::POST,
            "/customers",
            Some(json!({"name": "Ana Lima", "email": "ana@example.com",
                "address": {"line1": "Rua Augusta 12", "city": "Lisboa", "country": "PT"}})),
        )
        .await;
    assert_eq!(c.status, 201, "{}", c.body);
    let cid = c.body["customer_id"].as_str().unwrap().to_owned();
    let metadata = json!({"receipt_to": "ana@example.com", "note": "deliver to Rua Augusta 12"});
    let with_customer = json!({"amount": 500, "currency": "USD", "confirm": true,
        "customer_id": cid, "metadata": metadata,
        "payment_method_data": card("4242424242424242")});
    let r = app.create_payment(&m, with_customer).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let named = r.body["payment_id"].as_str().unwrap().to_owned();
    let without = json!({"amount": 700, "currency": "USD", "confirm": true, "metadata": metadata,
        "payment_method_data": card("4242424242424242")});
    let r = app.create_payment(&m, without).await;
    let unnamed = r.body["payment_id"].as_str().unwrap().to_owned();

    let d = app
        .call(&m, Method::DELETE, &format!("/customers/{cid}"), None)
        .await;
    assert_eq!(d.status, 200, "{}", d.body);

    let redacted = events(&app, &m, json!({"object_id": named})).await;
    assert!(!redacted.is_empty());
    for e in &redacted {
        let o = &e["envelope"]["content"]["object"];
        assert_eq!(o["payment_id"], named.as_str(), "{o}");
        assert_eq!(o["customer_id"], cid.as_str(), "{o}");
        assert_eq!(o["metadata"]["receipt_to"], Value::Null, "{o}");
        assert_eq!(o["metadata"]["note"], "deliver to [redacted]", "{o}");
        assert_eq!(e["envelope"]["event_id"], e["event_id"]);
    }
    let kept = events(&app, &m, json!({"object_id": unnamed})).await;
    assert_eq!(
        kept[0]["envelope"]["content"]["object"]["metadata"],
        metadata
    );
}

/// An event recorded before its shop had an endpoint, retried and replayed several times at
/// once (on every instance the test runs): one delivery to the endpoint, sent once.
#[actix_web::test]
async fn racing_retries_of_an_event_from_before_the_endpoint_send_it_once() {
    let app = app_with(&[]).await;
    let m = app.create_merchant("Acme").await;
    let since = app.clock.now() - Duration::seconds(1);
    let pid = app.succeeded_payment(&m).await;
    let receiver = Receiver::start().await;
    // The first send stays in flight until every racing call has answered: a retry asked
    // after a send has finished is a new retry, and sends again (on a loaded machine the
    // calls could otherwise straddle the first send).
    receiver.set_default(Reply::slow(StdDuration::from_secs(3)));
    app.set_webhook(&m, &receiver.url).await;
    let event = events(
        &app,
        &m,
        json!({"object_id": pid, "event_type": "payment_succeeded"}),
    )
    .await;
    let event_id = event[0]["event_id"].as_str().unwrap().to_owned();
    let replay = format!("/events/{}/replay", m.merchant_id);
    let calls = (0..6).map(|i| {
        let (app, m, event_id, replay) = (&app, &m, &event_id, &replay);
        async move {
            match i % 2 {
                0 => retry(app, m, event_id).await,
                _ => {
                    let body = json!({"since": since, "event_types": ["payment_succeeded"]});
                    app.call(m, Method::POST, replay, Some(body)).await
                }
            }
        }
    });
    for r in futures_util::future::join_all(calls).await {
        assert_eq!(r.status, 202, "{}", r.body);
    }
    until(
        "the event delivered",
        || async { receiver.received().len() },
        |n| *n >= 1,
    )
    .await;
    // A second send, if any were made, has been made now.
    app.settle_deliveries().await;
    let got: Vec<String> = receiver
        .received()
        .iter()
        .map(|r| r.header("webhook-id").to_owned())
        .collect();
    assert_eq!(got, std::slice::from_ref(&event_id), "sent once");
    let attempts = until(
        "the attempt recorded",
        || attempts_of(&app, &m, &event_id),
        |a| !a.is_empty(),
    )
    .await;
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    assert_eq!(receiver.received().len(), 1, "sent once");
}

//! The outbound guard, tried as an attacker with a merchant's key would, with private URLs
//! refused (the production setting). Every numeric spelling of loopback is refused when the
//! URL is saved. A host name that gets past the save but resolves to loopback is never
//! connected to: the receiver counts nothing, and the attempt is recorded as
//! `blocked_address` and not retried. An operator's allow-listed network is delivered to.

use crate::common;

use std::{sync::Arc, time::Duration as StdDuration};

use actix_web::http::Method;
use common::{card, receiver::Receiver, sim::start_sim, spawn_with, Merchant, TestApp, TestDb};
use serde_json::{json, Value};

const PRODUCTION_LIKE: (&str, &str) = ("PAYD_WEBHOOKS__ALLOW_PRIVATE_URLS", "false");

async fn put_endpoint(app: &TestApp, m: &Merchant, url: &str) -> common::Answer {
    app.call(
        m,
        Method::PUT,
        &format!("/account/shops/{}/webhook", m.profile_id),
        Some(json!({"url": url})),
    )
    .await
}

/// The payment's event once its delivery has settled away from `pending` (bounded wait).
async fn settled_event(app: &TestApp, m: &Merchant, payment_id: &str) -> Value {
    let deadline = std::time::Instant::now() + StdDuration::from_secs(10);
    loop {
        let r = app
            .call(
                m,
                Method::POST,
                &format!("/events/{}", m.merchant_id),
                Some(json!({"object_id": payment_id, "limit": 1})),
            )
            .await;
        let e = r.body["data"][0].clone();
        if e["delivery_status"]
            .as_str()
            .is_some_and(|s| s != "pending")
        {
            return e;
        }
        assert!(std::time::Instant::now() < deadline, "never settled: {e}");
        actix_web::rt::time::sleep(StdDuration::from_millis(20)).await;
    }
}

#[actix_web::test]
async fn every_spelling_of_a_private_address_is_refused_when_saved() {
    let app = spawn_with(Arc::new(TestDb::new().await), &[PRODUCTION_LIKE]).await;
    let m = app.create_merchant("Acme").await;
    for host in [
        "127.0.0.1",
        "127.1",
        "2130706433",
        "0x7f.1",
        "0177.0.0.1",
        "[::ffff:127.0.0.1]",
        "[::ffff:7f00:1]",
        "localhost.",
        "LOCALHOST",
        "0.0.0.0",
        "169.254.169.254",
        "10.0.0.8",
    ] {
        let r = put_endpoint(&app, &m, &format!("http://{host}:9/hook")).await;
        assert_eq!(
            (r.status, r.code(), r.param()),
            (400, "invalid_url", Some("url")),
            "{host}: {}",
            r.body
        );
    }
    let r = put_endpoint(&app, &m, "https://hooks.example.com/payd").await;
    assert_eq!(r.status, 200, "{}", r.body);
}

#[actix_web::test]
async fn a_host_name_that_resolves_to_loopback_is_never_connected_to() {
    let db = Arc::new(TestDb::new().await);
    let pinned = ("PAYD_SECURITY__RESOLVE_OVERRIDES", "hooks.test=127.0.0.1");
    let app = spawn_with(db, &[PRODUCTION_LIKE, pinned]).await;
    let receiver = Receiver::start().await;
    let m = app.create_merchant("Acme").await;
    let url = receiver.url.replace("127.0.0.1", "hooks.test");
    let r = put_endpoint(&app, &m, &url).await;
    assert_eq!(r.status, 200, "a host name passes the save: {}", r.body);
    let payment_id = app.succeeded_payment(&m).await;
    let e = settled_event(&app, &m, &payment_id).await;
    assert_eq!(e["delivery_status"], "failed", "not retried: {e}");
    let attempts = app
        .call(
            &m,
            Method::GET,
            &format!(
                "/events/{}/{}/attempts",
                m.merchant_id,
                e["event_id"].as_str().unwrap()
            ),
            None,
        )
        .await;
    let data = attempts.body["data"].as_array().unwrap();
    assert_eq!(data.len(), 1, "{}", attempts.body);
    assert_eq!(
        data[0]["error_kind"], "blocked_address",
        "{}",
        attempts.body
    );
    app.settle_deliveries().await;
    assert!(receiver.received().is_empty(), "the receiver was reached");
}

#[actix_web::test]
async fn an_allow_listed_network_is_delivered_to() {
    let db = Arc::new(TestDb::new().await);
    let listed = ("PAYD_SECURITY__ALLOWED_OUTBOUND_CIDRS", "127.0.0.0/8");
    let app = spawn_with(db, &[PRODUCTION_LIKE, listed]).await;
    let receiver = Receiver::start().await;
    let m = app.create_merchant("Acme").await;
    let r = put_endpoint(&app, &m, &receiver.url).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let payment_id = app.succeeded_payment(&m).await;
    assert_eq!(
        settled_event(&app, &m, &payment_id).await["delivery_status"],
        "delivered"
    );
    assert_eq!(receiver.received().len(), 1);
}

/// A remote processor's URL meets the same guard: one whose name resolves to loopback is never
/// called, and the payment is declined as `processor_unavailable`, not sent.
#[actix_web::test]
async fn a_processor_url_that_resolves_to_loopback_is_never_called() {
    use std::sync::atomic::Ordering;
    let db = Arc::new(TestDb::new().await);
    let settings = [
        ("PAYD_PROCESSORS__ALLOW_PRIVATE_URLS", "false"),
        (
            "PAYD_SECURITY__RESOLVE_OVERRIDES",
            "acme-pay.test=127.0.0.1",
        ),
    ];
    let app = spawn_with(db, &settings).await;
    let m = app.create_merchant("Acme").await;
    let (sim, url) = start_sim().await;
    common::sim::add_remote(&app, &m, &url.replace("127.0.0.1", "acme-pay.test"), 400).await;
    let body = json!({"amount": 500, "currency": "USD", "confirm": true,
        "payment_method_data": card("4242424242424242")});
    let p = app.create_payment(&m, body).await.body;
    assert_eq!(
        (p["status"].as_str(), p["last_error"]["code"].as_str()),
        (Some("declined"), Some("processor_unavailable")),
        "{p}"
    );
    assert_eq!(sim.authorizations.load(Ordering::SeqCst), 0);
}

/// A production instance started with only the settings production requires (mode, pepper,
/// master key) refuses private and link-local addresses for webhooks, remote processors and
/// Stripe's `api_base`, and holds a processor account a merchant adds for the operator.
#[actix_web::test]
async fn production_with_only_its_required_settings_refuses_private_addresses() {
    let app = spawn_with(Arc::new(TestDb::new().await), common::PRODUCTION).await;
    let live = app
        .post(
            "/admin/merchants",
            common::ADMIN_KEY,
            json!({"name": "Acme", "mode": "production"}),
        )
        .await;
    assert_eq!(live.status, 201, "{}", live.body);
    let m = Merchant {
        merchant_id: live.body["merchant_id"].as_str().unwrap().to_owned(),
        profile_id: live.body["profile_id"].as_str().unwrap().to_owned(),
        secret_key: live.body["secret_key"].as_str().unwrap().to_owned(),
        publishable_key: live.body["publishable_key"].as_str().unwrap().to_owned(),
    };
    for url in [
        "http://127.0.0.1:9/hook",
        "http://169.254.169.254/latest/meta-data",
        "http://10.0.0.5/hook",
        "http://[::1]/hook",
    ] {
        let r = put_endpoint(&app, &m, url).await;
        assert_eq!(
            (r.status, r.param()),
            (400, Some("url")),
            "{url}: {}",
            r.body
        );
    }
    let processors = format!("/account/shops/{}/processors", m.profile_id);
    for url in ["http://127.0.0.1:9", "http://169.254.169.254"] {
        let r = app
            .call(
                &m,
                Method::POST,
                &processors,
                Some(json!({"name": "acme-pay", "kind": "remote",
                "url": url, "secret": "a-shared-secret-of-enough-length"})),
            )
            .await;
        assert_eq!(
            (r.status, r.param()),
            (400, Some("url")),
            "{url}: {}",
            r.body
        );
        let r = app
            .call(
                &m,
                Method::POST,
                &processors,
                Some(json!({"name": "stripe", "kind": "stripe",
                "secret_key": "sk_live_payd0000000000000001", "webhook_secret": "whsec_000000000000000000000000001",
                "api_base": url})),
            )
            .await;
        assert_eq!(
            (r.status, r.param()),
            (400, Some("api_base")),
            "{url}: {}",
            r.body
        );
    }
    let r = app
        .call(
            &m,
            Method::POST,
            &processors,
            Some(json!({"name": "stripe", "kind": "stripe",
            "secret_key": "sk_live_payd0000000000000001", "webhook_secret": "whsec_000000000000000000000000001"})),
        )
        .await;
    assert_eq!(
        (r.status, r.body["approval"].as_str()),
        (201, Some("pending")),
        "{}",
        r.body
    );
}

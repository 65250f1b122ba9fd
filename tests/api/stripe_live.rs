//! Opt-in: payd against a real Stripe test account, for an operator who has the network. Set
//! `STRIPE_TEST_SECRET_KEY` to the account's `sk_test_…` (or `rk_test_…`) key and run
//! `cargo test --test api stripe_live:: -- --nocapture`; unset, the test prints a notice and passes.
//!
//! It pays with Stripe's test PaymentMethods (docs.stripe.com/testing), never a card number,
//! so the account needs no raw card data permission. Stripe's events cannot reach payd's
//! loopback address here: payd reads where each payment stands by `force_sync`, as it does
//! after a missed event. Every PaymentIntent it makes carries `metadata[payd_payment_id]`; they
//! stay in the test account's dashboard.

use crate::common;

use std::sync::Arc;

use actix_web::http::Method;
use common::{spawn_with, Merchant, TestApp, TestDb};
use serde_json::{json, Value};

async fn call(
    app: &TestApp,
    m: &Merchant,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Value {
    let r = app.call(m, method, path, body).await;
    assert!(r.status < 300, "{path}: {} {}", r.status, r.body);
    r.body
}

async fn pay(app: &TestApp, m: &Merchant, method: &str, extra: Value) -> Value {
    let mut body = json!({"amount": 1234, "currency": "EUR", "confirm": true,
        "payment_method_data": {"stripe": {"payment_method": method}}});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let r = app.create_payment(m, body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body
}

#[actix_web::test]
async fn a_real_stripe_test_account_charges_captures_refunds_and_declines() {
    let Some(key) = std::env::var("STRIPE_TEST_SECRET_KEY")
        .ok()
        .filter(|k| !k.is_empty())
    else {
        eprintln!(
            "notice: STRIPE_TEST_SECRET_KEY is not set: the smoke test against a real Stripe test account is skipped"
        );
        return;
    };
    assert!(
        key.starts_with("sk_test_") || key.starts_with("rk_test_"),
        "only a test key: a live key would move real money"
    );
    let app = spawn_with(Arc::new(TestDb::new().await), &[]).await;
    let m = app.create_merchant("Smoke").await;
    let r = app
        .post(
            &format!("/account/shops/{}/processors", m.profile_id),
            &m.secret_key,
            json!({"name": "stripe", "kind": "stripe", "secret_key": key,
                "webhook_secret": "whsec_smoketestsmoketestsmoketest"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);

    // Charged at once, then refunded in part.
    let paid = pay(&app, &m, "pm_card_visa", json!({})).await;
    assert_eq!(paid["status"], "succeeded", "{paid}");
    assert_eq!(paid["payment_method"]["last4"], "4242", "{paid}");
    let id = paid["payment_id"].as_str().unwrap();
    let refund = call(
        &app,
        &m,
        Method::POST,
        "/refunds",
        Some(json!({"payment_id": id, "amount": 234})),
    )
    .await;
    assert!(
        matches!(refund["status"].as_str(), Some("succeeded" | "pending")),
        "{refund}"
    );
    let synced = call(
        &app,
        &m,
        Method::GET,
        &format!("/payments/{id}?force_sync=true"),
        None,
    )
    .await;
    assert_eq!(synced["amount_refunded"], 234, "{synced}");

    // Authorized, then captured in part (final: Stripe releases the rest).
    let held = pay(
        &app,
        &m,
        "pm_card_visa",
        json!({"capture_method": "manual"}),
    )
    .await;
    assert_eq!(held["status"], "requires_capture", "{held}");
    assert!(
        held["capture_before"].is_string(),
        "Stripe's window: {held}"
    );
    let id = held["payment_id"].as_str().unwrap();
    let captured = call(
        &app,
        &m,
        Method::POST,
        &format!("/payments/{id}/capture"),
        Some(json!({"amount": 1000})),
    )
    .await;
    assert_eq!(captured["amount_captured"], 1000, "{captured}");

    // Authorized, then cancelled.
    let held = pay(
        &app,
        &m,
        "pm_card_visa",
        json!({"capture_method": "manual"}),
    )
    .await;
    let id = held["payment_id"].as_str().unwrap();
    let cancelled = call(
        &app,
        &m,
        Method::POST,
        &format!("/payments/{id}/cancel"),
        Some(json!({})),
    )
    .await;
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");

    // Declined by the issuer, with Stripe's code and the PaymentIntent Stripe made.
    let declined = pay(
        &app,
        &m,
        "pm_card_chargeDeclinedInsufficientFunds",
        json!({}),
    )
    .await;
    assert_eq!(declined["status"], "declined", "{declined}");
    assert_eq!(
        declined["last_error"]["code"], "insufficient_funds",
        "{declined}"
    );
    let id = declined["payment_id"].as_str().unwrap();
    let attempts = call(
        &app,
        &m,
        Method::GET,
        &format!("/payments/{id}/attempts"),
        None,
    )
    .await;
    assert!(
        attempts["data"][0]["processor_reference"]
            .as_str()
            .is_some_and(|r| r.starts_with("pi_")),
        "{attempts}"
    );

    // A PaymentMethod the account does not hold is refused before anything is charged.
    let r = app
        .create_payment(
            &m,
            json!({"amount": 1234, "currency": "EUR", "confirm": true,
                "payment_method_data": {"stripe": {"payment_method": "pm_0000000000NoSuchMethod"}}}),
        )
        .await;
    assert_eq!(
        (r.status, r.body["error"]["param"].as_str()),
        (400, Some("payment_method_data.stripe.payment_method")),
        "{}",
        r.body
    );
}

//! Subscription money over weeks of a sandbox test clock: a resume charges at most one period,
//! from the resume on; a retry after its period's end never spins the renewal job; webhooks
//! leave at once whatever the merchant's clock reads; and, over random sequences of advances,
//! pauses, resumes, plan changes and failing cards, every charge pays one period the
//! subscription was active in, no period is paid twice, and what was charged is what the
//! cycles say.

use crate::common;

use std::{
    sync::Arc,
    time::{Duration as StdDuration, Instant},
};

use actix_web::http::Method;
use chrono::{DateTime, Duration, Utc};
use common::{card, receiver::Receiver, spawn_app, spawn_with, Merchant, TestApp, TestDb};
use rand::{rngs::StdRng, Rng, SeedableRng};
use serde_json::{json, Value};

const DAY: i64 = 86_400;

async fn get(app: &TestApp, m: &Merchant, path: &str) -> common::Answer {
    app.call(m, Method::GET, path, None).await
}

async fn post(app: &TestApp, m: &Merchant, path: &str, body: Value) -> common::Answer {
    app.call(m, Method::POST, path, Some(body)).await
}

fn time(v: &Value) -> DateTime<Utc> {
    v.as_str().unwrap().parse().unwrap()
}

async fn customer(app: &TestApp, m: &Merchant) -> String {
    let c = post(app, m, "/customers", json!({"name": "Ana"})).await;
    assert_eq!(c.status, 201, "{}", c.body);
    c.body["customer_id"].as_str().unwrap().to_owned()
}

/// A card saved for `cid` under a multi-use mandate: the mandate's id.
async fn mandate(app: &TestApp, m: &Merchant, cid: &str, number: &str) -> String {
    let p = app
        .create_payment(
            m,
            json!({"amount": 100, "currency": "EUR", "confirm": true, "customer_id": cid,
                "setup_future_usage": "off_session", "payment_method_data": card(number)}),
        )
        .await;
    assert_eq!(p.status, 201, "{}", p.body);
    p.body["mandate_id"].as_str().unwrap().to_owned()
}

/// A recurring price of `amount` EUR every `count` `interval`s.
async fn price(app: &TestApp, m: &Merchant, amount: i64, interval: &str, count: i64) -> String {
    let p = post(
        app,
        m,
        "/products",
        json!({"name": "Plan", "prices": [{"unit_amount": amount, "currency": "EUR",
            "recurring": {"interval": interval, "interval_count": count}}]}),
    )
    .await;
    assert_eq!(p.status, 201, "{}", p.body);
    p.body["prices"][0]["price_id"].as_str().unwrap().to_owned()
}

async fn subscribe(app: &TestApp, m: &Merchant, cid: &str, mandate: &str, price: &str) -> Value {
    let r = post(
        app,
        m,
        "/subscriptions",
        json!({"customer_id": cid, "mandate_id": mandate, "items": [{"price_id": price}]}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body
}

async fn advance(app: &TestApp, m: &Merchant, seconds: i64) -> Value {
    let r = post(
        app,
        m,
        "/sandbox/clock/advance",
        json!({ "seconds": seconds }),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body
}

async fn now_of(app: &TestApp, m: &Merchant) -> DateTime<Utc> {
    time(&get(app, m, "/sandbox/clock").await.body["now"])
}

async fn cycles(app: &TestApp, m: &Merchant, id: &str) -> Vec<Value> {
    let r = get(app, m, &format!("/subscriptions/{id}/invoices")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["data"].as_array().unwrap().clone()
}

/// The succeeded payments made for the subscription `id`, oldest first.
async fn charges(app: &TestApp, m: &Merchant, cid: &str, id: &str) -> Vec<Value> {
    let r = post(
        app,
        m,
        "/payments/list",
        json!({"customer_id": cid, "status": "succeeded", "limit": 100}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let mut mine: Vec<Value> = r.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["metadata"]["subscription_id"] == id)
        .cloned()
        .collect();
    mine.reverse();
    mine
}

/// The subscription's events, oldest first.
async fn events(app: &TestApp, m: &Merchant, id: &str) -> Vec<Value> {
    let r = post(
        app,
        m,
        &format!("/events/{}", m.merchant_id),
        json!({"object_id": id, "limit": 100}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let mut all = r.body["data"].as_array().unwrap().clone();
    all.reverse();
    all
}

#[actix_web::test]
async fn resuming_an_unpaid_subscription_charges_one_period_from_the_resume() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    for (interval, count, period) in [("month", 1, 30 * DAY), ("day", 3, 3 * DAY)] {
        let cid = customer(&app, &m).await;
        let first = mandate(&app, &m, &cid, "4242424242424242").await;
        let price = price(&app, &m, 1000, interval, count).await;
        let s = subscribe(&app, &m, &cid, &first, &price).await;
        let id = s["subscription_id"].as_str().unwrap().to_owned();
        let r = post(&app, &m, &format!("/mandates/revoke/{first}"), json!({})).await;
        assert_eq!(r.status, 200, "{}", r.body);
        // The renewal and its three retries fail (1, 3 and 5 days apart): unpaid.
        advance(&app, &m, period + 10 * DAY).await;
        let s = get(&app, &m, &format!("/subscriptions/{id}")).await.body;
        assert_eq!(s["status"], "unpaid", "{interval}: {s}");
        // Sixty days unpaid, then a resume with another card.
        advance(&app, &m, 60 * DAY).await;
        let other = mandate(&app, &m, &cid, "5555555555554444").await;
        let resumed_at = now_of(&app, &m).await;
        let r = post(
            &app,
            &m,
            &format!("/subscriptions/{id}/resume"),
            json!({"mandate_id": other}),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.body["status"], "active", "{}", r.body);
        let paid = charges(&app, &m, &cid, &id).await;
        assert_eq!(
            paid.len(),
            2,
            "{interval}: the first period and one at the resume, none for the time unpaid: {paid:?}"
        );
        assert_eq!(time(&r.body["current_period_start"]), resumed_at);
        let c = cycles(&app, &m, &id).await;
        assert_eq!(c[0]["status"], "paid");
        assert_eq!(time(&c[0]["period_start"]), resumed_at, "{c:?}");
        assert_eq!(c[0]["payment_id"], paid[1]["payment_id"]);
        // The next period starts a period after the resume: one renewal then.
        let next = time(&r.body["current_period_end"]);
        assert!(next - resumed_at >= Duration::seconds(period - 3 * DAY));
        advance(&app, &m, (next - resumed_at).num_seconds() - 3_600).await;
        assert_eq!(charges(&app, &m, &cid, &id).await.len(), 2, "{interval}");
        advance(&app, &m, 2 * 3_600).await;
        assert_eq!(charges(&app, &m, &cid, &id).await.len(), 3, "{interval}");
    }
}

#[actix_web::test]
async fn retries_past_the_period_end_never_spin_the_renewal_job() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let cid = customer(&app, &m).await;
    // Saved, then every charge of it declines.
    let failing = mandate(&app, &m, &cid, "4000000000000341").await;
    let good = mandate(&app, &m, &cid, "4242424242424242").await;
    let daily = price(&app, &m, 300, "day", 1).await;
    let weekly = price(&app, &m, 700, "week", 1).await;
    let monthly = price(&app, &m, 3000, "month", 1).await;
    // The first charges are made with a good card; the renewals with the failing one.
    let start = now_of(&app, &m).await;
    let d = subscribe(&app, &m, &cid, &good, &daily).await;
    let w = subscribe(&app, &m, &cid, &good, &weekly).await;
    let p = subscribe(&app, &m, &cid, &good, &monthly).await;
    let (d, w, p) = (
        d["subscription_id"].as_str().unwrap().to_owned(),
        w["subscription_id"].as_str().unwrap().to_owned(),
        p["subscription_id"].as_str().unwrap().to_owned(),
    );
    for id in [&d, &w] {
        let r = post(&app, &m, &format!("/subscriptions/{id}/pause"), json!({})).await;
        assert_eq!(r.status, 200, "{}", r.body);
        let r = post(
            &app,
            &m,
            &format!("/subscriptions/{id}/resume"),
            json!({"mandate_id": failing}),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let r = post(&app, &m, &format!("/subscriptions/{p}/pause"), json!({})).await;
    assert_eq!(r.status, 200, "{}", r.body);

    let moved = advance(&app, &m, 12 * DAY).await;
    // Daily: the renewal on day 1 and its retries on days 2, 5 and 10; weekly: day 7 and its
    // retries on days 8 and 11; each declined payment's expiry a day later. Not thousands.
    let ran = moved["jobs_run"].as_u64().unwrap();
    assert!(ran <= 30, "{ran} jobs for 12 days: {moved}");

    let daily_now = get(&app, &m, &format!("/subscriptions/{d}")).await.body;
    assert_eq!(daily_now["status"], "unpaid", "{daily_now}");
    let past_due = events(&app, &m, &d)
        .await
        .into_iter()
        .find(|e| e["event_type"] == "subscription_past_due")
        .expect("subscription_past_due");
    let late = time(&past_due["created"]) - start;
    assert!(
        late >= Duration::days(10) && late < Duration::days(10) + Duration::minutes(5),
        "unpaid after the last retry on day 10, not {late}"
    );
    let c = cycles(&app, &m, &d).await;
    assert_eq!((c.len(), c[0]["attempts"].as_i64()), (2, Some(4)), "{c:?}");

    let weekly_now = get(&app, &m, &format!("/subscriptions/{w}")).await.body;
    assert_eq!(weekly_now["status"], "active", "{weekly_now}");
    let c = cycles(&app, &m, &w).await;
    assert_eq!((c.len(), c[0]["attempts"].as_i64()), (2, Some(3)), "{c:?}");
    assert_eq!(
        time(&c[0]["next_attempt_at"]) - start,
        Duration::days(16),
        "{c:?}"
    );

    // The paused subscription was charged for nothing while paused.
    assert_eq!(cycles(&app, &m, &p).await.len(), 1);
    assert_eq!(charges(&app, &m, &cid, &p).await.len(), 1);
}

#[actix_web::test]
async fn webhooks_leave_at_once_after_the_test_clock_moved() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let receiver = Receiver::start().await;
    app.set_webhook(&m, &receiver.url).await;
    advance(&app, &m, 8 * DAY).await;
    // An ordinary payment made on the moved clock.
    let paid = app.succeeded_payment(&m).await;
    // And an event a job makes on the merchant's clock: an unconfirmed payment's expiry.
    let waiting = app
        .create_payment(&m, json!({"amount": 500, "currency": "EUR"}))
        .await;
    assert_eq!(waiting.status, 201, "{}", waiting.body);
    let waiting = waiting.body["payment_id"].as_str().unwrap().to_owned();
    advance(&app, &m, DAY + 60).await;
    let deadline = Instant::now() + StdDuration::from_secs(10);
    let wanted = [(paid, "payment_succeeded"), (waiting, "payment_expired")];
    loop {
        let got: Vec<Value> = receiver
            .received()
            .iter()
            .map(|r| serde_json::from_slice(&r.body).unwrap())
            .collect();
        let has = |(id, t): &(String, &str)| {
            got.iter()
                .any(|e| e["event_type"] == *t && e["content"]["object"]["payment_id"] == **id)
        };
        if wanted.iter().all(has) {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not delivered within 10 s of real time: {got:?}"
        );
        actix_web::rt::time::sleep(StdDuration::from_millis(50)).await;
    }
}

async fn update(app: &TestApp, m: &Merchant, id: &str, price: &str, proration: &str) -> Value {
    let body = json!({"items": [{"price_id": price}], "proration": proration});
    let r = app
        .call(
            m,
            Method::PUT,
            &format!("/subscriptions/{id}/update"),
            Some(body),
        )
        .await;
    assert_eq!(r.status, 200, "{proration}: {}", r.body);
    r.body
}

#[actix_web::test]
async fn plan_changes_never_credit_more_than_was_paid() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let cid = customer(&app, &m).await;
    let man = mandate(&app, &m, &cid, "4242424242424242").await;
    let (small, large) = (
        price(&app, &m, 3000, "month", 1).await,
        price(&app, &m, 6000, "month", 1).await,
    );
    let s = subscribe(&app, &m, &cid, &man, &small).await;
    let id = s["subscription_id"].as_str().unwrap().to_owned();
    advance(&app, &m, 10 * DAY).await;
    // Up without settling, down with prorations, five times: nothing was paid for the larger
    // plan, so nothing is credited.
    for _ in 0..5 {
        update(&app, &m, &id, &large, "none").await;
        let down = update(&app, &m, &id, &small, "create_prorations").await;
        assert_eq!(down["pending_adjustment"], 0, "{down}");
    }
    // Up, paid now for the rest of the period, then down at once: the credit is what was paid.
    update(&app, &m, &id, &large, "always_invoice").await;
    let c = cycles(&app, &m, &id).await;
    assert_eq!(
        (c[0]["kind"].as_str(), c[0]["status"].as_str()),
        (Some("proration"), Some("paid"))
    );
    let paid_now = c[0]["amount"].as_i64().unwrap();
    assert!(paid_now > 0 && paid_now < 3000, "{c:?}");
    let down = update(&app, &m, &id, &small, "create_prorations").await;
    assert_eq!(down["pending_adjustment"], -paid_now, "{down}");
    // The renewal charges the plan less that credit, and never 0 for a plan that was paid.
    let end = time(&down["current_period_end"]);
    advance(&app, &m, (end - now_of(&app, &m).await).num_seconds() + 60).await;
    let c = cycles(&app, &m, &id).await;
    assert_eq!(c[0]["amount"].as_i64(), Some(3000 - paid_now), "{c:?}");
    let charged: i64 = charges(&app, &m, &cid, &id)
        .await
        .iter()
        .map(|p| p["amount_captured"].as_i64().unwrap())
        .sum();
    assert_eq!(charged, 3000 + paid_now + 3000 - paid_now);
}

#[actix_web::test]
async fn one_advance_and_one_sandbox_merchant_make_bounded_work() {
    let db = Arc::new(TestDb::new().await);
    let app = spawn_with(
        db,
        &[
            ("PAYD_SANDBOX__MAX_SUBSCRIPTIONS", "3"),
            ("PAYD_SANDBOX__MAX_ADVANCE_CHARGES", "40"),
        ],
    )
    .await;
    let m = app.create_merchant("Acme").await;
    let cid = customer(&app, &m).await;
    let man = mandate(&app, &m, &cid, "4242424242424242").await;
    let daily = price(&app, &m, 100, "day", 1).await;
    for _ in 0..3 {
        subscribe(&app, &m, &cid, &man, &daily).await;
    }
    let r = post(
        &app,
        &m,
        "/subscriptions",
        json!({"customer_id": cid, "mandate_id": man, "items": [{"price_id": daily}]}),
    )
    .await;
    assert_eq!((r.status, r.code()), (409, "limit_reached"), "{}", r.body);
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sandbox.max_subscriptions"),
        "{}",
        r.body
    );
    // Three daily subscriptions for 14 days: 42 renewals, over the bound; nothing moved.
    let r = post(
        &app,
        &m,
        "/sandbox/clock/advance",
        json!({"seconds": 14 * DAY}),
    )
    .await;
    assert_eq!((r.status, r.param()), (400, Some("seconds")), "{}", r.body);
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("sandbox.max_advance_charges"),
        "{}",
        r.body
    );
    assert_eq!(
        get(&app, &m, "/sandbox/clock").await.body["offset_seconds"],
        0
    );
    // Within it, in steps: 39 renewals.
    advance(&app, &m, 13 * DAY).await;
    let r = post(
        &app,
        &m,
        "/payments/list",
        json!({"customer_id": cid, "status": "succeeded", "limit": 100}),
    )
    .await;
    assert_eq!(
        r.body["data"].as_array().unwrap().len(),
        1 + 3 + 39,
        "{}",
        r.body
    );
}

#[actix_web::test]
async fn the_sales_report_counts_what_cycles_sold() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let cid = customer(&app, &m).await;
    let man = mandate(&app, &m, &cid, "4242424242424242").await;
    let p = post(
        &app,
        &m,
        "/products",
        json!({"name": "Plan", "prices": [{"unit_amount": 1500, "currency": "EUR",
            "recurring": {"interval": "month"}}]}),
    )
    .await;
    let (product, price) = (
        p.body["product_id"].as_str().unwrap().to_owned(),
        p.body["prices"][0]["price_id"].as_str().unwrap().to_owned(),
    );
    let r = post(
        &app,
        &m,
        "/subscriptions",
        json!({"customer_id": cid, "mandate_id": man, "items": [{"price_id": price, "quantity": 2}]}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.body["subscription_id"].as_str().unwrap().to_owned();
    advance(&app, &m, 5 * 31 * DAY).await;
    let paid = cycles(&app, &m, &id).await;
    assert_eq!(paid.len(), 6, "{paid:?}");
    let lines = get(
        &app,
        &m,
        &format!(
            "/payments/{}/lines",
            paid[0]["payment_id"].as_str().unwrap()
        ),
    )
    .await;
    assert_eq!(
        lines.body["data"][0]["price_id"],
        price.as_str(),
        "{}",
        lines.body
    );
    let report = get(&app, &m, &format!("/products/{product}/sales")).await;
    assert_eq!(report.status, 200, "{}", report.body);
    assert_eq!(
        (
            report.body["totals"]["units_sold"].as_i64(),
            report.body["totals"]["amount_sold"].as_i64()
        ),
        (Some(12), Some(6 * 3000)),
        "{}",
        report.body
    );
    // Archived, the plan still renews for the subscription that has it.
    let r = post(&app, &m, &format!("/products/{product}/archive"), json!({})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    advance(&app, &m, 31 * DAY).await;
    let c = cycles(&app, &m, &id).await;
    assert_eq!(
        (c.len(), c[0]["status"].as_str()),
        (7, Some("paid")),
        "{c:?}"
    );
}

/// Finalizes the invoice `id`.
async fn finalize(app: &TestApp, m: &Merchant, id: &str) -> Value {
    let r = post(app, m, &format!("/invoices/{id}/finalize"), json!({})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body
}

/// A cycle the shop's tax takes past the deployment's largest charge (`limits.max_amount`) is
/// not charged: on the hosted checkout the subscription is refused (409 `cycle_unchargeable`),
/// off-session its first attempt fails with no payment made.
#[actix_web::test]
async fn a_cycle_its_tax_takes_past_the_largest_charge_is_not_charged() {
    let db = Arc::new(TestDb::new().await);
    let app = spawn_with(db, &[("PAYD_LIMITS__MAX_AMOUNT", "5000")]).await;
    let m = app.create_merchant("Acme").await;
    let r = app
        .call(
            &m,
            Method::PUT,
            "/invoice-settings/tax-rules",
            Some(json!({"rules": [{"rate_bps": 1900, "country": "DE"}]})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let address = json!({"line1": "Hauptstraße 5", "city": "Berlin", "country": "DE"});
    let c = post(
        &app,
        &m,
        "/customers",
        json!({"name": "Jan", "address": address}),
    )
    .await;
    let cid = c.body["customer_id"].as_str().unwrap().to_owned();
    // 45.00 a month is within the limit; with 19 % of tax, 53.55 is not.
    let plan = price(&app, &m, 4500, "month", 1).await;

    let body = json!({"customer_id": cid, "items": [{"price_id": plan}]});
    let r = post(&app, &m, "/subscriptions/create", body).await;
    assert_eq!(
        (r.status, r.body["error"]["code"].as_str()),
        (409, Some("cycle_unchargeable")),
        "{}",
        r.body
    );
    assert!(
        r.body["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("5355") && m.contains("5000")),
        "{}",
        r.body
    );

    let man = mandate(&app, &m, &cid, "4242424242424242").await;
    let s = subscribe(&app, &m, &cid, &man, &plan).await;
    let id = s["subscription_id"].as_str().unwrap();
    let first = &cycles(&app, &m, id).await[0];
    assert_eq!(first["amount"], 5355, "{first}");
    assert_eq!(
        first["payment_id"],
        Value::Null,
        "no payment was made: {first}"
    );
    assert_ne!(first["status"], "paid", "{first}");
    assert!(charges(&app, &m, &cid, id).await.is_empty());
}

#[actix_web::test]
async fn a_cycle_is_taxed_when_charged_and_its_invoice_is_paid_with_it() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let r = app
        .call(
            &m,
            Method::PUT,
            "/invoice-settings/tax-rules",
            Some(json!({"rules": [{"rate_bps": 1900, "country": "DE"}]})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let c = post(
        &app,
        &m,
        "/customers",
        json!({"name": "Jan", "address": {"line1": "Hauptstraße 5", "city": "Berlin", "country": "DE"}}),
    )
    .await;
    let cid = c.body["customer_id"].as_str().unwrap().to_owned();
    let man = mandate(&app, &m, &cid, "4242424242424242").await;
    let plan = price(&app, &m, 4500, "month", 1).await;
    let s = subscribe(&app, &m, &cid, &man, &plan).await;
    let id = s["subscription_id"].as_str().unwrap().to_owned();
    // The first cycle charged the plan and the tax the shop's rules put on it.
    let first = &cycles(&app, &m, &id).await[0];
    assert_eq!(first["amount"], 5355, "{first}");
    let paid = charges(&app, &m, &cid, &id).await;
    assert_eq!(paid[0]["amount_captured"], 5355);
    let lines = get(
        &app,
        &m,
        &format!(
            "/payments/{}/lines",
            paid[0]["payment_id"].as_str().unwrap()
        ),
    )
    .await;
    assert_eq!(lines.body["data"][0]["tax_amount"], 855, "{}", lines.body);
    // Its invoice totals what was charged, and is paid.
    let d = post(
        &app,
        &m,
        "/invoices",
        json!({"subscription_id": id, "cycle_id": first["cycle_id"]}),
    )
    .await;
    assert_eq!(d.status, 201, "{}", d.body);
    let f = finalize(&app, &m, d.body["invoice_id"].as_str().unwrap()).await;
    assert_eq!(
        (
            f["total"].as_i64(),
            f["tax"].as_i64(),
            f["amount_due"].as_i64(),
            f["status"].as_str()
        ),
        (Some(5355), Some(855), Some(0), Some("paid")),
        "{f}"
    );

    // A renewal that fails: its invoice is open; paid later (a resume), the invoice is paid.
    let r = post(&app, &m, &format!("/mandates/revoke/{man}"), json!({})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let end = time(&s["current_period_end"]);
    advance(&app, &m, (end - now_of(&app, &m).await).num_seconds() + 60).await;
    let open = &cycles(&app, &m, &id).await[0];
    assert_eq!(
        (open["status"].as_str(), open["amount"].as_i64()),
        (Some("open"), Some(5355)),
        "{open}"
    );
    let d = post(
        &app,
        &m,
        "/invoices",
        json!({"subscription_id": id, "cycle_id": open["cycle_id"]}),
    )
    .await;
    let invoice = d.body["invoice_id"].as_str().unwrap().to_owned();
    let f = finalize(&app, &m, &invoice).await;
    assert_eq!(
        (f["status"].as_str(), f["amount_due"].as_i64()),
        (Some("open"), Some(5355)),
        "{f}"
    );
    // Its retries fail too (unpaid); a resume with another card pays it.
    advance(&app, &m, 10 * DAY).await;
    let other = mandate(&app, &m, &cid, "5555555555554444").await;
    let r = post(
        &app,
        &m,
        &format!("/subscriptions/{id}/resume"),
        json!({"mandate_id": other}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let deadline = Instant::now() + StdDuration::from_secs(10);
    loop {
        let inv = get(&app, &m, &format!("/invoices/{invoice}")).await.body;
        if inv["status"] == "paid" {
            assert_eq!(
                (inv["amount_paid"].as_i64(), inv["amount_due"].as_i64()),
                (Some(5355), Some(0)),
                "{inv}"
            );
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the paid cycle's invoice stayed {inv}"
        );
        actix_web::rt::time::sleep(StdDuration::from_millis(25)).await;
    }
}

/// One step of a random billing history.
#[derive(Debug, Clone, Copy)]
enum Step {
    Advance(i64),
    Pause,
    Resume,
    /// The mandate is revoked: charges fail until a resume gives a new one.
    CardFails,
    Update {
        amount: i64,
        proration: &'static str,
    },
}

fn step(rng: &mut StdRng) -> Step {
    match rng.random_range(0..10) {
        0..=3 => Step::Advance(match rng.random_bool(0.5) {
            true => rng.random_range(1..=9) * DAY + rng.random_range(0..DAY),
            false => rng.random_range(60..=DAY),
        }),
        4 => Step::Pause,
        5 | 6 => Step::Resume,
        7 => Step::CardFails,
        _ => Step::Update {
            amount: [1000, 2000, 3000][rng.random_range(0..3)],
            proration: ["create_prorations", "always_invoice", "none"][rng.random_range(0..3)],
        },
    }
}

/// The subscription's status at `at` (inclusive), from its events.
fn status_at(history: &[Value], at: DateTime<Utc>) -> String {
    history
        .iter()
        .filter(|e| {
            e["event_type"]
                .as_str()
                .unwrap()
                .starts_with("subscription_")
        })
        .rfind(|e| time(&e["created"]) <= at)
        .map(|e| {
            e["envelope"]["content"]["object"]["status"]
                .as_str()
                .unwrap()
                .to_owned()
        })
        .unwrap_or_default()
}

#[actix_web::test]
async fn random_histories_charge_each_active_period_once() {
    let app = spawn_app().await;
    for seed in 0..6u64 {
        let mut rng = StdRng::seed_from_u64(seed);
        let m = app.create_merchant(&format!("Shop {seed}")).await;
        let cid = customer(&app, &m).await;
        let mut current = mandate(&app, &m, &cid, "4242424242424242").await;
        let plan = price(&app, &m, 1000, "day", 1).await;
        let mut prices = std::collections::HashMap::new();
        prices.insert(1000, plan.clone());
        for amount in [2000, 3000] {
            prices.insert(amount, price(&app, &m, amount, "day", 1).await);
        }
        let s = subscribe(&app, &m, &cid, &current, &plan).await;
        let id = s["subscription_id"].as_str().unwrap().to_owned();
        let mut revoked = false;
        let mut trail = Vec::new();
        for _ in 0..12 {
            let st = step(&mut rng);
            trail.push(st);
            let answer = match st {
                Step::Advance(secs) => {
                    let moved = advance(&app, &m, secs).await;
                    // Each day crossed renews at most once and retries at most three times;
                    // each declined charge expires once a day later.
                    let days = secs / DAY + 2;
                    let ran = moved["jobs_run"].as_i64().unwrap();
                    assert!(
                        ran <= 3 * days + 8,
                        "seed {seed}: {ran} jobs for {secs} s {trail:?}"
                    );
                    continue;
                }
                Step::Pause => {
                    post(&app, &m, &format!("/subscriptions/{id}/pause"), json!({})).await
                }
                Step::Resume => {
                    if revoked {
                        current = mandate(&app, &m, &cid, "4242424242424242").await;
                        revoked = false;
                    }
                    let body = json!({"mandate_id": current});
                    post(&app, &m, &format!("/subscriptions/{id}/resume"), body).await
                }
                Step::CardFails => {
                    revoked = true;
                    post(&app, &m, &format!("/mandates/revoke/{current}"), json!({})).await
                }
                Step::Update { amount, proration } => {
                    let body =
                        json!({"items": [{"price_id": prices[&amount]}], "proration": proration});
                    app.call(
                        &m,
                        Method::PUT,
                        &format!("/subscriptions/{id}/update"),
                        Some(body),
                    )
                    .await
                }
            };
            assert!(
                [200, 409].contains(&answer.status),
                "seed {seed} {st:?}: {} {trail:?}",
                answer.body
            );
        }
        let cycles = cycles(&app, &m, &id).await;
        let paid: Vec<&Value> = cycles.iter().filter(|c| c["status"] == "paid").collect();
        let charged: Vec<Value> = charges(&app, &m, &cid, &id).await;
        let sum = |v: &[&Value], f: &str| v.iter().map(|x| x[f].as_i64().unwrap()).sum::<i64>();
        assert_eq!(
            sum(&charged.iter().collect::<Vec<_>>(), "amount_captured"),
            sum(&paid, "amount"),
            "seed {seed}: what was charged is what the paid cycles say {trail:?}\n{cycles:?}"
        );
        // Whole periods (not a plan change's rest of a period) are paid once each, at their
        // start, while the subscription was active.
        let history = events(&app, &m, &id).await;
        let mut periods: Vec<(DateTime<Utc>, DateTime<Utc>)> = paid
            .iter()
            .filter(|c| c["kind"] == "period")
            .map(|c| (time(&c["period_start"]), time(&c["period_end"])))
            .collect();
        periods.sort();
        for w in periods.windows(2) {
            assert!(
                w[0].1 <= w[1].0,
                "seed {seed}: {w:?} overlap {trail:?}\n{cycles:?}"
            );
        }
        for (start, _) in &periods {
            assert_eq!(
                status_at(&history, *start),
                "active",
                "seed {seed}: a period paid from {start} {trail:?}\n{cycles:?}"
            );
        }
    }
}

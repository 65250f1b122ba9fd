//! Subscriptions billed by payd: the first period charged at creation, renewals through the
//! clock, failed renewals retried then `unpaid`, paid again with another mandate, pause and
//! resume, cancellation now and at period end (and its undo), and the events in order.

use crate::common;

use std::time::{Duration as StdDuration, Instant};

use actix_web::http::Method;
use chrono::{DateTime, Duration, Utc};
use common::{card, spawn_app, Merchant, TestApp};
use payd::clock::Clock;
use serde_json::{json, Value};

/// A customer with a card saved under a multi-use mandate: (customer id, mandate id).
async fn customer_with_mandate(app: &TestApp, m: &Merchant, number: &str) -> (String, String) {
    let c = app
        .call(m, Method::POST, "/customers", Some(json!({"name": "Ana"})))
        .await;
    assert_eq!(c.status, 201, "{}", c.body);
    let cid = c.body["customer_id"].as_str().unwrap().to_owned();
    let mandate = save_card(app, m, &cid, number).await;
    (cid, mandate)
}

async fn save_card(app: &TestApp, m: &Merchant, cid: &str, number: &str) -> String {
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

/// A monthly price of `amount` EUR.
async fn monthly(app: &TestApp, m: &Merchant, amount: i64) -> String {
    let p = app
        .call(
            m,
            Method::POST,
            "/products",
            Some(
                json!({"name": "Plan", "prices": [{"unit_amount": amount, "currency": "EUR",
                "recurring": {"interval": "month"}}]}),
            ),
        )
        .await;
    assert_eq!(p.status, 201, "{}", p.body);
    p.body["prices"][0]["price_id"].as_str().unwrap().to_owned()
}

async fn subscribe(app: &TestApp, m: &Merchant, cid: &str, mandate: &str, price: &str) -> Value {
    let r = app
        .call(
            m,
            Method::POST,
            "/subscriptions",
            Some(json!({"customer_id": cid, "mandate_id": mandate,
                "items": [{"price_id": price, "quantity": 2}], "metadata": {"plan": "pro"}})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body
}

async fn get(app: &TestApp, m: &Merchant, path: &str) -> common::Answer {
    app.call(m, Method::GET, path, None).await
}

async fn post(app: &TestApp, m: &Merchant, path: &str, body: Value) -> common::Answer {
    app.call(m, Method::POST, path, Some(body)).await
}

async fn cycles(app: &TestApp, m: &Merchant, id: &str) -> Vec<Value> {
    let r = get(app, m, &format!("/subscriptions/{id}/invoices")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["data"].as_array().unwrap().clone()
}

fn time(v: &Value) -> DateTime<Utc> {
    v.as_str().unwrap().parse().unwrap()
}

/// Moves the clock to `to` (plus a second) and waits (bounded) until `done` holds.
async fn until<F>(app: &TestApp, m: &Merchant, id: &str, to: DateTime<Utc>, done: F) -> Value
where
    F: Fn(&Value, &[Value]) -> bool,
{
    app.clock.set(to + Duration::seconds(1));
    let deadline = Instant::now() + StdDuration::from_secs(10);
    loop {
        // The cycles first: the subscription read after them is at least as new (a renewal
        // commits the new period with its cycle, and its payment after).
        let c = cycles(app, m, id).await;
        let s = get(app, m, &format!("/subscriptions/{id}")).await.body;
        if done(&s, &c) {
            return s;
        }
        if Instant::now() >= deadline {
            let open = c
                .first()
                .and_then(|c| c["payment_id"].as_str())
                .unwrap_or_default();
            let p = get(app, m, &format!("/payments/{open}")).await.body;
            panic!("never: {s}\ncycles {c:?}\nlast attempt's payment {p}");
        }
        actix_web::rt::time::sleep(StdDuration::from_millis(25)).await;
    }
}

#[actix_web::test]
async fn a_year_of_monthly_renewals_charges_each_cycle_once() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let (cid, mandate) = customer_with_mandate(&app, &m, "4242424242424242").await;
    let price = monthly(&app, &m, 1500).await;
    let s = subscribe(&app, &m, &cid, &mandate, &price).await;
    let id = s["subscription_id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("sub_"));
    assert_eq!(
        (s["status"].as_str(), s["amount"].as_i64()),
        (Some("active"), Some(3000))
    );
    assert_eq!(
        (s["billing"].as_str(), s["interval"].as_str()),
        (Some("payd"), Some("month"))
    );
    assert_eq!(s["cancel_at_period_end"], false);
    let first = cycles(&app, &m, &id).await;
    assert_eq!(first.len(), 1);
    assert_eq!(
        (first[0]["status"].as_str(), first[0]["attempts"].as_i64()),
        (Some("paid"), Some(1))
    );
    let pay = get(
        &app,
        &m,
        &format!("/payments/{}", first[0]["payment_id"].as_str().unwrap()),
    )
    .await;
    assert_eq!(
        (pay.body["status"].as_str(), pay.body["amount"].as_i64()),
        (Some("succeeded"), Some(3000))
    );
    assert_eq!(pay.body["metadata"]["subscription_id"], id.as_str());

    // Estimates: the next renewal, and a new plan, as the renewal computes them.
    let next = get(
        &app,
        &m,
        &format!("/subscriptions/estimate?subscription_id={id}"),
    )
    .await;
    assert_eq!(next.status, 200, "{}", next.body);
    assert_eq!(
        (next.body["amount"].as_i64(), next.body["currency"].as_str()),
        (Some(3000), Some("EUR"))
    );
    assert_eq!(next.body["period_start"], s["current_period_end"]);
    let plan = get(
        &app,
        &m,
        &format!("/subscriptions/estimate?price_id={price}&quantity=3"),
    )
    .await;
    assert_eq!(plan.body["amount"], 4500, "{}", plan.body);
    let bad = get(
        &app,
        &m,
        &format!("/subscriptions/estimate?price_id={price}&quantity=0"),
    )
    .await;
    assert_eq!(
        (bad.status, bad.param()),
        (400, Some("quantity")),
        "{}",
        bad.body
    );
    let none = get(&app, &m, "/subscriptions/estimate").await;
    assert_eq!((none.status, none.param()), (400, Some("price_id")));
    assert_eq!(
        cycles(&app, &m, &id).await.len(),
        1,
        "an estimate stores nothing"
    );

    let mut transitions = vec![s["transition_id"].clone()];
    let mut current = s;
    for k in 1..=12 {
        let end = time(&current["current_period_end"]);
        current = until(&app, &m, &id, end, |_, c| {
            c.len() == k + 1 && c[0]["status"] == "paid"
        })
        .await;
        assert_eq!(time(&current["current_period_start"]), end);
        transitions.push(current["transition_id"].clone());
    }
    let all = cycles(&app, &m, &id).await;
    assert_eq!(all.len(), 13);
    let mut payments: Vec<&str> = all
        .iter()
        .map(|c| c["payment_id"].as_str().unwrap())
        .collect();
    payments.sort();
    payments.dedup();
    assert_eq!(payments.len(), 13, "one payment per cycle");
    for w in all.windows(2) {
        assert_eq!(
            w[0]["period_start"], w[1]["period_end"],
            "periods follow each other"
        );
    }
    let events = post(
        &app,
        &m,
        &format!("/events/{}", m.merchant_id),
        json!({"object_id": id, "limit": 100}),
    )
    .await;
    let mut types: Vec<String> = events.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event_type"].as_str().unwrap().to_owned())
        .collect();
    types.reverse();
    assert_eq!(types[0], "subscription_active");
    assert_eq!(types[1], "invoice_paid");
    assert_eq!(
        types.iter().filter(|t| *t == "invoice_paid").count(),
        13,
        "{types:?}"
    );
    assert_eq!(types.len(), 14, "{types:?}");
    // Renewals are not transitions: the transition id stayed.
    assert!(transitions.windows(2).all(|w| w[0] == w[1]));
}

#[actix_web::test]
async fn failed_renewals_retry_then_unpaid_then_paid_with_another_mandate() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let (cid, mandate) = customer_with_mandate(&app, &m, "4242424242424242").await;
    let price = monthly(&app, &m, 1000).await;
    let s = subscribe(&app, &m, &cid, &mandate, &price).await;
    let id = s["subscription_id"].as_str().unwrap().to_owned();
    // The mandate is revoked: every renewal is refused, like a decline.
    let r = post(&app, &m, &format!("/mandates/revoke/{mandate}"), json!({})).await;
    assert_eq!(r.status, 200, "{}", r.body);

    let end = time(&s["current_period_end"]);
    let mut at = end;
    let mut attempt = 1;
    let s = until(&app, &m, &id, at, |_, c| {
        c.len() == 2 && c[0]["attempts"] == 1 && c[0]["next_attempt_at"].is_string()
    })
    .await;
    assert_eq!(s["status"], "active");
    for days in [1, 3, 5] {
        attempt += 1;
        at += Duration::days(days);
        // Refused before a payment was made (the mandate is revoked): the cycle names none.
        until(&app, &m, &id, at, |_, c| {
            c[0]["attempts"] == attempt && c[0]["status"] == "open" && c[0]["payment_id"].is_null()
        })
        .await;
    }
    let s = until(&app, &m, &id, at, |s, _| s["status"] == "unpaid").await;
    let c = cycles(&app, &m, &id).await;
    assert_eq!(
        (c[0]["attempts"].as_i64(), c[0]["next_attempt_at"].is_null()),
        (Some(4), true)
    );
    let types = app.event_types(&m, &id).await;
    assert_eq!(
        types
            .iter()
            .filter(|t| *t == "invoice_payment_failed")
            .count(),
        4,
        "{types:?}"
    );
    assert_eq!(
        types.last().map(String::as_str),
        Some("subscription_past_due")
    );
    // Another card, another mandate: the open cycle is paid at once, and it is active again.
    let other = save_card(&app, &m, &cid, "5555555555554444").await;
    let r = post(
        &app,
        &m,
        &format!("/subscriptions/{id}/resume"),
        json!({"mandate_id": other}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        (r.body["status"].as_str(), r.body["mandate_id"].as_str()),
        (Some("active"), Some(other.as_str()))
    );
    assert_ne!(r.body["transition_id"], s["transition_id"]);
    let c = cycles(&app, &m, &id).await;
    assert_eq!(
        (c[0]["status"].as_str(), c[0]["attempts"].as_i64()),
        (Some("paid"), Some(5))
    );
    let types = app.event_types(&m, &id).await;
    assert_eq!(
        &types[types.len() - 2..],
        ["subscription_resumed", "invoice_paid"]
    );
    // A revoked mandate cannot be given.
    let r = post(
        &app,
        &m,
        &format!("/subscriptions/{id}/resume"),
        json!({"mandate_id": mandate}),
    )
    .await;
    assert_eq!((r.status, r.code()), (409, "mandate_inactive"));
}

#[actix_web::test]
async fn cancel_at_period_end_its_undo_pause_and_resume() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let (cid, mandate) = customer_with_mandate(&app, &m, "4242424242424242").await;
    let price = monthly(&app, &m, 700).await;
    let s = subscribe(&app, &m, &cid, &mandate, &price).await;
    let id = s["subscription_id"].as_str().unwrap().to_owned();
    let path = |a: &str| format!("/subscriptions/{id}/{a}");

    let r = post(
        &app,
        &m,
        &path("cancel"),
        json!({"at_period_end": true, "reason": "too dear"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        (
            r.body["status"].as_str(),
            r.body["cancel_at_period_end"].as_bool()
        ),
        (Some("active"), Some(true))
    );
    assert_eq!(r.body["cancellation_reason"], "too dear");
    let twice = post(&app, &m, &path("cancel"), json!({"at_period_end": true})).await;
    assert_eq!((twice.status, twice.code()), (409, "invalid_state"));
    let caps = get(&app, &m, &path("capabilities")).await;
    assert_eq!(caps.body["actions"], json!(["pause", "resume", "cancel"]));
    let undo = post(&app, &m, &path("resume"), json!({})).await;
    assert_eq!(
        (
            undo.body["cancel_at_period_end"].as_bool(),
            undo.body["status"].as_str()
        ),
        (Some(false), Some("active"))
    );

    // Paused, a period passes without a charge; resumed, the next one is charged.
    let p = post(&app, &m, &path("pause"), json!({})).await;
    assert_eq!(p.body["status"], "paused");
    let again = post(&app, &m, &path("pause"), json!({})).await;
    assert_eq!((again.status, again.code()), (409, "invalid_state"));
    assert!(again.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("paused"));
    let end = time(&p.body["current_period_end"]);
    let s = until(&app, &m, &id, end, |s, _| {
        time(&s["current_period_start"]) == end
    })
    .await;
    assert_eq!(
        cycles(&app, &m, &id).await.len(),
        1,
        "no charge while paused"
    );
    let r = post(&app, &m, &path("resume"), json!({})).await;
    assert_eq!(r.body["status"], "active");
    let end = time(&s["current_period_end"]);
    let s = until(&app, &m, &id, end, |_, c| {
        c.len() == 2 && c[0]["status"] == "paid"
    })
    .await;

    // Cancelled at the end of this period: no further cycle.
    post(&app, &m, &path("cancel"), json!({"at_period_end": true})).await;
    let end = time(&s["current_period_end"]);
    let done = until(&app, &m, &id, end, |s, _| s["status"] == "cancelled").await;
    assert_eq!(time(&done["cancelled_at"]), end);
    assert_eq!(cycles(&app, &m, &id).await.len(), 2);
    let r = post(&app, &m, &path("cancel"), json!({})).await;
    assert_eq!((r.status, r.code()), (409, "invalid_state"));
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("cancelled"));
    assert_eq!(
        get(&app, &m, &path("capabilities")).await.body["actions"],
        json!([])
    );
    let types = app.event_types(&m, &id).await;
    assert_eq!(
        types,
        [
            "subscription_active",
            "invoice_paid",
            "subscription_cancelled",
            "subscription_resumed",
            "subscription_paused",
            "subscription_resumed",
            "invoice_paid",
            "subscription_cancelled",
            "subscription_cancelled",
        ]
    );
}

#[actix_web::test]
async fn bad_subscriptions_name_their_field_and_others_are_404() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let (cid, mandate) = customer_with_mandate(&app, &m, "4242424242424242").await;
    let price = monthly(&app, &m, 700).await;
    let one_off = app
        .call(
            &m,
            Method::POST,
            "/products",
            Some(json!({"name": "Mug", "prices": [{"unit_amount": 5, "currency": "EUR"}]})),
        )
        .await
        .body["prices"][0]["price_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let yearly = app
        .call(&m, Method::POST, "/products", Some(json!({"name": "Y", "prices": [{"unit_amount": 5, "currency": "EUR", "recurring": {"interval": "year"}}]})))
        .await
        .body["prices"][0]["price_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let in_usd = app
        .call(&m, Method::POST, "/products", Some(json!({"name": "U", "prices": [{"unit_amount": 5, "currency": "USD", "recurring": {"interval": "month"}}]})))
        .await
        .body["prices"][0]["price_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let nobody = "cus_00000000000000000000000000000000";
    for (body, status, param) in [
        // Same interval, another currency: the sum of the items refuses it.
        (
            json!({"customer_id": cid, "mandate_id": mandate, "items": [{"price_id": price}, {"price_id": in_usd}]}),
            400,
            "items[1].price_id",
        ),
        // The request's own fields come before what it names.
        (
            json!({"customer_id": nobody, "mandate_id": mandate, "items": [{"price_id": price}], "term_cycles": 0}),
            400,
            "term_cycles",
        ),
        (
            json!({"customer_id": cid, "mandate_id": mandate, "items": []}),
            400,
            "items",
        ),
        (
            json!({"customer_id": cid, "mandate_id": mandate, "items": [{"price_id": one_off}]}),
            400,
            "items[0].price_id",
        ),
        (
            json!({"customer_id": cid, "mandate_id": mandate, "items": [{"price_id": price}, {"price_id": yearly}]}),
            400,
            "items[1].price_id",
        ),
        (
            json!({"customer_id": cid, "mandate_id": mandate, "items": [{"price_id": price, "quantity": 0}]}),
            400,
            "items[0].quantity",
        ),
        (
            json!({"customer_id": cid, "items": [{"price_id": price}]}),
            400,
            "mandate_id",
        ),
        (
            json!({"customer_id": "cus_00000000000000000000000000000000", "mandate_id": mandate, "items": [{"price_id": price}]}),
            404,
            "customer_id",
        ),
    ] {
        let r = post(&app, &m, "/subscriptions", body.clone()).await;
        assert_eq!(
            (r.status, r.param()),
            (status, Some(param)),
            "{body}: {}",
            r.body
        );
    }
    let s = subscribe(&app, &m, &cid, &mandate, &price).await;
    let id = s["subscription_id"].as_str().unwrap();
    let other = app.create_merchant("Other").await;
    for path in [
        format!("/subscriptions/{id}"),
        format!("/subscriptions/{id}/invoices"),
    ] {
        assert_eq!(get(&app, &other, &path).await.status, 404);
    }
    let r = post(
        &app,
        &other,
        &format!("/subscriptions/{id}/cancel"),
        json!({}),
    )
    .await;
    assert_eq!(r.status, 404);
    let list = get(&app, &m, "/subscriptions/list?status=active").await;
    assert_eq!(list.body["data"].as_array().unwrap().len(), 1);
    assert_eq!(
        get(&app, &other, "/subscriptions/list").await.body["data"],
        json!([])
    );
    let bad = get(&app, &m, "/subscriptions/list?status=late").await;
    assert_eq!((bad.status, bad.param()), (400, Some("status")));
}

/// A new customer (no saved method) and a monthly price of 9.00: the customer, the price and
/// the body of `POST /subscriptions/create` for them.
async fn checkout_body(app: &TestApp, m: &Merchant) -> (String, String, Value) {
    let c = app
        .call(m, Method::POST, "/customers", Some(json!({"name": "Bo"})))
        .await;
    let cid = c.body["customer_id"].as_str().unwrap().to_owned();
    let price = monthly(app, m, 900).await;
    let body = json!({"customer_id": cid, "items": [{"price_id": price}]});
    (cid, price, body)
}

/// Pays a payment on the hosted checkout with the test card, as the buyer would.
async fn pay_on_checkout(app: &TestApp, m: &Merchant, pid: &str) {
    let secret = get(app, m, &format!("/payments/{pid}")).await.body["client_secret"].clone();
    let paid = app
        .send(
            Method::POST,
            &format!("/checkout/{pid}/confirm"),
            None,
            Some(&json!({"client_secret": secret, "card": card("4242424242424242")["card"]})),
            &[],
        )
        .await;
    assert_eq!(paid.body["status"], "succeeded", "{}", paid.body);
}

/// `POST /subscriptions/create`: the buyer pays the first cycle on the hosted checkout (saving
/// the card under a mandate), or the merchant confirms with a saved method, or it expires.
#[actix_web::test]
async fn created_subscriptions_are_confirmed_on_the_checkout_or_by_the_merchant_or_expire() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let (cid, price, body) = checkout_body(&app, &m).await;

    // On the hosted checkout.
    let created = post(&app, &m, "/subscriptions/create", body.clone()).await;
    assert_eq!(created.status, 201, "{}", created.body);
    assert_eq!(
        (
            created.body["status"].as_str(),
            created.body["mandate_id"].as_str()
        ),
        (Some("created"), None)
    );
    let id = created.body["subscription_id"].as_str().unwrap().to_owned();
    let url = created.body["checkout_url"].as_str().unwrap();
    assert!(url.contains("/checkout/pay_"), "{url}");
    let first = cycles(&app, &m, &id).await;
    let pid = first[0]["payment_id"].as_str().unwrap().to_owned();
    pay_on_checkout(&app, &m, &pid).await;
    let now = app.clock.now();
    let s = until(&app, &m, &id, now + Duration::seconds(61), |s, _| {
        s["status"] == "active"
    })
    .await;
    assert!(s["mandate_id"].as_str().unwrap().starts_with("man_"), "{s}");
    assert_eq!(s["checkout_url"], Value::Null);
    let types = app.event_types(&m, &id).await;
    assert_eq!(
        types,
        [
            "subscription_created",
            "subscription_active",
            "invoice_paid"
        ]
    );
    // It renews off-session under the mandate the checkout saved.
    let end = time(&s["current_period_end"]);
    until(&app, &m, &id, end, |_, c| {
        c.len() == 2 && c[0]["status"] == "paid"
    })
    .await;

    // Confirmed by the merchant with a saved method: the checkout payment is cancelled.
    let mandate = save_card(&app, &m, &cid, "5555555555554444").await;
    let created = post(&app, &m, "/subscriptions/create", body.clone()).await;
    let id = created.body["subscription_id"].as_str().unwrap().to_owned();
    let checkout_payment = cycles(&app, &m, &id).await[0]["payment_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = post(
        &app,
        &m,
        &format!("/subscriptions/{id}/confirm"),
        json!({"mandate_id": mandate}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["status"], "active");
    assert_eq!(
        get(&app, &m, &format!("/payments/{checkout_payment}"))
            .await
            .body["status"],
        "cancelled"
    );
    let c = cycles(&app, &m, &id).await;
    assert_eq!(
        (c[0]["attempts"].as_i64(), c[0]["status"].as_str()),
        (Some(2), Some("paid"))
    );
    assert_ne!(c[0]["payment_id"], checkout_payment.as_str());
    let again = post(
        &app,
        &m,
        &format!("/subscriptions/{id}/confirm"),
        json!({"mandate_id": mandate}),
    )
    .await;
    assert_eq!((again.status, again.code()), (409, "invalid_state"));
    let bad = post(
        &app,
        &m,
        "/subscriptions/create",
        json!({"customer_id": cid, "mandate_id": mandate, "items": [{"price_id": price}]}),
    )
    .await;
    assert_eq!((bad.status, bad.param()), (400, Some("mandate_id")));

    // Nobody pays: it expires.
    let created = post(&app, &m, "/subscriptions/create", body).await;
    let id = created.body["subscription_id"].as_str().unwrap().to_owned();
    let now = app.clock.now();
    let s = until(&app, &m, &id, now + Duration::hours(25), |s, _| {
        s["status"] == "in_active"
    })
    .await;
    assert_eq!(s["cancel_at_period_end"], false);
    assert_eq!(cycles(&app, &m, &id).await[0]["status"], "void");
    assert_eq!(
        app.event_types(&m, &id).await,
        ["subscription_created", "subscription_expired"]
    );
}

/// A checkout paid just before the deadline for the first payment: the tick at the deadline
/// finds the payment succeeded and settles the subscription `active`. It must never void a
/// cycle the buyer paid and expire the subscription.
#[actix_web::test]
async fn a_first_payment_made_just_before_the_deadline_is_settled_not_voided() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let (_, _, body) = checkout_body(&app, &m).await;
    let created = post(&app, &m, "/subscriptions/create", body).await;
    assert_eq!(created.status, 201, "{}", created.body);
    let id = created.body["subscription_id"].as_str().unwrap().to_owned();
    let pid = cycles(&app, &m, &id).await[0]["payment_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let start = app.clock.now();
    app.clock
        .set(start + Duration::hours(24) - Duration::seconds(10));
    pay_on_checkout(&app, &m, &pid).await;
    // One step well past the deadline: the tick there is the first to look at the payment.
    let s = until(&app, &m, &id, start + Duration::hours(30), |s, c| {
        s["status"] != "created" && c[0]["status"] != "open"
    })
    .await;
    assert_eq!(s["status"], "active", "{s}");
    let c = cycles(&app, &m, &id).await;
    assert_eq!(
        (c[0]["status"].as_str(), c[0]["payment_id"].as_str()),
        (Some("paid"), Some(pid.as_str()))
    );
    assert_eq!(
        app.event_types(&m, &id).await,
        [
            "subscription_created",
            "subscription_active",
            "invoice_paid"
        ]
    );
}

/// `amount × remaining / total`, rounded half up: the documented rule, computed here on its own.
fn prorate(amount: i64, remaining: i64, total: i64) -> i64 {
    (amount * remaining * 2 + total) / (2 * total)
}

#[actix_web::test]
async fn plan_changes_prorate_to_the_minor_unit_in_each_mode() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let (cid, mandate) = customer_with_mandate(&app, &m, "4242424242424242").await;
    let small = monthly(&app, &m, 3000).await;
    let big = monthly(&app, &m, 4500).await;
    let change = |id: &str, price: &str, proration: &str| {
        let body = json!({"items": [{"price_id": price}], "proration": proration});
        let path = format!("/subscriptions/{id}/update");
        let key = m.secret_key.clone();
        let app = &app;
        async move {
            app.send(Method::PUT, &path, Some(&key), Some(&body), &[])
                .await
        }
    };
    let one = |price: &str| {
        let (cid, mandate, price) = (cid.clone(), mandate.clone(), price.to_owned());
        let app = &app;
        let m = &m;
        async move {
            let r = post(
                app,
                m,
                "/subscriptions",
                json!({"customer_id": cid, "mandate_id": mandate,
                "items": [{"price_id": price}]}),
            )
            .await;
            assert_eq!(r.status, 201, "{}", r.body);
            r.body
        }
    };

    // create_prorations: a third of the period left; the difference goes to the renewal.
    let s = one(&small).await;
    let id = s["subscription_id"].as_str().unwrap().to_owned();
    let (start, end) = (
        time(&s["current_period_start"]),
        time(&s["current_period_end"]),
    );
    let total = (end - start).num_seconds();
    let at = end - Duration::seconds(total / 3);
    app.clock.set(at);
    let remaining = (end - at).num_seconds();
    let owed = prorate(4500, remaining, total) - prorate(3000, remaining, total);
    // The estimate of the change is what the change then does.
    let est = get(
        &app,
        &m,
        &format!("/subscriptions/estimate?subscription_id={id}&price_id={big}"),
    )
    .await;
    assert_eq!(est.status, 200, "{}", est.body);
    assert_eq!(
        (est.body["proration"].as_i64(), est.body["amount"].as_i64()),
        (Some(owed), Some(4500 + owed))
    );
    let r = change(&id, &big, "create_prorations").await;
    assert_eq!(r.status, 200, "{}", r.body);
    let after = get(
        &app,
        &m,
        &format!("/subscriptions/estimate?subscription_id={id}"),
    )
    .await;
    assert_eq!(after.body["amount"], est.body["amount"]);
    assert_eq!(
        (
            r.body["amount"].as_i64(),
            r.body["pending_adjustment"].as_i64()
        ),
        (Some(4500), Some(owed))
    );
    let renewed = until(&app, &m, &id, end, |_, c| {
        c.len() == 2 && c[0]["status"] == "paid"
    })
    .await;
    assert_eq!(renewed["pending_adjustment"], 0);
    let c = cycles(&app, &m, &id).await;
    assert_eq!(
        c[0]["amount"],
        4500 + owed,
        "the renewal adds the proration exactly"
    );
    let pay = get(
        &app,
        &m,
        &format!("/payments/{}", c[0]["payment_id"].as_str().unwrap()),
    )
    .await;
    assert_eq!(pay.body["amount"], 4500 + owed);

    // always_invoice: charged now, as a cycle of its own for the rest of the period.
    let s = one(&small).await;
    let id = s["subscription_id"].as_str().unwrap().to_owned();
    let (start, end) = (
        time(&s["current_period_start"]),
        time(&s["current_period_end"]),
    );
    let total = (end - start).num_seconds();
    let at = start + Duration::seconds(total / 7);
    app.clock.set(at);
    let remaining = (end - at).num_seconds();
    let owed = prorate(4500, remaining, total) - prorate(3000, remaining, total);
    let r = change(&id, &big, "always_invoice").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["pending_adjustment"], 0);
    let c = cycles(&app, &m, &id).await;
    assert_eq!(
        (c.len(), c[0]["amount"].as_i64(), c[0]["status"].as_str()),
        (2, Some(owed), Some("paid"))
    );
    assert_eq!(time(&c[0]["period_start"]), at);
    // And back down: the credit goes to the next renewal.
    let credit = prorate(3000, remaining, total) - prorate(4500, remaining, total);
    let r = change(&id, &small, "always_invoice").await;
    assert_eq!(r.body["pending_adjustment"], credit, "{}", r.body);
    until(&app, &m, &id, end, |_, c| {
        c.len() == 3 && c[0]["status"] == "paid"
    })
    .await;
    assert_eq!(cycles(&app, &m, &id).await[0]["amount"], 3000 + credit);

    // none: the rest of the period is left as it is; the renewal charges the new plan.
    let s = one(&small).await;
    let id = s["subscription_id"].as_str().unwrap().to_owned();
    let end = time(&s["current_period_end"]);
    app.clock.set(end - Duration::days(3));
    let r = change(&id, &big, "none").await;
    assert_eq!(
        (
            r.body["amount"].as_i64(),
            r.body["pending_adjustment"].as_i64()
        ),
        (Some(4500), Some(0))
    );
    until(&app, &m, &id, end, |_, c| {
        c.len() == 2 && c[0]["status"] == "paid"
    })
    .await;
    assert_eq!(cycles(&app, &m, &id).await[0]["amount"], 4500);

    // Refusals.
    let r = change(&id, &big, "sometimes").await;
    assert_eq!((r.status, r.param()), (400, Some("proration")));
    let yearly = app
        .call(&m, Method::POST, "/products", Some(json!({"name": "Y", "prices": [{"unit_amount": 5, "currency": "EUR", "recurring": {"interval": "year"}}]})))
        .await
        .body["prices"][0]["price_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = change(&id, &yearly, "none").await;
    assert_eq!((r.status, r.param()), (400, Some("items")), "{}", r.body);
    post(&app, &m, &format!("/subscriptions/{id}/pause"), json!({})).await;
    let r = change(&id, &small, "none").await;
    assert_eq!((r.status, r.code()), (409, "invalid_state"));
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("paused"));
}

/// Renewals and the ticks that settle charges in flight racing each other (on two instances
/// in CI's two-instance step): every cycle is charged by exactly one payment.
#[actix_web::test]
async fn racing_renewals_charge_each_cycle_once() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let (cid, mandate) = customer_with_mandate(&app, &m, "4242424242424242").await;
    let price = monthly(&app, &m, 1000).await;
    let mut ids = Vec::new();
    for _ in 0..6 {
        let s = subscribe(&app, &m, &cid, &mandate, &price).await;
        ids.push(s["subscription_id"].as_str().unwrap().to_owned());
    }
    let first = get(&app, &m, &format!("/subscriptions/{}", ids[0]))
        .await
        .body;
    let end = time(&first["current_period_end"]) + Duration::seconds(5);
    // Due, and at once past the minute after which a charge in flight is settled by a tick.
    app.clock.set(end);
    for _ in 0..3 {
        actix_web::rt::time::sleep(StdDuration::from_millis(30)).await;
        app.clock.advance(Duration::seconds(90));
    }
    // Time goes on: a charge still in flight when a tick looked is looked at again a minute
    // later.
    let deadline = Instant::now() + StdDuration::from_secs(15);
    for id in &ids {
        loop {
            let c = cycles(&app, &m, id).await;
            if c.len() == 2 && c.iter().all(|c| c["status"] == "paid") {
                break;
            }
            assert!(Instant::now() < deadline, "never renewed: {c:?}");
            app.clock.advance(Duration::seconds(61));
            actix_web::rt::time::sleep(StdDuration::from_millis(100)).await;
        }
    }
    // Whatever is still due runs before the count: a late second charge would be in it.
    app.run_due_jobs().await;
    let listed = post(
        &app,
        &m,
        "/payments/list",
        json!({"customer_id": cid, "limit": 100}),
    )
    .await;
    for id in &ids {
        let made = listed.body["data"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|p| p["metadata"]["subscription_id"] == id.as_str())
            .count();
        assert_eq!(made, 2, "{id}: one payment per cycle");
    }
}

/// Moves `m`'s sandbox test clock `seconds` forward.
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

#[actix_web::test]
async fn the_test_clock_renews_a_year_in_one_advance_for_its_merchant_only() {
    let app = spawn_app().await;
    let (a, b) = (
        app.create_merchant("Acme").await,
        app.create_merchant("Other").await,
    );
    let mut subs = Vec::new();
    for m in [&a, &b] {
        let (cid, mandate) = customer_with_mandate(&app, m, "4242424242424242").await;
        let price = monthly(&app, m, 1500).await;
        subs.push(subscribe(&app, m, &cid, &mandate, &price).await);
    }
    let (sa, sb) = (&subs[0], &subs[1]);
    let id = sa["subscription_id"].as_str().unwrap();

    for (body, param) in [
        (json!({"seconds": 0}), "seconds"),
        (json!({"seconds": -5}), "seconds"),
        (json!({"seconds": "soon"}), "seconds"),
        // Ten years of 365 days, as documented, and not a second more.
        (json!({"seconds": 315_360_001}), "seconds"),
        (json!({}), "seconds"),
    ] {
        let r = post(&app, &a, "/sandbox/clock/advance", body.clone()).await;
        assert_eq!(
            (r.status, r.param()),
            (400, Some(param)),
            "{body}: {}",
            r.body
        );
    }
    let at_start = get(&app, &a, "/sandbox/clock").await.body;
    assert_eq!(at_start["offset_seconds"], 0);
    assert_eq!(time(&at_start["now"]), app.clock.now());

    // A year and an hour in one call: twelve renewals, each at its own time.
    let year = 365 * 86_400 + 3_600;
    let moved = advance(&app, &a, year).await;
    assert_eq!(moved["offset_seconds"], year, "{moved}");
    // (The background schedulers may run some of them too: of this one and of another
    // instance.)
    assert!(moved["jobs_run"].as_u64().unwrap() > 0, "{moved}");
    assert_eq!(
        time(&moved["now"]),
        app.clock.now() + Duration::seconds(year)
    );
    let read = get(&app, &a, "/sandbox/clock").await.body;
    assert_eq!(read["offset_seconds"], year);

    let all = cycles(&app, &a, id).await;
    assert_eq!(all.len(), 13, "{all:?}");
    assert!(all.iter().all(|c| c["status"] == "paid"), "{all:?}");
    for c in &all[..12] {
        // A renewal's payment was made at its period's start, on the merchant's clock.
        let p = get(
            &app,
            &a,
            &format!("/payments/{}", c["payment_id"].as_str().unwrap()),
        )
        .await;
        assert_eq!(p.body["status"], "succeeded", "{}", p.body);
        let late = time(&p.body["created"]) - time(&c["period_start"]);
        assert!(
            late >= Duration::zero() && late < Duration::seconds(2),
            "cycle {} paid {late} after its start",
            c["cycle_id"]
        );
    }
    let now_a = get(&app, &a, &format!("/subscriptions/{id}")).await.body;
    assert_eq!(
        time(&now_a["current_period_start"]),
        time(&all[0]["period_start"])
    );
    let events = post(
        &app,
        &a,
        &format!("/events/{}", a.merchant_id),
        json!({"object_id": id, "limit": 100}),
    )
    .await;
    let mut events = events.body["data"].as_array().unwrap().clone();
    events.reverse();
    let types: Vec<&str> = events
        .iter()
        .map(|e| e["event_type"].as_str().unwrap())
        .collect();
    assert_eq!(types[0], "subscription_active");
    assert_eq!(types[1..], ["invoice_paid"; 13], "{types:?}");
    assert!(
        events
            .windows(2)
            .skip(1)
            .all(|w| time(&w[1]["created"]) - time(&w[0]["created"]) > Duration::days(27)),
        "each renewal announced a month after the last"
    );

    // The other merchant's time and subscription did not move.
    let other = get(&app, &b, "/sandbox/clock").await.body;
    assert_eq!(other["offset_seconds"], 0);
    let sb_id = sb["subscription_id"].as_str().unwrap();
    assert_eq!(cycles(&app, &b, sb_id).await.len(), 1);
    let sb_now = get(&app, &b, &format!("/subscriptions/{sb_id}")).await.body;
    assert_eq!(sb_now["current_period_end"], sb["current_period_end"]);

    // A second advance goes on from where the first stopped: one more renewal.
    advance(&app, &a, 31 * 86_400).await;
    assert_eq!(cycles(&app, &a, id).await.len(), 14);
}

#[actix_web::test]
async fn a_fixed_term_ends_in_active_after_its_last_period() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let (cid, mandate) = customer_with_mandate(&app, &m, "4242424242424242").await;
    let price = monthly(&app, &m, 1000).await;
    for bad in [json!(0), json!(1001), json!("three")] {
        let r = post(
            &app,
            &m,
            "/subscriptions",
            json!({"customer_id": cid, "mandate_id": mandate, "term_cycles": bad,
                "items": [{"price_id": price}]}),
        )
        .await;
        assert_eq!(
            (r.status, r.param()),
            (400, Some("term_cycles")),
            "{bad}: {}",
            r.body
        );
    }
    let r = post(
        &app,
        &m,
        "/subscriptions",
        json!({"customer_id": cid, "mandate_id": mandate, "term_cycles": 3,
            "items": [{"price_id": price}]}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["term_cycles"], 3);
    let id = r.body["subscription_id"].as_str().unwrap().to_owned();
    advance(&app, &m, 62 * 86_400).await;
    let s = get(&app, &m, &format!("/subscriptions/{id}")).await.body;
    assert_eq!(
        s["status"], "active",
        "two months in: its third period runs"
    );
    advance(&app, &m, 31 * 86_400).await;
    let s = get(&app, &m, &format!("/subscriptions/{id}")).await.body;
    assert_eq!(s["status"], "in_active", "{s}");
    let all = cycles(&app, &m, &id).await;
    assert_eq!(all.len(), 3, "three periods, three cycles: {all:?}");
    let types = app.event_types(&m, &id).await;
    assert_eq!(
        types,
        [
            "subscription_active",
            "invoice_paid",
            "invoice_paid",
            "invoice_paid",
            "subscription_expired"
        ]
    );
}

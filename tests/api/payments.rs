//! Payments through the HTTP API: every transition, every test card, refusals, lines,
//! listing, browser access, routing, expiry across a restart, and concurrent captures.

use crate::common;

use std::sync::Arc;

use actix_web::http::Method;
use chrono::Duration;
use common::{card, spawn_app, spawn_with_clock, Merchant, TestApp, TestDb};
use serde_json::{json, Value};

async fn pay(app: &TestApp, m: &Merchant, number: &str, extra: Value) -> Value {
    let mut body = json!({"amount": 500, "currency": "USD", "confirm": true, "payment_method_data": card(number)});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let res = app.create_payment(m, body).await;
    assert_eq!(res.status, 201, "{}", res.body);
    res.body
}

async fn post(app: &TestApp, m: &Merchant, path: &str, body: Value) -> common::Answer {
    app.call(m, Method::POST, path, Some(body)).await
}

async fn get(app: &TestApp, m: &Merchant, path: &str) -> common::Answer {
    app.call(m, Method::GET, path, None).await
}

fn statuses(history: &Value) -> Vec<String> {
    history["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["to"].as_str().unwrap().to_owned())
        .collect()
}

#[actix_web::test]
async fn automatic_capture_succeeds_with_attempt_and_history() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let created = app
        .create_payment(&m, json!({"amount": 1234, "currency": "eur", "metadata": {"order": "A-1"}, "description": "Tea"}))
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let p = &created.body;
    assert_eq!(
        (
            p["status"].as_str(),
            p["currency"].as_str(),
            p["test_mode"].as_bool()
        ),
        (Some("requires_payment_method"), Some("EUR"), Some(true))
    );
    assert!(p["payment_id"].as_str().unwrap().starts_with("pay_"));
    assert!(p["client_secret"].as_str().unwrap().contains("_secret_"));
    let id = p["payment_id"].as_str().unwrap();

    let confirmed = post(
        &app,
        &m,
        &format!("/payments/{id}/confirm"),
        json!({"payment_method_data": card("4242424242424242")}),
    )
    .await;
    assert_eq!(confirmed.status, 200, "{}", confirmed.body);
    let p = &confirmed.body;
    assert_eq!(p["status"], "succeeded");
    assert_eq!(
        (
            p["amount_captured"].as_i64(),
            p["amount_capturable"].as_i64()
        ),
        (Some(1234), Some(0))
    );
    assert_eq!(
        p["payment_method"],
        json!({"brand": "visa", "last4": "4242", "exp_month": 12, "exp_year": 2035})
    );
    assert_eq!(p["metadata"], json!({"order": "A-1"}));
    assert!(
        !confirmed.raw.windows(16).any(|w| w == b"4242424242424242"),
        "no card number in answers"
    );

    let attempts = get(&app, &m, &format!("/payments/{id}/attempts")).await;
    assert_eq!(attempts.body["data"].as_array().unwrap().len(), 1);
    assert_eq!(attempts.body["data"][0]["status"], "captured");
    assert_eq!(attempts.body["data"][0]["processor"], "sandbox");
    let history = get(&app, &m, &format!("/payments/{id}/status-history")).await;
    assert_eq!(
        statuses(&history.body),
        ["requires_payment_method", "succeeded"]
    );
    assert_eq!(history.body["data"][1]["trigger"], "confirm");

    let again = post(&app, &m, &format!("/payments/{id}/confirm"), json!({})).await;
    assert_eq!((again.status, again.code()), (409, "invalid_state"));
    assert!(again.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("succeeded"));
}

#[actix_web::test]
async fn manual_capture_in_parts_then_the_rest() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let p = pay(
        &app,
        &m,
        "5555555555554444",
        json!({"capture_method": "manual"}),
    )
    .await;
    assert_eq!(
        (p["status"].as_str(), p["amount_capturable"].as_i64()),
        (Some("requires_capture"), Some(500))
    );
    assert!(p["capture_before"].is_string());
    let id = p["payment_id"].as_str().unwrap();
    let path = format!("/payments/{id}/capture");
    let cap = |body: Value| post(&app, &m, &path, body);

    let r = cap(json!({"amount": 100, "final_capture": false})).await;
    assert_eq!(
        (
            r.body["status"].as_str(),
            r.body["amount_captured"].as_i64()
        ),
        (Some("partially_captured_and_capturable"), Some(100))
    );
    let r = cap(json!({"amount": 401})).await;
    assert_eq!(
        (r.status, r.code(), r.param()),
        (400, "amount_exceeds_capturable", Some("amount"))
    );
    let r = cap(json!({"amount": 0})).await;
    assert_eq!((r.status, r.param()), (400, Some("amount")));
    let r = cap(json!({"amount": 150, "final_capture": false})).await;
    assert_eq!(r.body["amount_captured"], 250);
    let r = cap(json!({})).await;
    assert_eq!(
        (
            r.body["status"].as_str(),
            r.body["amount_captured"].as_i64()
        ),
        (Some("succeeded"), Some(500))
    );
    let r = cap(json!({})).await;
    assert_eq!((r.status, r.code()), (409, "invalid_state"));
    let history = get(&app, &m, &format!("/payments/{id}/status-history")).await;
    assert_eq!(
        statuses(&history.body),
        [
            "requires_confirmation",
            "requires_capture",
            "partially_captured_and_capturable",
            "succeeded"
        ]
    );
}

#[actix_web::test]
async fn final_partial_capture_and_cancels() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let manual = json!({"capture_method": "manual"});

    let p = pay(&app, &m, "4242424242424242", manual.clone()).await;
    let id = p["payment_id"].as_str().unwrap();
    let r = post(
        &app,
        &m,
        &format!("/payments/{id}/capture"),
        json!({"amount": 200}),
    )
    .await;
    assert_eq!(
        (
            r.body["status"].as_str(),
            r.body["amount_capturable"].as_i64()
        ),
        (Some("partially_captured"), Some(0))
    );
    let r = post(
        &app,
        &m,
        &format!("/payments/{id}/capture"),
        json!({"amount": 1}),
    )
    .await;
    assert_eq!(r.code(), "invalid_state");

    // Cancel before capture.
    let p = pay(&app, &m, "4242424242424242", manual.clone()).await;
    let r = post(
        &app,
        &m,
        &format!("/payments/{}/cancel", p["payment_id"].as_str().unwrap()),
        json!({"reason": "out of stock"}),
    )
    .await;
    assert_eq!(r.body["status"], "cancelled");
    // Cancel an unconfirmed payment.
    let draft = app
        .create_payment(&m, json!({"amount": 10, "currency": "USD"}))
        .await;
    let r = post(
        &app,
        &m,
        &format!(
            "/payments/{}/cancel",
            draft.body["payment_id"].as_str().unwrap()
        ),
        json!({}),
    )
    .await;
    assert_eq!(r.body["status"], "cancelled");
    let r = post(
        &app,
        &m,
        &format!(
            "/payments/{}/confirm",
            draft.body["payment_id"].as_str().unwrap()
        ),
        json!({"payment_method_data": card("4242424242424242")}),
    )
    .await;
    assert_eq!(r.code(), "invalid_state");

    // Release the rest after a partial capture.
    let p = pay(&app, &m, "4242424242424242", manual.clone()).await;
    let id = p["payment_id"].as_str().unwrap();
    post(
        &app,
        &m,
        &format!("/payments/{id}/capture"),
        json!({"amount": 100, "final_capture": false}),
    )
    .await;
    let r = post(&app, &m, &format!("/payments/{id}/cancel"), json!({})).await;
    assert_eq!(
        (
            r.body["status"].as_str(),
            r.body["amount_captured"].as_i64()
        ),
        (Some("partially_captured"), Some(100))
    );

    // Inside the void window, then after it.
    let p = pay(&app, &m, "4242424242424242", json!({})).await;
    let r = post(
        &app,
        &m,
        &format!("/payments/{}/cancel", p["payment_id"].as_str().unwrap()),
        json!({}),
    )
    .await;
    assert_eq!(r.body["status"], "cancelled_post_capture");
    let p = pay(&app, &m, "4242424242424242", json!({})).await;
    app.clock.advance(Duration::minutes(31));
    let r = post(
        &app,
        &m,
        &format!("/payments/{}/cancel", p["payment_id"].as_str().unwrap()),
        json!({}),
    )
    .await;
    assert_eq!((r.status, r.code()), (409, "invalid_state"));
    assert!(
        r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("30 minutes"),
        "{}",
        r.body
    );

    // Inside the window, but with a refund: the refund is the reason, and it is named.
    let p = pay(&app, &m, "4242424242424242", json!({})).await;
    let id = p["payment_id"].as_str().unwrap();
    let r = post(
        &app,
        &m,
        "/refunds",
        json!({"payment_id": id, "amount": 100}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let r = post(&app, &m, &format!("/payments/{id}/cancel"), json!({})).await;
    assert_eq!((r.status, r.code()), (409, "refund_exists"), "{}", r.body);
}

/// Amounts have a ceiling (`limits.max_amount`), and a card's CVC length is its brand's: 4
/// digits for American Express, 3 for the others. Each refusal is a 400 naming the field.
#[actix_web::test]
async fn amount_ceiling_and_cvc_length_by_brand() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let with = |amount: i64, number: &str, cvc: &str| {
        let mut body = json!({"amount": amount, "currency": "USD", "confirm": true,
            "payment_method_data": card(number)});
        body["payment_method_data"]["card"]["cvc"] = json!(cvc);
        body
    };
    let r = app
        .create_payment(&m, with(i64::MAX, "4242424242424242", "123"))
        .await;
    assert_eq!(
        (r.status, r.code(), r.body["error"]["param"].as_str()),
        (400, "amount_too_large", Some("amount")),
        "{}",
        r.body
    );
    let r = app
        .create_payment(&m, with(99_999_999_999, "4242424242424242", "123"))
        .await;
    assert_eq!(r.status, 201, "the ceiling itself is allowed: {}", r.body);

    for (number, cvc, accepted) in [
        ("378282246310005", "1234", true),
        ("378282246310005", "123", false),
        ("4242424242424242", "1234", false),
    ] {
        let r = app.create_payment(&m, with(500, number, cvc)).await;
        if accepted {
            assert_eq!(r.status, 201, "{number} {cvc}: {}", r.body);
            continue;
        }
        assert_eq!(
            (r.status, r.code(), r.body["error"]["param"].as_str()),
            (400, "invalid_cvc", Some("payment_method_data.card.cvc")),
            "{number} {cvc}: {}",
            r.body
        );
        let message = r.body["error"]["message"].as_str().unwrap();
        let digits = if number.starts_with('3') {
            "4 digits"
        } else {
            "3 digits"
        };
        assert!(message.contains(digits), "{message}");
    }
}

#[actix_web::test]
async fn declines_retry_with_another_card_and_fail_after_three() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let p = pay(&app, &m, "4000000000000002", json!({})).await;
    assert_eq!(p["status"], "declined");
    assert_eq!(p["last_error"]["code"], "card_declined");
    let id = p["payment_id"].as_str().unwrap().to_owned();
    let r = post(
        &app,
        &m,
        &format!("/payments/{id}/confirm"),
        json!({"payment_method_data": card("4000000000009995")}),
    )
    .await;
    assert_eq!(
        (
            r.body["status"].as_str(),
            r.body["last_error"]["code"].as_str()
        ),
        (Some("declined"), Some("insufficient_funds"))
    );
    let r = post(
        &app,
        &m,
        &format!("/payments/{id}/confirm"),
        json!({"payment_method_data": card("4242424242424242")}),
    )
    .await;
    assert_eq!(r.body["status"], "succeeded");
    assert_eq!(r.body["last_error"], Value::Null);
    let attempts = get(&app, &m, &format!("/payments/{id}/attempts")).await;
    let numbers: Vec<i64> = attempts.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["number"].as_i64().unwrap())
        .collect();
    assert_eq!(numbers, [1, 2, 3]);
    assert_eq!(attempts.body["data"][0]["error"]["code"], "card_declined");

    let p = pay(&app, &m, "4000000000000002", json!({})).await;
    let id = p["payment_id"].as_str().unwrap().to_owned();
    post(&app, &m, &format!("/payments/{id}/confirm"), json!({})).await;
    let r = post(&app, &m, &format!("/payments/{id}/confirm"), json!({})).await;
    assert_eq!(r.body["status"], "failed", "the third decline is final");

    let p = pay(&app, &m, "4000000000009979", json!({})).await;
    assert_eq!(
        (p["status"].as_str(), p["last_error"]["code"].as_str()),
        (Some("failed"), Some("stolen_card"))
    );
    let p = pay(&app, &m, "4000000000000341", json!({})).await;
    assert_eq!(p["status"], "declined");
}

#[actix_web::test]
async fn other_approving_test_cards() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    for number in [
        "4000000000000259",
        "4000000000005126",
        "4111111111111111",
        "378282246310005",
    ] {
        let mut body = json!({"amount": 500, "currency": "USD", "confirm": true, "payment_method_data": card(number)});
        if number.starts_with('3') {
            body["payment_method_data"]["card"]["cvc"] = json!("1234");
        }
        let p = app.create_payment(&m, body).await;
        assert_eq!(p.body["status"], "succeeded", "{number}: {}", p.body);
    }
}

/// The hosted checkout shows whom the buyer pays (the shop's name) and for what (the
/// payment's description), escaped.
#[actix_web::test]
async fn the_checkout_page_names_the_shop_and_the_description() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let r = app
        .create_payment(
            &m,
            json!({"amount": 1250, "currency": "EUR", "hosted_checkout": true,
                "description": "Two <b>mugs</b>"}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let url = r.body["checkout_url"].as_str().unwrap();
    let path = &url[url.find("/checkout/").unwrap()..];
    let page = app.send(Method::GET, path, None, None, &[]).await;
    let text = String::from_utf8_lossy(&page.raw);
    assert_eq!(page.status, 200);
    assert!(
        text.contains("<span id=\"shop-name\">Default shop</span>"),
        "{text}"
    );
    assert!(
        text.contains("<p id=\"description\">Two &#60;b&#62;mugs&#60;/b&#62;</p>"),
        "{text}"
    );
    assert!(!text.contains("<b>"), "{text}");
}

#[actix_web::test]
async fn three_d_secure_challenge_approved_or_failed() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let p = pay(
        &app,
        &m,
        "4000000000003220",
        json!({"hosted_checkout": true}),
    )
    .await;
    assert_eq!(p["status"], "requires_customer_action");
    let id = p["payment_id"].as_str().unwrap();
    let secret = p["client_secret"].as_str().unwrap();
    let checkout_url = p["checkout_url"].as_str().unwrap();
    assert!(
        checkout_url.starts_with("http://127.0.0.1:"),
        "{checkout_url}"
    );
    assert!(
        checkout_url.contains(&format!("/checkout/{id}?client_secret=")),
        "{checkout_url}"
    );
    let status = app
        .send(
            Method::GET,
            &format!("/checkout/{id}/status?client_secret={secret}"),
            None,
            None,
            &[],
        )
        .await;
    assert!(status.body["next_action_url"]
        .as_str()
        .unwrap()
        .contains("/challenge"));
    let page = app
        .send(
            Method::GET,
            &format!("/checkout/{id}/challenge?client_secret={secret}"),
            None,
            None,
            &[],
        )
        .await;
    assert_eq!(page.status, 200);
    assert!(String::from_utf8_lossy(&page.raw).contains("id=\"approve\""));

    let wrong = app
        .send(
            Method::POST,
            &format!("/checkout/{id}/challenge"),
            None,
            Some(&json!({"client_secret": "pay_secret_nope", "result": "approve"})),
            &[],
        )
        .await;
    assert_eq!(wrong.status, 404);
    let r = app
        .send(
            Method::POST,
            &format!("/checkout/{id}/challenge"),
            None,
            Some(&json!({"client_secret": secret, "result": "approve"})),
            &[],
        )
        .await;
    assert_eq!(r.body["status"], "succeeded", "{}", r.body);
    let done = app
        .call(&m, Method::GET, &format!("/payments/{id}"), None)
        .await;
    assert_eq!(done.body["next_action"], Value::Null, "nothing left to do");

    // Confirmed through the server API (no hosted checkout): `next_action` says where the
    // buyer goes.
    let p = pay(&app, &m, "4000000000003220", json!({})).await;
    let (id, secret) = (
        p["payment_id"].as_str().unwrap(),
        p["client_secret"].as_str().unwrap(),
    );
    assert_eq!(p["checkout_url"], Value::Null);
    assert_eq!(p["next_action"]["type"], "redirect_to_url", "{p}");
    let url = p["next_action"]["redirect_to_url"]["url"].as_str().unwrap();
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    let challenge = url.split_once("127.0.0.1:").unwrap().1;
    let path = &challenge[challenge.find('/').unwrap()..];
    assert_eq!(
        path,
        format!("/checkout/{id}/challenge?client_secret={secret}")
    );
    let page = app.send(Method::GET, path, None, None, &[]).await;
    assert_eq!(page.status, 200, "the URL opens the challenge");
    let r = app
        .send(
            Method::POST,
            &format!("/checkout/{id}/challenge"),
            None,
            Some(&json!({"client_secret": secret, "result": "reject"})),
            &[],
        )
        .await;
    assert_eq!(
        (
            r.body["status"].as_str(),
            r.body["last_error"]["code"].as_str()
        ),
        (Some("declined"), Some("authentication_failed"))
    );
    // The challenge page of a payment that no longer waits for it offers no answers.
    let page = app.send(Method::GET, path, None, None, &[]).await;
    let text = String::from_utf8_lossy(&page.raw);
    assert_eq!(page.status, 200);
    assert!(!text.contains("id=\"approve\""), "{text}");
    assert!(text.contains("it is declined"), "{text}");
    let r = app
        .send(
            Method::POST,
            &format!("/checkout/{id}/confirm"),
            None,
            Some(&json!({"client_secret": secret, "card": card("4242424242424242")["card"]})),
            &[],
        )
        .await;
    assert_eq!(r.body["status"], "succeeded");
}

#[actix_web::test]
async fn partial_authorization() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let p = pay(
        &app,
        &m,
        "4000000000000093",
        json!({"enable_partial_authorization": true}),
    )
    .await;
    assert_eq!(p["status"], "partially_authorized_and_requires_capture");
    assert_eq!(
        (
            p["amount_authorized"].as_i64(),
            p["amount_capturable"].as_i64()
        ),
        (Some(250), Some(250))
    );
    let id = p["payment_id"].as_str().unwrap();
    let r = post(
        &app,
        &m,
        &format!("/payments/{id}/capture"),
        json!({"amount": 300}),
    )
    .await;
    assert_eq!(r.code(), "amount_exceeds_capturable");
    let r = post(&app, &m, &format!("/payments/{id}/capture"), json!({})).await;
    assert_eq!(
        (
            r.body["status"].as_str(),
            r.body["amount_captured"].as_i64()
        ),
        (Some("partially_captured"), Some(250))
    );
    let p = pay(&app, &m, "4000000000000093", json!({})).await;
    assert_eq!(p["status"], "declined");
}

#[actix_web::test]
async fn pending_payments_settle_through_sync_or_the_scheduler() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    // Asynchronous: processing until the delay has passed.
    let p = pay(&app, &m, "4000000000000119", json!({})).await;
    assert_eq!(p["status"], "processing");
    let id = p["payment_id"].as_str().unwrap().to_owned();
    let r = get(&app, &m, &format!("/payments/{id}?force_sync=true")).await;
    assert_eq!(r.body["status"], "processing");
    app.clock.advance(Duration::seconds(6));
    let settled = app
        .wait_for_payment(&m, &id, |p| p["status"] != "processing")
        .await;
    assert_eq!(settled["status"], "succeeded", "the settle job ran");

    // Timeout: the outcome is unknown until a sync reveals it.
    let p = pay(
        &app,
        &m,
        "4000000000000127",
        json!({"capture_method": "manual"}),
    )
    .await;
    assert_eq!(p["status"], "processing");
    let r = get(
        &app,
        &m,
        &format!(
            "/payments/{}?force_sync=true",
            p["payment_id"].as_str().unwrap()
        ),
    )
    .await;
    assert_eq!(r.body["status"], "requires_capture");

    // Manual review.
    let p = pay(&app, &m, "4000000000000101", json!({})).await;
    assert_eq!(p["status"], "requires_merchant_action");
    let id = p["payment_id"].as_str().unwrap().to_owned();
    app.clock.advance(Duration::seconds(6));
    let r = get(&app, &m, &format!("/payments/{id}?force_sync=true")).await;
    assert_eq!(r.body["status"], "succeeded");

    // The processor contradicts us.
    let p = pay(&app, &m, "4000000000000036", json!({})).await;
    let r = get(
        &app,
        &m,
        &format!(
            "/payments/{}?force_sync=true",
            p["payment_id"].as_str().unwrap()
        ),
    )
    .await;
    assert_eq!(r.body["status"], "conflicted");
    let r = post(
        &app,
        &m,
        &format!("/payments/{}/capture", p["payment_id"].as_str().unwrap()),
        json!({}),
    )
    .await;
    assert_eq!(r.code(), "invalid_state");
}

#[actix_web::test]
async fn unconfirmed_and_uncaptured_payments_expire_even_across_a_restart() {
    let db = Arc::new(TestDb::new().await);
    let clock = payd::clock::ManualClock::new();
    let app = spawn_with_clock(db.clone(), &[], clock.clone()).await;
    let m = app.create_merchant("Acme").await;
    let draft = app
        .create_payment(&m, json!({"amount": 10, "currency": "USD"}))
        .await
        .body;
    let auth = pay(
        &app,
        &m,
        "4242424242424242",
        json!({"capture_method": "manual"}),
    )
    .await;
    app.stop().await;

    let app = spawn_with_clock(db, &[], clock.clone()).await;
    clock.advance(Duration::hours(25));
    let d = app
        .wait_for_payment(&m, draft["payment_id"].as_str().unwrap(), |p| {
            p["status"] == "expired"
        })
        .await;
    assert_eq!(d["status"], "expired");
    let a = get(
        &app,
        &m,
        &format!("/payments/{}", auth["payment_id"].as_str().unwrap()),
    )
    .await;
    assert_eq!(
        a.body["status"], "requires_capture",
        "authorizations last seven days"
    );
    clock.advance(Duration::days(7));
    let a = app
        .wait_for_payment(&m, auth["payment_id"].as_str().unwrap(), |p| {
            p["status"] == "expired"
        })
        .await;
    let history = get(
        &app,
        &m,
        &format!(
            "/payments/{}/status-history",
            a["payment_id"].as_str().unwrap()
        ),
    )
    .await;
    assert_eq!(
        history.body["data"].as_array().unwrap().last().unwrap()["trigger"],
        "expire"
    );
}

#[actix_web::test]
async fn updates_only_before_confirmation_and_lines_add_up() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let lines = json!([
        {"line_id": "tea", "name": "Tea", "quantity": 2, "unit_amount": 150, "tax_amount": 30},
        {"name": "Cup", "quantity": 1, "unit_amount": 170}
    ]);
    let bad = app
        .create_payment(
            &m,
            json!({"amount": 999, "currency": "USD", "lines": lines}),
        )
        .await;
    assert_eq!(
        (bad.status, bad.code(), bad.param()),
        (400, "lines_amount_mismatch", Some("lines"))
    );
    let p = app
        .create_payment(
            &m,
            json!({"amount": 500, "currency": "USD", "lines": lines, "capture_method": "manual"}),
        )
        .await
        .body;
    let id = p["payment_id"].as_str().unwrap();
    let r = post(&app, &m, &format!("/payments/{id}"), json!({"amount": 600})).await;
    assert_eq!(
        (r.status, r.param()),
        (400, Some("amount")),
        "old lines no longer add up"
    );
    let r = post(&app, &m, &format!("/payments/{id}"), json!({"metadata": {"k": "v"}, "description": "two teas", "payment_method_data": card("4242424242424242")})).await;
    assert_eq!(
        (r.body["status"].as_str(), r.body["description"].as_str()),
        (Some("requires_confirmation"), Some("two teas"))
    );
    post(&app, &m, &format!("/payments/{id}/confirm"), json!({})).await;
    let r = post(
        &app,
        &m,
        &format!("/payments/{id}/capture"),
        json!({"amount": 100, "final_capture": false}),
    )
    .await;
    assert_eq!(r.body["amount_captured"], 100);
    let balances = get(&app, &m, &format!("/payments/{id}/lines")).await.body;
    let data = balances["data"].as_array().unwrap();
    assert_eq!(data[0]["line_id"], "tea");
    assert_eq!(data[1]["line_id"], "line_2");
    assert_eq!(
        (data[0]["amount"].as_i64(), data[1]["amount"].as_i64()),
        (Some(330), Some(170))
    );
    let captured: i64 = data
        .iter()
        .map(|l| l["amount_captured"].as_i64().unwrap())
        .sum();
    assert_eq!(captured, 100);
    assert_eq!(data[0]["amount_refundable"], data[0]["amount_captured"]);
    let r = post(
        &app,
        &m,
        &format!("/payments/{id}"),
        json!({"description": "late"}),
    )
    .await;
    assert_eq!((r.status, r.code()), (409, "invalid_state"));
}

#[actix_web::test]
async fn bad_input_is_refused_naming_the_field() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let cases = [
        (json!({"amount": 0, "currency": "USD"}), "amount"),
        (json!({"amount": -5, "currency": "USD"}), "amount"),
        (json!({"amount": "5", "currency": "USD"}), "amount"),
        (json!({"amount": 5, "currency": "ABC"}), "currency"),
        // ISO codes that are not money: gold, the test code, "no currency", a unit of account.
        (json!({"amount": 5, "currency": "XAU"}), "currency"),
        (json!({"amount": 5, "currency": "XTS"}), "currency"),
        (json!({"amount": 5, "currency": "XXX"}), "currency"),
        (json!({"amount": 5, "currency": "XDR"}), "currency"),
        (json!({"amount": 5}), "currency"),
        (
            json!({"amount": 5, "currency": "USD", "capture_method": "later"}),
            "capture_method",
        ),
        (
            json!({"amount": 5, "currency": "USD", "confirm": true, "payment_method_data": card("4242424242424241")}),
            "payment_method_data.card.number",
        ),
        (
            json!({"amount": 5, "currency": "USD", "payment_method_data": {"card": {"number": "4242424242424242", "exp_month": 1, "exp_year": 2020, "cvc": "123"}}}),
            "payment_method_data.card.exp_year",
        ),
        (
            json!({"amount": 5, "currency": "USD", "confirm": true}),
            "payment_method_data",
        ),
        (
            json!({"amount": 5, "currency": "USD", "setup_future_usage": "off_session"}),
            "customer_id",
        ),
        (
            json!({"amount": 5, "currency": "USD", "surprise": 1}),
            "surprise",
        ),
        (
            json!({"amount": 5, "currency": "USD", "return_url": "javascript:alert(1)"}),
            "return_url",
        ),
        (
            json!({"amount": 500, "currency": "USD", "lines": [{"name": "x", "quantity": 2, "unit_amount": 9223372036854775807i64}]}),
            "lines[0].unit_amount",
        ),
        (
            json!({"amount": 500, "currency": "USD", "lines": [{"name": "x", "quantity": 1, "unit_amount": 10, "tax_amount": 9223372036854775807i64}]}),
            "lines[0].tax_amount",
        ),
        (
            json!({"amount": 500, "currency": "USD", "lines": [{"name": "x", "quantity": 1, "unit_amount": 10, "tax_amount": -1}]}),
            "lines[0].tax_amount",
        ),
        // The request's own fields are checked before what it names is looked up.
        (
            json!({"amount": 5, "currency": "USD", "customer_id": "cus_00000000000000000000000000000000", "return_url": "ftp://x"}),
            "return_url",
        ),
        (
            json!({"amount": 5, "currency": "USD", "mandate_id": "man_00000000000000000000000000000000"}),
            "customer_id",
        ),
    ];
    for (body, param) in cases {
        let r = app.create_payment(&m, body.clone()).await;
        assert_eq!(
            (r.status, r.param()),
            (400, Some(param)),
            "{body}: {}",
            r.body
        );
    }
    let no_shop = app
        .send(
            Method::POST,
            "/payments",
            Some(&m.secret_key),
            Some(&json!({"amount": 5, "currency": "USD"})),
            &[],
        )
        .await;
    assert_eq!((no_shop.status, no_shop.code()), (400, "shop_required"));

    let p = pay(
        &app,
        &m,
        "4242424242424242",
        json!({"capture_method": "manual"}),
    )
    .await;
    let id = p["payment_id"].as_str().unwrap();
    let other = app.create_merchant("Other").await;
    for (method, path) in [
        (Method::GET, format!("/payments/{id}")),
        (Method::POST, format!("/payments/{id}/capture")),
        (Method::POST, format!("/payments/{id}/cancel")),
        (Method::GET, format!("/payments/{id}/attempts")),
        (Method::GET, "/payments/pay_nonsense".to_owned()),
        (
            Method::POST,
            "/payments/pay_0000000000000000000000000000dead/capture".to_owned(),
        ),
    ] {
        let body = (method == Method::POST).then(|| json!({}));
        let r = app.call(&other, method, &path, body).await;
        assert_eq!(
            (r.status, r.code(), r.param()),
            (404, "resource_missing", Some("payment_id")),
            "{path}"
        );
    }
    let still = get(&app, &m, &format!("/payments/{id}")).await;
    assert_eq!(still.body["status"], "requires_capture");
}

#[actix_web::test]
async fn publishable_keys_need_the_client_secret() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let p = app
        .create_payment(&m, json!({"amount": 700, "currency": "USD"}))
        .await
        .body;
    let (id, secret) = (
        p["payment_id"].as_str().unwrap(),
        p["client_secret"].as_str().unwrap(),
    );
    let pk = Some(m.publishable_key.as_str());
    let r = app
        .send(
            Method::GET,
            &format!("/payments/{id}?client_secret={secret}"),
            pk,
            None,
            &[],
        )
        .await;
    assert_eq!(r.status, 200);
    let r = app
        .send(Method::GET, &format!("/payments/{id}"), pk, None, &[])
        .await;
    assert_eq!((r.status, r.code()), (403, "client_secret_required"));
    let r = app
        .send(
            Method::GET,
            &format!("/payments/{id}?client_secret=pay_secret_x"),
            pk,
            None,
            &[],
        )
        .await;
    assert_eq!((r.status, r.code()), (403, "client_secret_mismatch"));
    let r = app
        .send(
            Method::POST,
            &format!("/payments/{id}/capture"),
            pk,
            Some(&json!({})),
            &[],
        )
        .await;
    assert_eq!((r.status, r.code()), (403, "secret_key_required"));
    let r = app
        .send(Method::POST, "/payments/list", pk, Some(&json!({})), &[])
        .await;
    assert_eq!(r.status, 403);
    let body = json!({"client_secret": secret, "payment_method_data": card("4242424242424242")});
    let r = app
        .send(
            Method::POST,
            &format!("/payments/{id}/confirm"),
            pk,
            Some(&body),
            &[],
        )
        .await;
    assert_eq!(r.body["status"], "succeeded", "{}", r.body);
}

#[actix_web::test]
async fn list_filters_and_cursors() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let mut ids = Vec::new();
    for (i, currency) in ["USD", "EUR", "USD", "GBP", "USD"].iter().enumerate() {
        let confirm = i % 2 == 0;
        let mut body = json!({"amount": 100 * (i as i64 + 1), "currency": currency});
        if confirm {
            body["confirm"] = json!(true);
            body["payment_method_data"] = card("4242424242424242");
        }
        ids.push(
            app.create_payment(&m, body).await.body["payment_id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    let list = |body: Value| post(&app, &m, "/payments/list", body);
    let ids_of = |r: &common::Answer| -> Vec<String> {
        r.body["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["payment_id"].as_str().unwrap().to_owned())
            .collect()
    };
    let all = list(json!({})).await;
    assert_eq!(ids_of(&all), ids.iter().rev().cloned().collect::<Vec<_>>());
    let usd = list(json!({"currency": "usd"})).await;
    assert_eq!(
        ids_of(&usd),
        [ids[4].clone(), ids[2].clone(), ids[0].clone()]
    );
    let ok = list(json!({"status": "succeeded"})).await;
    assert_eq!(ids_of(&ok).len(), 3);
    let range = list(json!({"amount_gte": 200, "amount_lte": 400})).await;
    assert_eq!(
        ids_of(&range),
        [ids[3].clone(), ids[2].clone(), ids[1].clone()]
    );
    let page1 = list(json!({"limit": 2})).await;
    assert_eq!(
        (ids_of(&page1).len(), page1.body["has_more"].as_bool()),
        (2, Some(true))
    );
    let page2 = list(json!({"limit": 2, "starting_after": ids_of(&page1)[1]})).await;
    assert_eq!(ids_of(&page2), [ids[2].clone(), ids[1].clone()]);
    let future = (chrono::Utc::now() + Duration::days(400)).to_rfc3339();
    assert!(ids_of(&list(json!({"created_after": future})).await).is_empty());
    let r = list(json!({"status": "sleeping"})).await;
    assert_eq!((r.status, r.param()), (400, Some("status")));
    let r = list(json!({"limit": 101})).await;
    assert_eq!((r.status, r.param()), (400, Some("limit")));
    let other = app.create_merchant("Other").await;
    assert!(ids_of(&post(&app, &other, "/payments/list", json!({})).await).is_empty());
}

#[actix_web::test]
async fn routing_rules_choose_processors_and_fall_back_after_declines() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let shop = m.profile_id.clone();
    for name in ["alpha", "beta"] {
        let r = post(
            &app,
            &m,
            &format!("/account/shops/{shop}/processors"),
            json!({"name": name}),
        )
        .await;
        assert_eq!(r.status, 201, "{}", r.body);
    }
    let dup = post(
        &app,
        &m,
        &format!("/account/shops/{shop}/processors"),
        json!({"name": "alpha"}),
    )
    .await;
    assert_eq!(dup.code(), "processor_exists");
    let rules = json!({"rules": [{"name": "euros to beta", "conditions": {"currencies": ["EUR"]}, "processors": [{"processor": "beta"}]}]});
    let r = app
        .call(
            &m,
            Method::PUT,
            &format!("/account/shops/{shop}/routing"),
            Some(rules),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let bad = app
        .call(
            &m,
            Method::PUT,
            &format!("/account/shops/{shop}/routing"),
            Some(json!({"rules": [{"name": "x", "processors": [{"processor": "gamma"}]}]})),
        )
        .await;
    assert_eq!(
        (bad.status, bad.param()),
        (400, Some("rules[0].processors[0].processor"))
    );

    let eur = pay(&app, &m, "4242424242424242", json!({"currency": "EUR"})).await;
    let d = get(
        &app,
        &m,
        &format!(
            "/payments/{}/routing-decisions",
            eur["payment_id"].as_str().unwrap()
        ),
    )
    .await
    .body;
    assert_eq!(
        (
            d["data"][0]["chosen"].as_str(),
            d["data"][0]["algorithm"].as_str(),
            d["data"][0]["rule"].as_str()
        ),
        (Some("beta"), Some("rule"), Some("euros to beta"))
    );
    assert_eq!(d["data"][0]["candidates"], json!(["beta", "alpha"]));
    let usd = pay(&app, &m, "4242424242424242", json!({})).await;
    let d = get(
        &app,
        &m,
        &format!(
            "/payments/{}/routing-decisions",
            usd["payment_id"].as_str().unwrap()
        ),
    )
    .await
    .body;
    assert_eq!(
        (
            d["data"][0]["chosen"].as_str(),
            d["data"][0]["algorithm"].as_str()
        ),
        (Some("alpha"), Some("default"))
    );

    // A retryable decline is tried on the next processor before the confirm answers.
    let declined = pay(&app, &m, "4000000000000002", json!({})).await;
    assert_eq!(declined["status"], "declined");
    let d = get(
        &app,
        &m,
        &format!(
            "/payments/{}/routing-decisions",
            declined["payment_id"].as_str().unwrap()
        ),
    )
    .await
    .body;
    let tried: Vec<&str> = d["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["chosen"].as_str().unwrap())
        .collect();
    assert_eq!(tried, ["alpha", "beta"]);
    assert_eq!(d["data"][1]["algorithm"], "fallback");
    assert_eq!(
        declined["attempt_count"], 1,
        "one confirm, two processor attempts"
    );
    // Attempts are numbered within the payment, across fallbacks and confirms.
    let id = declined["payment_id"].as_str().unwrap();
    let again = post(&app, &m, &format!("/payments/{id}/confirm"), json!({})).await;
    assert_eq!(again.status, 200, "{}", again.body);
    let attempts = get(&app, &m, &format!("/payments/{id}/attempts"))
        .await
        .body;
    let numbered: Vec<(i64, &str)> = attempts["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["number"].as_i64().unwrap(),
                a["processor"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        numbered,
        [(1, "alpha"), (2, "beta"), (3, "alpha"), (4, "beta")],
        "{attempts}"
    );
}

#[actix_web::test]
async fn idempotent_create_returns_the_same_payment() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let body = json!({"amount": 500, "currency": "USD", "confirm": true, "payment_method_data": card("4242424242424242")});
    let headers = [
        ("x-profile-id", m.profile_id.as_str()),
        ("idempotency-key", "order-77"),
    ];
    let a = app
        .send(
            Method::POST,
            "/payments",
            Some(&m.secret_key),
            Some(&body),
            &headers,
        )
        .await;
    let b = app
        .send(
            Method::POST,
            "/payments",
            Some(&m.secret_key),
            Some(&body),
            &headers,
        )
        .await;
    assert_eq!(a.raw, b.raw);
    assert_eq!(b.header("idempotent-replayed"), Some("true"));
    let all = post(&app, &m, "/payments/list", json!({})).await;
    assert_eq!(all.body["data"].as_array().unwrap().len(), 1);
}

#[actix_web::test]
async fn forty_concurrent_captures_never_exceed_the_authorization() {
    forty_concurrent_captures(spawn_app().await).await;
}

/// An actor that drops its row after every message reads it again for the next one: the
/// captures stay serialized and exact.
#[actix_web::test]
async fn actors_without_a_cached_row_still_serialize_captures() {
    let db = Arc::new(TestDb::new().await);
    let app = common::spawn_with(db, &[("PAYD_ACTORS__ROW_CACHE_MS", "0")]).await;
    let m = app.create_merchant("Acme").await;
    let p = pay(
        &app,
        &m,
        "4242424242424242",
        json!({"capture_method": "manual"}),
    )
    .await;
    let id = p["payment_id"].as_str().unwrap();
    for _ in 0..4 {
        let r = post(
            &app,
            &m,
            &format!("/payments/{id}/capture"),
            json!({"amount": 100, "final_capture": false}),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let r = post(
        &app,
        &m,
        "/refunds",
        json!({"payment_id": id, "amount": 150}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let p = get(&app, &m, &format!("/payments/{id}")).await.body;
    assert_eq!(
        (&p["amount_captured"], &p["amount_refunded"], &p["status"]),
        (
            &json!(400),
            &json!(150),
            &json!("partially_captured_and_capturable")
        )
    );
    forty_concurrent_captures(app).await;
}

async fn forty_concurrent_captures(app: TestApp) {
    let m = app.create_merchant("Acme").await;
    let p = pay(
        &app,
        &m,
        "4242424242424242",
        json!({"capture_method": "manual"}),
    )
    .await;
    let id = p["payment_id"].as_str().unwrap().to_owned();
    let path = format!("/payments/{id}/capture");
    let answers = futures_util::future::join_all((0..40).map(|_| {
        post(
            &app,
            &m,
            &path,
            json!({"amount": 25, "final_capture": false}),
        )
    }))
    .await;
    let ok = answers.iter().filter(|a| a.status == 200).count() as i64;
    for a in &answers {
        assert!(a.status < 500, "no 5xx: {} {}", a.status, a.body);
        assert!(
            a.status == 200 || a.status == 409 || a.status == 400,
            "{}",
            a.body
        );
    }
    let final_state = get(&app, &m, &format!("/payments/{id}")).await.body;
    let captured = final_state["amount_captured"].as_i64().unwrap();
    assert_eq!(captured, 25 * ok);
    assert!(captured <= 500);
    if !common::several_instances(&app.db) {
        // One instance serializes every capture; across instances a twice-lost race is a 409.
        assert_eq!(ok, 20, "exactly the authorization is captured");
        assert_eq!(final_state["status"], "succeeded");
    }
}

/// Puts a fresh payment in `status` through the API.
async fn payment_in(app: &TestApp, m: &Merchant, status: &str) -> String {
    let manual = json!({"capture_method": "manual"});
    let id_of = |p: &Value| p["payment_id"].as_str().unwrap().to_owned();
    let p = match status {
        "requires_payment_method" => app.create_payment(m, json!({"amount": 500, "currency": "USD"})).await.body,
        "requires_confirmation" => {
            app.create_payment(m, json!({"amount": 500, "currency": "USD", "payment_method_data": card("4242424242424242")})).await.body
        }
        "succeeded" => pay(app, m, "4242424242424242", json!({})).await,
        "requires_capture" => pay(app, m, "4242424242424242", manual).await,
        "partially_authorized_and_requires_capture" => {
            pay(app, m, "4000000000000093", json!({"enable_partial_authorization": true})).await
        }
        "partially_captured_and_capturable" | "partially_captured" => {
            let p = pay(app, m, "4242424242424242", manual).await;
            let final_capture = status == "partially_captured";
            post(app, m, &format!("/payments/{}/capture", id_of(&p)), json!({"amount": 100, "final_capture": final_capture})).await.body
        }
        "declined" => pay(app, m, "4000000000000002", json!({})).await,
        "failed" => pay(app, m, "4000000000009979", json!({})).await,
        "requires_customer_action" => pay(app, m, "4000000000003220", json!({})).await,
        "requires_merchant_action" => pay(app, m, "4000000000000101", json!({})).await,
        "processing" => pay(app, m, "4000000000000119", json!({})).await,
        "cancelled" => {
            let p = pay(app, m, "4242424242424242", manual).await;
            post(app, m, &format!("/payments/{}/cancel", id_of(&p)), json!({})).await.body
        }
        "cancelled_post_capture" => {
            let p = pay(app, m, "4242424242424242", json!({})).await;
            post(app, m, &format!("/payments/{}/cancel", id_of(&p)), json!({})).await.body
        }
        "conflicted" => {
            let p = pay(app, m, "4000000000000036", json!({})).await;
            get(app, m, &format!("/payments/{}?force_sync=true", id_of(&p))).await.body
        }
        other => panic!("no recipe for {other}"),
    };
    assert_eq!(p["status"], status, "{p}");
    id_of(&p)
}

#[actix_web::test]
async fn every_operation_is_allowed_exactly_where_the_table_says() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    // status → (update, confirm, capture, cancel) allowed?
    let table = [
        ("requires_payment_method", [true, true, false, true]),
        ("requires_confirmation", [true, true, false, true]),
        ("declined", [true, true, false, true]),
        ("requires_customer_action", [false, false, false, true]),
        ("requires_merchant_action", [false, false, false, true]),
        ("processing", [false, false, false, false]),
        ("requires_capture", [false, false, true, true]),
        (
            "partially_authorized_and_requires_capture",
            [false, false, true, true],
        ),
        (
            "partially_captured_and_capturable",
            [false, false, true, true],
        ),
        ("partially_captured", [false, false, false, true]),
        ("succeeded", [false, false, false, true]),
        ("failed", [false, false, false, false]),
        ("cancelled", [false, false, false, false]),
        ("cancelled_post_capture", [false, false, false, false]),
        ("conflicted", [false, false, false, false]),
    ];
    let ops = [
        ("", json!({"description": "changed"})),
        (
            "/confirm",
            json!({"payment_method_data": card("4242424242424242")}),
        ),
        ("/capture", json!({"amount": 1})),
        ("/cancel", json!({})),
    ];
    for (status, allowed) in table {
        for (i, (suffix, body)) in ops.iter().enumerate() {
            let id = payment_in(&app, &m, status).await;
            let r = post(&app, &m, &format!("/payments/{id}{suffix}"), body.clone()).await;
            if allowed[i] {
                assert_eq!(r.status, 200, "{status} {suffix}: {}", r.body);
            } else {
                assert_eq!(
                    (r.status, r.code()),
                    (409, "invalid_state"),
                    "{status} {suffix}: {}",
                    r.body
                );
                assert!(
                    r.body["error"]["message"]
                        .as_str()
                        .unwrap()
                        .contains(status),
                    "{status}"
                );
                let after = get(&app, &m, &format!("/payments/{id}")).await;
                assert_eq!(after.body["status"], status, "a refusal changes nothing");
            }
        }
    }
}

/// A create with `confirm: true` is one change: the payment's insert, its confirm, its two
/// history rows and its attempt are written in one transaction (#47). On PostgreSQL every row
/// a transaction writes carries its id (`xmin`); on SQLite the rows are there.
#[actix_web::test]
async fn a_create_with_confirm_is_one_transaction() {
    use sea_orm::{ConnectionTrait, Database, Statement};
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let id = app.succeeded_payment(&m).await;
    let db = Database::connect(app.db.url.as_str())
        .await
        .expect("connect");
    let backend = db.get_database_backend();
    let writer = if app.db.is_postgres() {
        "xmin::text"
    } else {
        "'one'"
    };
    let mut writers = Vec::new();
    for table in ["payments", "payment_status_history", "payment_attempts"] {
        let column = if table == "payments" {
            "id"
        } else {
            "payment_id"
        };
        let sql = format!("SELECT {writer} AS w FROM {table} WHERE {column} = '{id}'");
        let rows = db
            .query_all_raw(Statement::from_string(backend, sql))
            .await
            .expect("read");
        let expected = match table {
            "payment_status_history" => 2,
            _ => 1,
        };
        assert_eq!(rows.len(), expected, "{table}");
        for row in rows {
            writers.push((table, row.try_get::<String>("", "w").expect("w")));
        }
    }
    assert!(
        writers.iter().all(|(_, w)| *w == writers[0].1),
        "written by more than one transaction: {writers:?}"
    );
    db.close().await.ok();
}

/// An attempt whose stored routing decision no longer decodes (edited by hand) makes the
/// decisions' list a 500, logged with its column and row; it was left out of the list, so the
/// list showed a payment routed fewer times than it was.
#[actix_web::test]
async fn a_routing_decision_that_does_not_decode_is_an_error_not_a_shorter_list() {
    use sea_orm::ConnectionTrait;
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let p = pay(&app, &m, "4242424242424242", json!({})).await;
    let id = p["payment_id"].as_str().unwrap();
    let path = format!("/payments/{id}/routing-decisions");
    assert_eq!(
        get(&app, &m, &path).await.body["data"]
            .as_array()
            .map(Vec::len),
        Some(1)
    );
    let edit = format!("UPDATE payment_attempts SET routing = 'alpha' WHERE payment_id = '{id}'");
    app.state.db.execute_unprepared(&edit).await.unwrap();
    let r = get(&app, &m, &path).await;
    assert_eq!(r.status, 500, "{}", r.body);
}

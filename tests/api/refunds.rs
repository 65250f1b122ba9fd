//! Refunds: full, partial and by line, serialized with captures through the payment's actor.

use crate::common;

use actix_web::http::Method;
use chrono::Duration;
use common::{card, spawn_app, Merchant, TestApp};
use serde_json::{json, Value};

async fn pay(app: &TestApp, m: &Merchant, number: &str, extra: Value) -> Value {
    let mut body = json!({"amount": 500, "currency": "USD", "confirm": true, "payment_method_data": card(number)});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let r = app.create_payment(m, body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body
}

async fn refund(app: &TestApp, m: &Merchant, body: Value) -> common::Answer {
    app.call(m, Method::POST, "/refunds", Some(body)).await
}

async fn payment(app: &TestApp, m: &Merchant, id: &str) -> Value {
    app.call(m, Method::GET, &format!("/payments/{id}"), None)
        .await
        .body
}

#[actix_web::test]
async fn full_and_partial_refunds_up_to_the_captured_amount() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let p = pay(&app, &m, "4242424242424242", json!({})).await;
    let id = p["payment_id"].as_str().unwrap();
    let r = refund(&app, &m, json!({"payment_id": id, "amount": 200, "reason": "damaged", "metadata": {"ticket": "T-9"}})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(
        (
            r.body["status"].as_str(),
            r.body["amount"].as_i64(),
            r.body["currency"].as_str()
        ),
        (Some("succeeded"), Some(200), Some("USD"))
    );
    assert!(r.body["refund_id"].as_str().unwrap().starts_with("ref_"));
    assert_eq!(
        (r.body["reason"].as_str(), r.body["test_mode"].as_bool()),
        (Some("damaged"), Some(true))
    );
    let r = refund(&app, &m, json!({"payment_id": id, "amount": 250})).await;
    assert_eq!(r.body["status"], "succeeded");
    let r = refund(&app, &m, json!({"payment_id": id, "amount": 51})).await;
    assert_eq!(
        (r.status, r.code(), r.param()),
        (400, "amount_exceeds_refundable", Some("amount"))
    );
    let r = refund(&app, &m, json!({"payment_id": id})).await;
    assert_eq!(r.body["amount"], 50, "no amount refunds what is left");
    let r = refund(&app, &m, json!({"payment_id": id})).await;
    assert_eq!(r.code(), "amount_exceeds_refundable");
    assert_eq!(payment(&app, &m, id).await["amount_refunded"], 500);

    let full = pay(&app, &m, "4242424242424242", json!({})).await;
    let r = refund(&app, &m, json!({"payment_id": full["payment_id"]})).await;
    assert_eq!(
        (r.body["status"].as_str(), r.body["amount"].as_i64()),
        (Some("succeeded"), Some(500))
    );

    let events = app
        .call(
            &m,
            Method::POST,
            &format!("/events/{}", m.merchant_id),
            Some(json!({"event_type": "refund_succeeded"})),
        )
        .await;
    assert_eq!(events.body["data"].as_array().unwrap().len(), 4);
    assert_eq!(
        events.body["data"][0]["envelope"]["content"]["type"],
        "refund_details"
    );
    assert_eq!(
        events.body["data"][0]["envelope"]["content"]["object"]["refund_id"],
        r.body["refund_id"]
    );
}

#[actix_web::test]
async fn refunds_by_line_with_quantities_and_amounts() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let lines = json!([
        {"line_id": "tea", "name": "Tea", "quantity": 3, "unit_amount": 100, "tax_amount": 10},
        {"line_id": "cup", "name": "Cup", "quantity": 1, "unit_amount": 190}
    ]);
    let p = pay(&app, &m, "4242424242424242", json!({"lines": lines})).await;
    let id = p["payment_id"].as_str().unwrap();
    let by_qty = |q: i64| json!({"payment_id": id, "lines": [{"line_id": "tea", "quantity": q}]});
    let r = refund(&app, &m, by_qty(1)).await;
    assert_eq!(
        (r.body["amount"].as_i64(), r.body["lines"].clone()),
        (
            Some(103),
            json!([{"line_id": "tea", "quantity": 1, "amount": 103}])
        )
    );
    let r = refund(&app, &m, json!({"payment_id": id, "lines": [{"line_id": "tea", "quantity": 1}, {"line_id": "cup", "amount": 50}]})).await;
    assert_eq!(r.body["amount"], 153, "{}", r.body);
    let r = refund(&app, &m, by_qty(2)).await;
    assert_eq!((r.status, r.param()), (400, Some("lines[0].quantity")));
    let r = refund(
        &app,
        &m,
        json!({"payment_id": id, "lines": [{"line_id": "cup", "amount": 141}]}),
    )
    .await;
    assert_eq!(
        (r.status, r.code(), r.param()),
        (400, "amount_exceeds_refundable", Some("lines[0].amount"))
    );
    let r = refund(
        &app,
        &m,
        json!({"payment_id": id, "lines": [{"line_id": "mug", "quantity": 1}]}),
    )
    .await;
    assert_eq!((r.status, r.param()), (400, Some("lines[0].line_id")));
    let r = refund(
        &app,
        &m,
        json!({"payment_id": id, "lines": [{"line_id": "tea", "quantity": 1, "amount": 5}]}),
    )
    .await;
    assert_eq!(r.status, 400);
    let r = refund(
        &app,
        &m,
        json!({"payment_id": id, "amount": 5, "lines": [{"line_id": "tea", "quantity": 1}]}),
    )
    .await;
    assert_eq!((r.status, r.param()), (400, Some("lines")));
    let r = refund(&app, &m, by_qty(1)).await;
    assert_eq!(
        r.body["amount"], 104,
        "the last unit takes what rounding left of the tax"
    );

    let balances = app
        .call(&m, Method::GET, &format!("/payments/{id}/lines"), None)
        .await
        .body;
    let tea = &balances["data"][0];
    let cup = &balances["data"][1];
    assert_eq!(
        (
            tea["quantity_refunded"].as_i64(),
            tea["amount_refunded"].as_i64(),
            tea["amount_refundable"].as_i64()
        ),
        (Some(3), Some(310), Some(0))
    );
    assert_eq!(
        (
            cup["amount_refunded"].as_i64(),
            cup["amount_refundable"].as_i64()
        ),
        (Some(50), Some(140))
    );
    assert_eq!(payment(&app, &m, id).await["amount_refunded"], 360);
}

/// `amount_refundable` on `/lines` is exactly what a line refund may take, after a partial
/// capture and after a refund by amount too.
#[actix_web::test]
async fn the_line_balance_shown_is_the_one_enforced() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let lines = json!([
        {"line_id": "tea", "name": "Tea", "quantity": 3, "unit_amount": 100, "tax_amount": 10},
        {"line_id": "cup", "name": "Cup", "quantity": 1, "unit_amount": 190}
    ]);
    let p = pay(
        &app,
        &m,
        "4242424242424242",
        json!({"lines": lines, "capture_method": "manual"}),
    )
    .await;
    let id = p["payment_id"].as_str().unwrap();
    let r = app
        .call(
            &m,
            Method::POST,
            &format!("/payments/{id}/capture"),
            Some(json!({"amount": 250})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let refundable = |line: &'static str| {
        let app = &app;
        let m = &m;
        async move {
            let r = app
                .call(m, Method::GET, &format!("/payments/{id}/lines"), None)
                .await;
            let found = r.body["data"]
                .as_array()
                .unwrap()
                .iter()
                .find(|l| l["line_id"] == line)
                .cloned()
                .unwrap();
            (
                found["amount_captured"].as_i64().unwrap(),
                found["amount_refundable"].as_i64().unwrap(),
            )
        }
    };
    assert_eq!(refundable("cup").await, (95, 95));
    assert_eq!(refundable("tea").await, (155, 155));
    let by_amount = |line: &str, amount: i64| json!({"payment_id": id, "lines": [{"line_id": line, "amount": amount}]});
    for too_much in [96, 190] {
        let r = refund(&app, &m, by_amount("cup", too_much)).await;
        assert_eq!(
            (r.status, r.code(), r.param()),
            (400, "amount_exceeds_refundable", Some("lines[0].amount")),
            "{too_much}: {}",
            r.body
        );
    }
    // A refund by amount leaves 100 to refund on the payment: no line may take more.
    let r = refund(&app, &m, json!({"payment_id": id, "amount": 150})).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(refundable("tea").await, (155, 100));
    let r = refund(&app, &m, by_amount("tea", 101)).await;
    assert_eq!(
        (r.status, r.code(), r.param()),
        (400, "amount_exceeds_refundable", Some("lines[0].amount"))
    );
    let r = refund(&app, &m, by_amount("cup", 95)).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(refundable("cup").await, (95, 0));
    assert_eq!(refundable("tea").await, (155, 5));
    let r = refund(&app, &m, by_amount("tea", 5)).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(payment(&app, &m, id).await["amount_refunded"], 250);
}

/// Stored lines that do not parse are an error (500), never an empty list a refund is then
/// decided on.
#[actix_web::test]
async fn corrupt_stored_lines_answer_500_and_move_nothing() {
    use sea_orm::ConnectionTrait;
    let db = std::sync::Arc::new(common::TestDb::new().await);
    let app = common::spawn_with(db, &[("PAYD_ACTORS__ROW_CACHE_MS", "1")]).await;
    let m = app.create_merchant("Acme").await;
    let lines = json!([{"line_id": "cup", "name": "Cup", "quantity": 1, "unit_amount": 500}]);
    let p = pay(&app, &m, "4242424242424242", json!({"lines": lines})).await;
    let id = p["payment_id"].as_str().unwrap();
    app.state
        .db
        .execute_unprepared(&format!(
            "UPDATE payments SET lines = '[{{\"line_id\": ' WHERE id = '{id}'"
        ))
        .await
        .unwrap();
    // Past the actor's row cache, so the next command reads the corrupt row.
    actix_web::rt::time::sleep(std::time::Duration::from_millis(50)).await;
    let r = app
        .call(&m, Method::GET, &format!("/payments/{id}/lines"), None)
        .await;
    assert_eq!(r.status, 500, "{}", r.body);
    let r = refund(&app, &m, json!({"payment_id": id, "amount": 100})).await;
    assert_eq!(r.status, 500, "{}", r.body);
    // The whole row is unreadable now (its read fails, as any read of it does): mended by
    // hand, it shows nothing refunded.
    let path = format!("/payments/{id}");
    assert_eq!(app.call(&m, Method::GET, &path, None).await.status, 500);
    app.state
        .db
        .execute_unprepared(&format!(
            "UPDATE payments SET lines = '{lines}' WHERE id = '{id}'",
            lines = json!([{"line_id": "cup", "name": "Cup", "quantity": 1, "unit_amount": 500,
                "tax_amount": 0, "amount": 500, "product_id": null, "price_id": null}])
        ))
        .await
        .unwrap();
    actix_web::rt::time::sleep(std::time::Duration::from_millis(50)).await;
    assert_eq!(payment(&app, &m, id).await["amount_refunded"], 0);
}

#[actix_web::test]
async fn a_failing_refund_releases_its_balance() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let p = pay(&app, &m, "4000000000005126", json!({})).await;
    let id = p["payment_id"].as_str().unwrap();
    let r = refund(&app, &m, json!({"payment_id": id, "amount": 300})).await;
    assert_eq!(r.body["status"], "pending");
    let refund_id = r.body["refund_id"].as_str().unwrap().to_owned();
    assert_eq!(
        payment(&app, &m, id).await["amount_refunded"],
        300,
        "a pending refund holds its balance"
    );
    let r2 = refund(&app, &m, json!({"payment_id": id, "amount": 201})).await;
    assert_eq!(r2.code(), "amount_exceeds_refundable");
    let synced = app
        .call(
            &m,
            Method::GET,
            &format!("/refunds/{refund_id}?force_sync=true"),
            None,
        )
        .await;
    assert_eq!(synced.body["status"], "pending");
    app.clock.advance(Duration::seconds(6));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let r = app
            .call(&m, Method::GET, &format!("/refunds/{refund_id}"), None)
            .await;
        if r.body["status"] == "failed" {
            assert!(r.body["failure_reason"].is_string());
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the refund never settled: {}",
            r.body
        );
        actix_web::rt::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    assert_eq!(
        payment(&app, &m, id).await["amount_refunded"],
        0,
        "the failure released the balance"
    );
    let events = app
        .call(
            &m,
            Method::POST,
            &format!("/events/{}", m.merchant_id),
            Some(json!({"object_id": refund_id})),
        )
        .await;
    assert_eq!(events.body["data"][0]["event_type"], "refund_failed");
}

#[actix_web::test]
async fn refunds_are_refused_where_nothing_can_be_refunded() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let auth = pay(
        &app,
        &m,
        "4242424242424242",
        json!({"capture_method": "manual"}),
    )
    .await;
    let r = refund(&app, &m, json!({"payment_id": auth["payment_id"]})).await;
    assert_eq!((r.status, r.code()), (409, "invalid_state"));
    let voided = pay(&app, &m, "4242424242424242", json!({})).await;
    app.call(
        &m,
        Method::POST,
        &format!(
            "/payments/{}/cancel",
            voided["payment_id"].as_str().unwrap()
        ),
        Some(json!({})),
    )
    .await;
    let r = refund(&app, &m, json!({"payment_id": voided["payment_id"]})).await;
    assert_eq!((r.status, r.code()), (409, "invalid_state"));
    let r = refund(
        &app,
        &m,
        json!({"payment_id": auth["payment_id"], "amount": 0}),
    )
    .await;
    assert_eq!(r.status, 409, "nothing captured, whatever the amount");

    let ok = pay(&app, &m, "4242424242424242", json!({})).await;
    let r = refund(
        &app,
        &m,
        json!({"payment_id": ok["payment_id"], "amount": -3}),
    )
    .await;
    assert_eq!((r.status, r.param()), (400, Some("amount")));
    let other = app.create_merchant("Other").await;
    let r = refund(&app, &other, json!({"payment_id": ok["payment_id"]})).await;
    assert_eq!(
        (r.status, r.code(), r.param()),
        (404, "resource_missing", Some("payment_id"))
    );
    let r = refund(&app, &m, json!({"payment_id": "pay_nope"})).await;
    assert_eq!(r.status, 404);
    let r = refund(&app, &m, json!({"amount": 5})).await;
    assert_eq!((r.status, r.param()), (400, Some("payment_id")));
    let mine = refund(
        &app,
        &m,
        json!({"payment_id": ok["payment_id"], "amount": 10}),
    )
    .await;
    let r = app
        .call(
            &other,
            Method::GET,
            &format!("/refunds/{}", mine.body["refund_id"].as_str().unwrap()),
            None,
        )
        .await;
    assert_eq!(r.status, 404);
}

#[actix_web::test]
async fn refund_details_can_be_updated_and_listed() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let a = pay(&app, &m, "4242424242424242", json!({})).await;
    let b = pay(&app, &m, "4242424242424242", json!({"currency": "EUR"})).await;
    let r1 = refund(
        &app,
        &m,
        json!({"payment_id": a["payment_id"], "amount": 100}),
    )
    .await
    .body;
    let r2 = refund(
        &app,
        &m,
        json!({"payment_id": b["payment_id"], "amount": 300}),
    )
    .await
    .body;
    let id = r1["refund_id"].as_str().unwrap();
    let u = app
        .call(
            &m,
            Method::POST,
            &format!("/refunds/{id}"),
            Some(json!({"reason": "late delivery", "metadata": {"k": "v"}})),
        )
        .await;
    assert_eq!(
        (
            u.body["reason"].as_str(),
            u.body["metadata"]["k"].as_str(),
            u.body["amount"].as_i64()
        ),
        (Some("late delivery"), Some("v"), Some(100))
    );
    let u = app
        .call(
            &m,
            Method::POST,
            &format!("/refunds/{id}"),
            Some(json!({"amount": 1})),
        )
        .await;
    assert_eq!(
        (u.status, u.param()),
        (400, Some("amount")),
        "only reason and metadata change"
    );
    let list = |body: Value| app.call(&m, Method::POST, "/refunds/list", Some(body));
    let ids = |r: &common::Answer| -> Vec<String> {
        r.body["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x["refund_id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(
        ids(&list(json!({})).await),
        [r2["refund_id"].as_str().unwrap(), id]
    );
    assert_eq!(
        ids(&list(json!({"payment_id": a["payment_id"]})).await),
        [id]
    );
    assert_eq!(
        ids(&list(json!({"currency": "eur"})).await),
        [r2["refund_id"].as_str().unwrap()]
    );
    assert_eq!(
        ids(&list(json!({"amount_gte": 200})).await),
        [r2["refund_id"].as_str().unwrap()]
    );
    assert_eq!(ids(&list(json!({"status": "failed"})).await).len(), 0);
    let r = list(json!({"status": "lost"})).await;
    assert_eq!((r.status, r.param()), (400, Some("status")));
    let page = list(json!({"limit": 1})).await;
    assert_eq!(page.body["has_more"], true);
}

#[actix_web::test]
async fn idempotent_refunds_refund_once() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let p = pay(&app, &m, "4242424242424242", json!({})).await;
    let body = json!({"payment_id": p["payment_id"], "amount": 100});
    let headers = [
        ("x-profile-id", m.profile_id.as_str()),
        ("idempotency-key", "refund-1"),
    ];
    let a = app
        .send(
            Method::POST,
            "/refunds",
            Some(&m.secret_key),
            Some(&body),
            &headers,
        )
        .await;
    let b = app
        .send(
            Method::POST,
            "/refunds",
            Some(&m.secret_key),
            Some(&body),
            &headers,
        )
        .await;
    assert_eq!(a.raw, b.raw);
    assert_eq!(
        payment(&app, &m, p["payment_id"].as_str().unwrap()).await["amount_refunded"],
        100
    );
}

#[actix_web::test]
async fn concurrent_refunds_and_captures_keep_the_balances() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let body = json!({"amount": 2000, "currency": "USD", "confirm": true, "capture_method": "manual", "payment_method_data": card("4242424242424242")});
    let p = app.create_payment(&m, body).await.body;
    let id = p["payment_id"].as_str().unwrap().to_owned();
    // Something captured first, so the race has something to refund.
    app.call(
        &m,
        Method::POST,
        &format!("/payments/{id}/capture"),
        Some(json!({"amount": 300, "final_capture": false})),
    )
    .await;
    let capture_path = format!("/payments/{id}/capture");
    let captures = (0..10).map(|_| {
        app.call(
            &m,
            Method::POST,
            &capture_path,
            Some(json!({"amount": 100, "final_capture": false})),
        )
    });
    let refunds = (0..30).map(|_| refund(&app, &m, json!({"payment_id": id, "amount": 50})));
    let read_path = format!("/payments/{id}");
    let reads = (0..10).map(|_| app.call(&m, Method::GET, &read_path, None));
    let (captures, refunds, reads) = futures_util::join!(
        futures_util::future::join_all(captures),
        futures_util::future::join_all(refunds),
        futures_util::future::join_all(reads),
    );
    for a in captures.iter().chain(refunds.iter()).chain(reads.iter()) {
        assert!(a.status < 500, "no 5xx: {} {}", a.status, a.body);
    }
    for read in &reads {
        let (captured, refunded) = (
            read.body["amount_captured"].as_i64().unwrap(),
            read.body["amount_refunded"].as_i64().unwrap(),
        );
        assert!(
            refunded <= captured,
            "refunded {refunded} > captured {captured} at a read"
        );
    }
    let ok_captures = captures.iter().filter(|a| a.status == 200).count() as i64;
    let ok_refunds = refunds
        .iter()
        .filter(|a| a.status == 201 && a.body["status"] == "succeeded")
        .count() as i64;
    let lost_race =
        |r: &&common::Answer| r.code() == "concurrent_update" && common::several_instances(&app.db);
    for r in refunds
        .iter()
        .filter(|a| a.status != 201)
        .filter(|r| !lost_race(r))
    {
        assert_eq!(r.code(), "amount_exceeds_refundable", "{}", r.body);
    }
    let end = payment(&app, &m, &id).await;
    assert_eq!(end["amount_captured"], 300 + 100 * ok_captures);
    assert_eq!(end["amount_refunded"], 50 * ok_refunds);
    assert!(end["amount_refunded"].as_i64().unwrap() <= end["amount_captured"].as_i64().unwrap());
    for c in captures.iter().filter(|a| a.status != 200) {
        assert!(lost_race(&c), "{}", c.body);
    }
    let listed = app
        .call(
            &m,
            Method::POST,
            "/refunds/list",
            Some(json!({"payment_id": id, "limit": 100})),
        )
        .await;
    let sum: i64 = listed.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["amount"].as_i64().unwrap())
        .sum();
    assert_eq!(
        sum,
        50 * ok_refunds,
        "the refunds add up to the payment's refunded amount"
    );
}

//! Payouts and the shop's ledger through the HTTP API: the reservation at confirm, the
//! sandbox payout processor's outcomes (paid, failed, pending then paid, paid then reversed,
//! ineligible), cancels here and at the processor, refusals in every terminal status, the
//! ledger's sums equal to the balance after a mixed history, and concurrent payouts that
//! never take more than the available balance (also on two instances).

use crate::common;

use std::time::{Duration as StdDuration, Instant};

use actix_web::http::Method;
use chrono::Duration;
use common::{card, spawn_app, Merchant, TestApp};
use serde_json::{json, Value};

async fn post(app: &TestApp, m: &Merchant, path: &str, body: Value) -> common::Answer {
    app.call(m, Method::POST, path, Some(body)).await
}

async fn get(app: &TestApp, m: &Merchant, path: &str) -> common::Answer {
    app.call(m, Method::GET, path, None).await
}

/// A captured payment of `amount` EUR with this card.
async fn capture(app: &TestApp, m: &Merchant, amount: i64, number: &str) -> Value {
    let p = app
        .create_payment(
            m,
            json!({"amount": amount, "currency": "EUR", "confirm": true,
                "payment_method_data": card(number)}),
        )
        .await;
    assert_eq!(p.status, 201, "{}", p.body);
    p.body
}

fn bank(account: &str) -> Value {
    json!({"bank_account": {"account_number": account, "routing_number": "110000000",
        "holder_name": "Ana Lima"}})
}

/// (available, pending) in EUR.
async fn balance(app: &TestApp, m: &Merchant) -> (i64, i64) {
    let b = get(app, m, &format!("/account/shops/{}/balance", m.profile_id)).await;
    assert_eq!(b.status, 200, "{}", b.body);
    let of = |bucket: &str| {
        b.body[bucket]
            .as_array()
            .unwrap()
            .iter()
            .find(|f| f["currency"] == "EUR")
            .map_or(0, |f| f["amount"].as_i64().unwrap())
    };
    (of("available"), of("pending"))
}

/// The ledger's sums per bucket in EUR, from every entry.
async fn ledger_sums(app: &TestApp, m: &Merchant) -> (i64, i64) {
    let (mut available, mut pending, mut after) = (0, 0, None::<String>);
    for _ in 0..100 {
        let cursor = after
            .as_ref()
            .map_or(String::new(), |a| format!("&starting_after={a}"));
        let page = get(
            app,
            m,
            &format!(
                "/account/shops/{}/balance-transactions?limit=100{cursor}",
                m.profile_id
            ),
        )
        .await;
        assert_eq!(page.status, 200, "{}", page.body);
        for e in page.body["data"].as_array().unwrap() {
            assert!(e["balance_transaction_id"]
                .as_str()
                .unwrap()
                .starts_with("bt_"));
            match e["bucket"].as_str().unwrap() {
                "pending" => pending += e["amount"].as_i64().unwrap(),
                _ => available += e["amount"].as_i64().unwrap(),
            }
            after = e["balance_transaction_id"].as_str().map(str::to_owned);
        }
        if page.body["has_more"] != true {
            return (available, pending);
        }
    }
    panic!("more than 100 pages of entries");
}

async fn payout(
    app: &TestApp,
    m: &Merchant,
    amount: i64,
    account: &str,
    extra: Value,
) -> common::Answer {
    let mut body = json!({"amount": amount, "currency": "EUR", "destination": bank(account)});
    for (k, v) in extra.as_object().unwrap() {
        body[k] = v.clone();
    }
    post(app, m, "/payouts/create", body).await
}

fn pid(v: &Value) -> String {
    v["payout_id"].as_str().unwrap().to_owned()
}

#[actix_web::test]
async fn payouts_reserve_and_pay_release_or_reverse_through_the_ledger() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    capture(&app, &m, 10_000, "4242424242424242").await;
    assert_eq!(balance(&app, &m).await, (10_000, 0));

    // Created, updated, confirmed (reserved), fulfilled (paid).
    let p = payout(
        &app,
        &m,
        3_000,
        "000123456789",
        json!({"description": "weekly"}),
    )
    .await;
    assert_eq!(p.status, 201, "{}", p.body);
    assert_eq!(p.body["status"], "requires_confirmation");
    assert_eq!(p.body["destination"]["last4"], "6789");
    assert!(
        !p.body.to_string().contains("000123456789"),
        "the account number is never shown"
    );
    let id = pid(&p.body);
    let r = app
        .call(
            &m,
            Method::PUT,
            &format!("/payouts/{id}"),
            Some(json!({"amount": 2_500})),
        )
        .await;
    assert_eq!(
        (r.status, r.body["amount"].as_i64()),
        (200, Some(2_500)),
        "{}",
        r.body
    );
    let r = post(&app, &m, &format!("/payouts/{id}/fulfill"), json!({})).await;
    assert_eq!(
        (r.status, r.code()),
        (409, "invalid_state"),
        "fulfil before confirm"
    );
    let r = post(&app, &m, &format!("/payouts/{id}/confirm"), json!({})).await;
    assert_eq!(r.body["status"], "requires_fulfillment", "{}", r.body);
    assert_eq!(balance(&app, &m).await, (7_500, 2_500));
    let r = app
        .call(
            &m,
            Method::PUT,
            &format!("/payouts/{id}"),
            Some(json!({"amount": 1})),
        )
        .await;
    assert_eq!(
        (r.status, r.code()),
        (409, "invalid_state"),
        "update after confirm"
    );
    let r = post(&app, &m, &format!("/payouts/{id}/fulfill"), json!({})).await;
    assert_eq!(r.body["status"], "success", "{}", r.body);
    assert_eq!(balance(&app, &m).await, (7_500, 0));
    for action in ["confirm", "fulfill", "cancel"] {
        let r = post(&app, &m, &format!("/payouts/{id}/{action}"), json!({})).await;
        assert_eq!(
            (r.status, r.code()),
            (409, "invalid_state"),
            "{action} after success"
        );
    }
    let types = app.event_types(&m, &id).await;
    assert_eq!(types, ["payout_initiated", "payout_success"]);

    // Failed and ineligible: released at once, with the reason.
    let f = payout(
        &app,
        &m,
        1_000,
        "000111111116",
        json!({"confirm": true, "auto_fulfill": true}),
    )
    .await;
    assert_eq!(
        (
            f.body["status"].as_str(),
            f.body["failure"]["code"].as_str()
        ),
        (Some("failed"), Some("account_closed")),
        "{}",
        f.body
    );
    let i = payout(
        &app,
        &m,
        1_000,
        "000444444446",
        json!({"confirm": true, "auto_fulfill": true}),
    )
    .await;
    assert_eq!(i.body["status"], "ineligible", "{}", i.body);
    assert_eq!(balance(&app, &m).await, (7_500, 0));
    for failed in [pid(&f.body), pid(&i.body)] {
        let r = post(&app, &m, &format!("/payouts/{failed}/cancel"), json!({})).await;
        assert_eq!((r.status, r.code()), (409, "invalid_state"));
    }
    assert_eq!(
        app.event_types(&m, &pid(&f.body)).await,
        ["payout_initiated", "payout_failed"]
    );

    // Pending at the processor: cancelled through it, the reservation released.
    let c = payout(
        &app,
        &m,
        500,
        "000222222226",
        json!({"confirm": true, "auto_fulfill": true}),
    )
    .await;
    assert_eq!(c.body["status"], "pending", "{}", c.body);
    assert_eq!(balance(&app, &m).await, (7_000, 500));
    let r = post(
        &app,
        &m,
        &format!("/payouts/{}/cancel", pid(&c.body)),
        json!({}),
    )
    .await;
    assert_eq!(r.body["status"], "cancelled", "{}", r.body);
    assert_eq!(balance(&app, &m).await, (7_500, 0));

    // Pending, then paid; paid, then reversed: settled by the processor on its own time.
    let later = payout(
        &app,
        &m,
        700,
        "000222222226",
        json!({"confirm": true, "auto_fulfill": true}),
    )
    .await;
    let back = payout(
        &app,
        &m,
        800,
        "000333333336",
        json!({"confirm": true, "auto_fulfill": true}),
    )
    .await;
    assert_eq!(
        (later.body["status"].as_str(), back.body["status"].as_str()),
        (Some("pending"), Some("success"))
    );
    assert_eq!(balance(&app, &m).await, (6_000, 700));
    app.clock.advance(Duration::hours(1));
    let deadline = Instant::now() + StdDuration::from_secs(10);
    loop {
        let a = get(&app, &m, &format!("/payouts/{}", pid(&later.body)))
            .await
            .body;
        let b = get(&app, &m, &format!("/payouts/{}", pid(&back.body)))
            .await
            .body;
        if a["status"] == "success" && b["status"] == "reversed" {
            break;
        }
        assert!(Instant::now() < deadline, "never settled: {a} {b}");
        actix_web::rt::time::sleep(StdDuration::from_millis(25)).await;
    }
    assert_eq!(balance(&app, &m).await, (6_800, 0));
    assert_eq!(
        app.event_types(&m, &pid(&back.body)).await,
        ["payout_initiated", "payout_success", "payout_reversed"]
    );

    // More than is available: refused, and nothing made.
    let r = payout(&app, &m, 6_801, "000123456789", json!({"confirm": true})).await;
    assert_eq!(
        (r.status, r.code(), r.param()),
        (400, "insufficient_balance", Some("amount"))
    );
    let list = get(&app, &m, "/payouts/list?limit=100").await;
    assert_eq!(
        list.body["data"].as_array().unwrap().len(),
        6,
        "{}",
        list.body
    );
    let filtered = post(
        &app,
        &m,
        "/payouts/list",
        json!({"status": "success", "amount_gte": 700}),
    )
    .await;
    assert_eq!(
        filtered.body["data"].as_array().unwrap().len(),
        2,
        "{}",
        filtered.body
    );
    assert_eq!(ledger_sums(&app, &m).await, balance(&app, &m).await);

    // Bad input names the field; another merchant sees nothing.
    for (body, param) in [
        (
            json!({"amount": 0, "currency": "EUR", "destination": bank("000123456789")}),
            "amount",
        ),
        (
            json!({"amount": 1, "currency": "EURO", "destination": bank("000123456789")}),
            "currency",
        ),
        (
            json!({"amount": 1, "currency": "EUR", "destination": {}}),
            "destination",
        ),
        (
            json!({"amount": 1, "currency": "EUR", "destination": bank("x")}),
            "destination.bank_account.account_number",
        ),
        (
            json!({"amount": 1, "currency": "EUR", "destination": {"card": {"number": "4242424242424241",
            "exp_month": 1, "exp_year": 2040}}}),
            "destination.card.number",
        ),
    ] {
        let r = post(&app, &m, "/payouts/create", body.clone()).await;
        assert_eq!(
            (r.status, r.param()),
            (400, Some(param)),
            "{body}: {}",
            r.body
        );
    }
    let other = app.create_merchant("Other").await;
    assert_eq!(
        get(&app, &other, &format!("/payouts/{id}")).await.status,
        404
    );
    assert_eq!(
        post(&app, &other, &format!("/payouts/{id}/cancel"), json!({}))
            .await
            .status,
        404
    );
    assert_eq!(
        get(
            &app,
            &other,
            &format!("/account/shops/{}/balance", m.profile_id)
        )
        .await
        .status,
        404
    );
    app.stop().await;
}

#[actix_web::test]
async fn the_ledger_sums_to_the_balance_after_a_mixed_history() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let a = capture(&app, &m, 5_000, "4242424242424242").await;
    // A partial refund, a refund that fails (released), a dispute the shop accepts.
    let r = post(
        &app,
        &m,
        "/refunds",
        json!({"payment_id": a["payment_id"], "amount": 1_200}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let failing = capture(&app, &m, 2_000, "4000000000005126").await;
    let r = post(
        &app,
        &m,
        "/refunds",
        json!({"payment_id": failing["payment_id"], "amount": 700}),
    )
    .await;
    let refund_id = r.body["refund_id"].as_str().unwrap().to_owned();
    assert_eq!(balance(&app, &m).await, (5_000 - 1_200 + 2_000 - 700, 0));
    app.clock.advance(Duration::seconds(6));
    let r = get(&app, &m, &format!("/refunds/{refund_id}?force_sync=true")).await;
    assert_eq!(r.body["status"], "failed", "{}", r.body);
    let disputed = capture(&app, &m, 1_000, "4000000000000259").await;
    let pay_id = disputed["payment_id"].as_str().unwrap();
    app.clock.advance(Duration::seconds(6));
    let deadline = Instant::now() + StdDuration::from_secs(10);
    let dispute = loop {
        let r = get(&app, &m, &format!("/disputes/list?payment_id={pay_id}")).await;
        if let Some(d) = r.body["data"].as_array().and_then(|d| d.first()) {
            break d.clone();
        }
        assert!(Instant::now() < deadline, "no dispute opened");
        actix_web::rt::time::sleep(StdDuration::from_millis(25)).await;
    };
    let r = post(
        &app,
        &m,
        &format!(
            "/disputes/accept/{}",
            dispute["dispute_id"].as_str().unwrap()
        ),
        json!({}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let expected = 5_000 - 1_200 + 2_000 + 1_000 - dispute["amount"].as_i64().unwrap();
    assert_eq!(balance(&app, &m).await, (expected, 0));
    // A payout failed and one reversed leave the balance where it was.
    payout(
        &app,
        &m,
        300,
        "000111111116",
        json!({"confirm": true, "auto_fulfill": true}),
    )
    .await;
    let back = payout(
        &app,
        &m,
        400,
        "000333333336",
        json!({"confirm": true, "auto_fulfill": true}),
    )
    .await;
    app.clock.advance(Duration::hours(1));
    let r = get(
        &app,
        &m,
        &format!("/payouts/{}?force_sync=true", pid(&back.body)),
    )
    .await;
    assert_eq!(r.body["status"], "reversed", "{}", r.body);
    assert_eq!(balance(&app, &m).await, (expected, 0));
    assert_eq!(ledger_sums(&app, &m).await, (expected, 0));
    // The reservations' running total is the entries' sum to the unit: one unit more than is
    // available is refused, exactly what is available is paid out.
    let over = payout(
        &app,
        &m,
        expected + 1,
        "000123456789",
        json!({"confirm": true}),
    )
    .await;
    assert_eq!(
        (over.status, over.code()),
        (400, "insufficient_balance"),
        "{}",
        over.body
    );
    let all = payout(&app, &m, expected, "000123456789", json!({"confirm": true})).await;
    assert_eq!(all.status, 201, "{}", all.body);
    assert_eq!(balance(&app, &m).await, (0, expected));
    assert_eq!(ledger_sums(&app, &m).await, (0, expected));
    let kinds = get(
        &app,
        &m,
        &format!(
            "/account/shops/{}/balance-transactions?type=refund_failure",
            m.profile_id
        ),
    )
    .await;
    assert_eq!(
        kinds.body["data"][0]["source_id"].as_str(),
        Some(refund_id.as_str()),
        "{}",
        kinds.body
    );
    app.stop().await;
}

#[actix_web::test]
async fn twenty_concurrent_payouts_take_no_more_than_the_available_balance() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    capture(&app, &m, 10_000, "4242424242424242").await;
    let answers = futures_util::future::join_all((0..20).map(|_| {
        let (app, m) = (&app, &m);
        async move { payout(app, m, 700, "000123456789", json!({"confirm": true})).await }
    }))
    .await;
    let made = answers.iter().filter(|r| r.status == 201).count();
    for r in answers.iter().filter(|r| r.status != 201) {
        assert_eq!(
            (r.status, r.code()),
            (400, "insufficient_balance"),
            "{}",
            r.body
        );
    }
    assert_eq!(made, 14, "10 000 holds fourteen payouts of 700");
    assert_eq!(balance(&app, &m).await, (200, 9_800));
    assert_eq!(ledger_sums(&app, &m).await, (200, 9_800));
    app.stop().await;
}

/// Issue 42, item 12: refunds may take the available balance below zero (the buyer is paid
/// back whatever the shop paid out), payouts never: fired together, the payouts take no more
/// than was available, the balance shows the negative number, and payouts are refused while
/// it is negative.
#[actix_web::test]
async fn refunds_may_take_the_balance_below_zero_payouts_never_and_none_is_made_meanwhile() {
    let app = spawn_app().await;
    for round in 0..3 {
        let m = app.create_merchant(&format!("Shop {round}")).await;
        let mut payments = Vec::new();
        for _ in 0..5 {
            payments.push(capture(&app, &m, 1_000, "4242424242424242").await);
        }
        assert_eq!(balance(&app, &m).await, (5_000, 0));
        // Five refunds and five payouts of 1 000 at once (ten requests in flight).
        let refunds = futures_util::future::join_all(payments.iter().map(|p| {
            let (app, m) = (&app, &m);
            async move { post(app, m, "/refunds", json!({"payment_id": p["payment_id"]})).await }
        }));
        let payouts = futures_util::future::join_all((0..5).map(|_| {
            let (app, m) = (&app, &m);
            async move { payout(app, m, 1_000, "000123456789", json!({"confirm": true})).await }
        }));
        let (refunds, payouts) = futures_util::future::join(refunds, payouts).await;
        for r in &refunds {
            assert_eq!(
                r.status, 201,
                "a refund is never refused for the balance: {}",
                r.body
            );
        }
        for r in payouts.iter().filter(|r| r.status != 201) {
            assert_eq!(
                (r.status, r.code(), r.param()),
                (400, "insufficient_balance", Some("amount")),
                "{}",
                r.body
            );
        }
        let made = payouts.iter().filter(|r| r.status == 201).count() as i64;
        assert!(made * 1_000 <= 5_000, "round {round}: {made} payouts");
        // Each made payout holds its amount; the refunds took all 5 000 whatever came first.
        let expected = (5_000 - 5_000 - made * 1_000, made * 1_000);
        assert_eq!(balance(&app, &m).await, expected, "round {round}");
        assert_eq!(ledger_sums(&app, &m).await, expected, "round {round}");

        // However the race went: a capture that brings the balance to 1 000, a payout of it,
        // then the capture refunded leave the balance negative for sure.
        let p = capture(&app, &m, made * 1_000 + 1_000, "4242424242424242").await;
        assert_eq!(balance(&app, &m).await.0, 1_000);
        let held = payout(&app, &m, 1_000, "000123456789", json!({"confirm": true})).await;
        assert_eq!(held.status, 201, "{}", held.body);
        let r = post(&app, &m, "/refunds", json!({"payment_id": p["payment_id"]})).await;
        assert_eq!(r.status, 201, "{}", r.body);
        let negative = -(made + 1) * 1_000;
        assert_eq!(
            balance(&app, &m).await,
            (negative, (made + 1) * 1_000),
            "the balance shows the negative amount"
        );

        // While negative, no payout: created confirmed, or confirmed later.
        let r = payout(&app, &m, 1, "000123456789", json!({"confirm": true})).await;
        assert_eq!(
            (r.status, r.code(), r.param()),
            (400, "insufficient_balance", Some("amount")),
            "{}",
            r.body
        );
        let waiting = payout(&app, &m, 1, "000123456789", json!({})).await;
        assert_eq!(waiting.status, 201, "{}", waiting.body);
        let r = post(
            &app,
            &m,
            &format!("/payouts/{}/confirm", pid(&waiting.body)),
            json!({}),
        )
        .await;
        assert_eq!(
            (r.status, r.code(), r.param()),
            (400, "insufficient_balance", Some("amount")),
            "{}",
            r.body
        );
        assert_eq!(balance(&app, &m).await.0, negative);

        // New captures cover the debt first; then payouts resume.
        capture(&app, &m, -negative + 300, "4242424242424242").await;
        assert_eq!(balance(&app, &m).await.0, 300);
        let r = payout(&app, &m, 301, "000123456789", json!({"confirm": true})).await;
        assert_eq!((r.status, r.code()), (400, "insufficient_balance"));
        let r = payout(&app, &m, 300, "000123456789", json!({"confirm": true})).await;
        assert_eq!(r.status, 201, "{}", r.body);
        assert_eq!(balance(&app, &m).await, (0, (made + 1) * 1_000 + 300));
    }
    app.stop().await;
}

#[actix_web::test]
async fn a_payout_left_unfulfilled_expires_and_gives_its_reservation_back() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    capture(&app, &m, 2_000, "4242424242424242").await;
    let held = payout(&app, &m, 1_500, "000123456789", json!({"confirm": true})).await;
    let waiting = payout(&app, &m, 100, "000123456789", json!({})).await;
    assert_eq!(balance(&app, &m).await, (500, 1_500));
    app.clock.advance(Duration::hours(23));
    app.run_due_jobs().await;
    let r = get(&app, &m, &format!("/payouts/{}", pid(&held.body))).await;
    assert_eq!(r.body["status"], "requires_fulfillment", "not yet");
    app.clock.advance(Duration::hours(2));
    let deadline = Instant::now() + StdDuration::from_secs(10);
    loop {
        let a = get(&app, &m, &format!("/payouts/{}", pid(&held.body)))
            .await
            .body;
        let b = get(&app, &m, &format!("/payouts/{}", pid(&waiting.body)))
            .await
            .body;
        if a["status"] == "expired" && b["status"] == "expired" {
            break;
        }
        assert!(Instant::now() < deadline, "never expired: {a} {b}");
        actix_web::rt::time::sleep(StdDuration::from_millis(25)).await;
    }
    assert_eq!(balance(&app, &m).await, (2_000, 0));
    assert_eq!(
        app.event_types(&m, &pid(&held.body)).await,
        ["payout_expired"]
    );
    let r = post(
        &app,
        &m,
        &format!("/payouts/{}/fulfill", pid(&held.body)),
        json!({}),
    )
    .await;
    assert_eq!((r.status, r.code()), (409, "invalid_state"));
    app.stop().await;
}

/// A stored status that is none of a payout's is a read error (500), never read as `failed`:
/// commands are not refused as if it had failed, and what it holds is not released.
#[actix_web::test]
async fn a_corrupt_payout_status_answers_500_and_keeps_its_reservation() {
    use sea_orm::ConnectionTrait;
    let db = std::sync::Arc::new(common::TestDb::new().await);
    let app = common::spawn_with(db, &[("PAYD_ACTORS__ROW_CACHE_MS", "1")]).await;
    let m = app.create_merchant("Acme").await;
    capture(&app, &m, 2_000, "4242424242424242").await;
    let held = payout(&app, &m, 1_500, "000123456789", json!({"confirm": true})).await;
    let id = pid(&held.body);
    assert_eq!(balance(&app, &m).await, (500, 1_500));
    app.state
        .db
        .execute_unprepared(&format!(
            "UPDATE payouts SET status = 'paid_out' WHERE id = '{id}'"
        ))
        .await
        .unwrap();
    // Past the actor's row cache, so the next command reads the corrupt row.
    actix_web::rt::time::sleep(StdDuration::from_millis(50)).await;
    assert_eq!(get(&app, &m, &format!("/payouts/{id}")).await.status, 500);
    for action in ["cancel", "fulfill"] {
        let r = post(&app, &m, &format!("/payouts/{id}/{action}"), json!({})).await;
        assert_eq!(r.status, 500, "{action}: {}", r.body);
    }
    assert_eq!(balance(&app, &m).await, (500, 1_500));
    app.stop().await;
}

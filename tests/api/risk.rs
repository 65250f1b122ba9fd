//! Shops' risk bands (assessed by the operator and on the schedule, a chain of records, one
//! `shop_risk_band_escalated` per rise) and the replay of a time range of events.

use crate::common;

use std::time::{Duration as StdDuration, Instant};

use actix_web::http::Method;
use chrono::Duration;
use common::{
    card,
    receiver::{Receiver, Reply},
    spawn_with, Merchant, TestApp, TestDb, ADMIN_KEY,
};
use payd::{clock::Clock, risk::store::ASSESS_JOB};
use serde_json::{json, Value};

const DISPUTED: &str = "4000000000000259";
const ESCALATED: &str = "shop_risk_band_escalated";

async fn pay(app: &TestApp, m: &Merchant, number: &str, amount: i64) -> String {
    let r = app
        .create_payment(
            m,
            json!({"amount": amount, "currency": "EUR", "confirm": true, "payment_method_data": card(number)}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["payment_id"].as_str().unwrap().to_owned()
}

async fn confirm(app: &TestApp, m: &Merchant, id: &str, number: &str) -> common::Answer {
    app.call(
        m,
        Method::POST,
        &format!("/payments/{id}/confirm"),
        Some(json!({"payment_method_data": card(number)})),
    )
    .await
}

async fn assess(app: &TestApp, shop: &str) -> common::Answer {
    app.post(
        &format!("/admin/shops/{shop}/risk/assess"),
        ADMIN_KEY,
        json!({}),
    )
    .await
}

async fn escalations(app: &TestApp, m: &Merchant) -> Vec<Value> {
    let r = app
        .call(
            m,
            Method::POST,
            &format!("/events/{}", m.merchant_id),
            Some(json!({"event_type": ESCALATED, "limit": 100})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let mut events = r.body["data"].as_array().unwrap().clone();
    events.reverse();
    events
}

/// Waits (bounded) until the shop has `n` disputes.
async fn wait_for_disputes(app: &TestApp, m: &Merchant, n: usize) {
    let deadline = Instant::now() + StdDuration::from_secs(10);
    loop {
        let r = app
            .call(m, Method::GET, "/disputes/list?limit=100", None)
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
        if r.body["data"].as_array().unwrap().len() >= n {
            return;
        }
        assert!(Instant::now() < deadline, "disputes never opened");
        actix_web::rt::time::sleep(StdDuration::from_millis(25)).await;
    }
}

async fn risk(app: &TestApp, m: &Merchant, query: &str) -> common::Answer {
    app.call(
        m,
        Method::GET,
        &format!("/account/shops/{}/risk{query}", m.profile_id),
        None,
    )
    .await
}

#[actix_web::test]
async fn a_band_escalates_once_per_rise_and_never_when_it_stays_or_falls() {
    let db = std::sync::Arc::new(TestDb::new().await);
    let app = spawn_with(
        db,
        &[
            ("PAYD_RISK__MIN_PAYMENTS", "5"),
            ("PAYD_RISK__WINDOW", "1d"),
            ("PAYD_RISK__ASSESS_EVERY", "3d"),
        ],
    )
    .await;
    // The schedule's start-up run finds no shop in use; on a loaded machine it could run after
    // the payments below instead, and record a band before the operator's first assessment.
    let deadline = Instant::now() + StdDuration::from_secs(10);
    let started = app.clock.now();
    while app
        .state
        .scheduler
        .due_at(ASSESS_JOB, "all")
        .await
        .unwrap()
        .is_none_or(|due| due <= started)
    {
        assert!(Instant::now() < deadline, "the start-up run never ran");
        actix_web::rt::time::sleep(StdDuration::from_millis(10)).await;
    }
    let m = app.create_merchant("Acme").await;
    let other = app.create_merchant("Other").await;

    // Before any assessment: low, nothing recorded.
    let r = risk(&app, &m, "").await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        (r.body["band"].as_str(), &r.body["latest"]),
        (Some("low"), &Value::Null)
    );

    for _ in 0..9 {
        pay(&app, &m, "4242424242424242", 1000).await;
    }
    let first = assess(&app, &m.profile_id).await;
    assert_eq!(first.status, 200, "{}", first.body);
    assert_eq!(first.body["band"], "low");
    assert_eq!(first.body["previous_band"], Value::Null);
    assert_eq!(first.body["figures"]["volume"], 9);
    assert_eq!(first.body["trigger"], "operator");
    assert_eq!(first.body["window"], 86_400);
    assert!(escalations(&app, &m).await.is_empty(), "low is no rise");

    // One dispute in ten payments: 10 % is over every dispute threshold.
    pay(&app, &m, DISPUTED, 1000).await;
    app.clock.advance(Duration::seconds(6));
    wait_for_disputes(&app, &m, 1).await;
    // Four operators assess at once: the chain stays a chain and the rise is sent once.
    let rises = futures_util::future::join_all((0..4).map(|_| assess(&app, &m.profile_id))).await;
    for r in &rises {
        assert_eq!(r.status, 200, "{}", r.body);
        assert_eq!(r.body["band"], "critical");
    }
    let previous: Vec<&str> = rises
        .iter()
        .map(|r| r.body["previous_band"].as_str().unwrap())
        .collect();
    assert_eq!(
        previous.iter().filter(|b| **b == "low").count(),
        1,
        "exactly one assessment follows the low one: {previous:?}"
    );
    let sent = escalations(&app, &m).await;
    assert_eq!(sent.len(), 1, "{sent:?}");
    let object = &sent[0]["envelope"]["content"];
    assert_eq!(object["type"], "shop_risk_details");
    assert_eq!(object["object"]["profile_id"], m.profile_id.as_str());
    assert_eq!(object["object"]["previous_band"], "low");
    assert_eq!(object["object"]["band"], "critical");
    assert_eq!(object["object"]["figures"]["dispute_rate"], 0.1);
    assert_eq!(object["object"]["figures"]["disputes"], 1);

    // The same band again: nothing sent.
    let same = assess(&app, &m.profile_id).await;
    assert_eq!(
        (
            same.body["band"].as_str(),
            same.body["previous_band"].as_str()
        ),
        (Some("critical"), Some("critical"))
    );
    assert_eq!(escalations(&app, &m).await.len(), 1);

    // Two days on, everything has left the window; the schedule (due after three days of
    // its first run at start-up) has not run, so the operator's assessment sees the fall.
    app.clock.advance(Duration::days(2));
    let fall = assess(&app, &m.profile_id).await;
    assert_eq!(
        (
            fall.body["band"].as_str(),
            fall.body["previous_band"].as_str()
        ),
        (Some("low"), Some("critical"))
    );
    assert_eq!(
        escalations(&app, &m).await.len(),
        1,
        "a fall is not announced"
    );

    // Declines rise it again (6 of 6 failed): a second escalation, from low.
    for _ in 0..6 {
        let r = app
            .create_payment(
                &m,
                json!({"amount": 1000, "currency": "EUR", "confirm": true, "payment_method_data": card("4000000000000002")}),
            )
            .await;
        assert!(r.status == 201 || r.status == 402, "{}", r.body);
    }
    // The schedule runs a day later and records it.
    app.clock.advance(Duration::days(1) + Duration::minutes(1));
    let deadline = Instant::now() + StdDuration::from_secs(10);
    let scheduled = loop {
        let r = risk(&app, &m, "").await;
        if r.body["latest"]["trigger"] == "schedule" {
            break r.body["latest"].clone();
        }
        assert!(
            Instant::now() < deadline,
            "the schedule never assessed: {}",
            r.body
        );
        actix_web::rt::time::sleep(StdDuration::from_millis(25)).await;
    };
    assert_eq!(
        (
            scheduled["band"].as_str(),
            scheduled["previous_band"].as_str()
        ),
        (Some("low"), Some("low")),
        "the declines left the window with the day: {scheduled}"
    );

    // The records, newest first, with cursors.
    let all = risk(&app, &m, "?limit=100").await;
    let history = all.body["history"]["data"].as_array().unwrap();
    assert_eq!(history.len(), 8, "{}", all.body);
    assert_eq!(history[0], all.body["latest"]);
    let page = risk(&app, &m, "?limit=3").await;
    assert_eq!(page.body["history"]["has_more"], true);
    let last = page.body["history"]["data"][2]["risk_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let next = risk(&app, &m, &format!("?limit=3&starting_after={last}")).await;
    assert_eq!(next.body["history"]["data"][0], history[3]);

    // Another merchant's shop is not there for anyone else.
    let theirs = app
        .send(
            Method::GET,
            &format!("/account/shops/{}/risk", m.profile_id),
            Some(&other.secret_key),
            None,
            &[],
        )
        .await;
    assert_eq!(theirs.status, 404, "{}", theirs.body);
    let merchant_key = app
        .post(
            &format!("/admin/shops/{}/risk/assess", m.profile_id),
            &m.secret_key,
            json!({}),
        )
        .await;
    assert_eq!(merchant_key.status, 401, "{}", merchant_key.body);
    let unknown = assess(&app, "prof_00000000000000000000000000000000").await;
    assert_eq!((unknown.status, unknown.param()), (404, Some("profile_id")));
    let bad = risk(&app, &m, "?limit=0").await;
    assert_eq!((bad.status, bad.param()), (400, Some("limit")));
}

/// Issue 42, item 7: payments declined `card_declined` stay `declined` (retryable), and each
/// declined attempt counts as a decline; the volume is authorized payments plus declines.
#[actix_web::test]
async fn declined_attempts_count_as_declines_and_raise_the_band() {
    let app = common::spawn_app().await;
    let m = app.create_merchant("Acme").await;
    for _ in 0..2 {
        pay(&app, &m, "4242424242424242", 1000).await;
    }
    let mut declined = Vec::new();
    for _ in 0..13 {
        let r = app
            .create_payment(
                &m,
                json!({"amount": 1000, "currency": "EUR", "confirm": true,
                    "payment_method_data": card("4000000000000002")}),
            )
            .await;
        assert!(r.status == 201 || r.status == 402, "{}", r.body);
        assert_eq!(r.body["status"], "declined", "{}", r.body);
        declined.push(r.body["payment_id"].as_str().unwrap().to_owned());
    }
    // A second attempt of one of them is declined too, and one more is approved at last.
    let again = confirm(&app, &m, &declined[0], "4000000000000002").await;
    assert_eq!(again.body["status"], "declined", "{}", again.body);
    let approved = confirm(&app, &m, &declined[1], "4242424242424242").await;
    assert_eq!(approved.body["status"], "succeeded", "{}", approved.body);

    let r = assess(&app, &m.profile_id).await;
    assert_eq!(r.status, 200, "{}", r.body);
    // 3 authorized (two at once, one at its second attempt) and 14 declined attempts.
    assert_eq!(r.body["figures"]["declines"], 14, "{}", r.body);
    assert_eq!(r.body["figures"]["volume"], 17, "{}", r.body);
    let rate = r.body["figures"]["decline_rate"].as_f64().unwrap();
    assert!((rate - 0.8235).abs() < 1e-9 && rate <= 1.0, "{}", r.body);
    assert_eq!(r.body["band"], "critical", "{}", r.body);
    assert_eq!(escalations(&app, &m).await.len(), 1);
    app.stop().await;
}

#[actix_web::test]
async fn a_replay_queues_the_failed_events_of_a_range_within_its_bound() {
    let db = std::sync::Arc::new(TestDb::new().await);
    let app = spawn_with(db, &[("PAYD_WEBHOOKS__REPLAY_MAX", "50")]).await;
    let receiver = Receiver::start().await;
    let m = app.create_merchant("Acme").await;
    app.set_webhook(&m, &receiver.url).await;
    let since = app.clock.now() - Duration::minutes(1);

    // 30 events the receiver refuses (400: failed at once), then 70 it takes.
    receiver.set_default(Reply::status(400));
    for _ in 0..30 {
        pay(&app, &m, "4242424242424242", 700).await;
    }
    receiver.wait_for(30).await;
    let failed = wait_for_failed(&app, &m, 30).await;
    receiver.set_default(Reply::status(200));
    for _ in 0..70 {
        pay(&app, &m, "4242424242424242", 1000).await;
    }
    receiver.wait_for(100).await;
    let everything = app
        .call(
            &m,
            Method::POST,
            &format!("/events/{}", m.merchant_id),
            Some(json!({"limit": 100})),
        )
        .await;
    assert_eq!(everything.body["data"].as_array().unwrap().len(), 100);

    let replay = |body: Value| {
        let app = &app;
        let path = format!("/events/{}/replay", m.merchant_id);
        let m = &m;
        async move { app.call(m, Method::POST, &path, Some(body)).await }
    };
    // Only the failed ones: exactly the 30, oldest first, as manual attempts.
    let r = replay(json!({"since": since, "only_failed": true})).await;
    assert_eq!(r.status, 202, "{}", r.body);
    assert_eq!(r.body["queued"], 30, "{}", r.body);
    assert_eq!(r.body["has_more"], false);
    let ids: Vec<String> = r.body["event_ids"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect();
    assert_eq!(ids, failed, "the failed events, oldest first");
    receiver.wait_for(130).await;
    let deadline = Instant::now() + StdDuration::from_secs(10);
    loop {
        let attempts = app
            .call(
                &m,
                Method::GET,
                &format!("/events/{}/{}/attempts", m.merchant_id, ids[0]),
                None,
            )
            .await;
        let triggers: Vec<String> = attempts.body["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a["trigger"].as_str().unwrap().to_owned())
            .collect();
        if triggers == ["initial", "manual"] {
            break;
        }
        assert!(Instant::now() < deadline, "attempts: {triggers:?}");
        actix_web::rt::time::sleep(StdDuration::from_millis(25)).await;
    }

    // The bound: at most replay_max (50) per call, and a cursor to go on.
    let r = replay(json!({"since": since})).await;
    assert_eq!(
        (r.body["queued"].as_u64(), r.body["has_more"].as_bool()),
        (Some(50), Some(true))
    );
    let next = r.body["next"].as_str().unwrap().to_owned();
    let deadline = Instant::now() + StdDuration::from_secs(20);
    let rest = loop {
        let r = replay(json!({"since": since, "starting_after": next})).await;
        if r.status == 202 {
            break r;
        }
        // The first 50 may still be in the merchant's queue.
        assert_eq!(r.status, 429, "{}", r.body);
        assert!(Instant::now() < deadline, "the queue never emptied");
        actix_web::rt::time::sleep(StdDuration::from_millis(100)).await;
    };
    assert_eq!(
        (
            rest.body["queued"].as_u64(),
            rest.body["has_more"].as_bool()
        ),
        (Some(50), Some(false))
    );
    assert_eq!(rest.body["next"], Value::Null);
    let too_many = replay(json!({"since": since, "limit": 51})).await;
    assert_eq!((too_many.status, too_many.param()), (400, Some("limit")));
    let backwards = replay(json!({"since": app.clock.now(), "until": since})).await;
    assert_eq!((backwards.status, backwards.param()), (400, Some("until")));
    let missing = replay(json!({})).await;
    assert_eq!(missing.status, 400, "{}", missing.body);
    let types = replay(json!({"since": since, "event_types": ["Not A Type"]})).await;
    assert_eq!((types.status, types.param()), (400, Some("event_types")));
    // Only payment_failed: none of these.
    let none = replay(json!({"since": since, "event_types": ["payment_failed"]})).await;
    assert_eq!(none.body["queued"], 0, "{}", none.body);

    // Another merchant's id in the path: 404.
    let other = app.create_merchant("Other").await;
    let r = app
        .call(
            &m,
            Method::POST,
            &format!("/events/{}/replay", other.merchant_id),
            Some(json!({"since": since})),
        )
        .await;
    assert_eq!(r.status, 404, "{}", r.body);
}

/// Waits (bounded) until `n` events are failed; returns their ids, oldest first.
async fn wait_for_failed(app: &TestApp, m: &Merchant, n: usize) -> Vec<String> {
    let deadline = Instant::now() + StdDuration::from_secs(15);
    loop {
        let r = app
            .call(
                m,
                Method::POST,
                &format!("/events/{}", m.merchant_id),
                Some(json!({"limit": 100})),
            )
            .await;
        let failed: Vec<String> = r.body["data"]
            .as_array()
            .unwrap()
            .iter()
            .rev()
            .filter(|e| e["delivery_status"] == "failed")
            .map(|e| e["event_id"].as_str().unwrap().to_owned())
            .collect();
        if failed.len() >= n {
            return failed;
        }
        assert!(Instant::now() < deadline, "only {} failed", failed.len());
        actix_web::rt::time::sleep(StdDuration::from_millis(50)).await;
    }
}

/// An assessment whose stored thresholds no longer decode (edited by hand) makes the shop's
/// risk a 500, logged with its column and row; it showed `thresholds: null`, as if the band
/// had been decided under none.
#[actix_web::test]
async fn thresholds_that_do_not_decode_are_an_error_not_null() {
    use sea_orm::ConnectionTrait;
    let app = spawn_with(std::sync::Arc::new(TestDb::new().await), &[]).await;
    let m = app.create_merchant("Acme").await;
    let r = assess(&app, &m.profile_id).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = risk(&app, &m, "").await;
    assert!(r.body["latest"]["thresholds"].is_object(), "{}", r.body);
    let edit = format!(
        "UPDATE risk_assessments SET thresholds = 'high' WHERE profile_id = '{}'",
        m.profile_id
    );
    app.state.db.execute_unprepared(&edit).await.unwrap();
    let r = risk(&app, &m, "").await;
    assert_eq!(r.status, 500, "{}", r.body);
}

//! Wallet processor cases: the sandbox wallet's triggers, import onto disputes (twice changes
//! nothing), the actions each status allows, stage changes, withdrawal, resolutions that limit
//! refunds, history, and other merchants kept out.

use crate::common;

use std::time::{Duration as StdDuration, Instant};

use actix_web::http::Method;
use chrono::Duration;
use common::{card, spawn_app, spawn_with, Merchant, TestApp, TestDb};
use serde_json::{json, Value};

/// A captured payment of `amount`.
async fn paid(app: &TestApp, m: &Merchant, amount: i64) -> String {
    let r = app
        .create_payment(
            m,
            json!({"amount": amount, "currency": "EUR", "confirm": true,
                "payment_method_data": card("4242424242424242")}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body["payment_id"].as_str().unwrap().to_owned()
}

/// The sandbox buyer opens a case of this type against the payment.
async fn open_case(app: &TestApp, m: &Merchant, payment_id: &str, case_type: &str) -> Value {
    let r = app
        .call(
            m,
            Method::POST,
            "/sandbox/wallet/cases",
            Some(json!({"payment_id": payment_id, "case_type": case_type,
                "reason": "Item not received"})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body
}

async fn import(app: &TestApp, m: &Merchant, body: Value) -> Value {
    let r = app
        .call(m, Method::POST, "/disputes/wallet/import", Some(body))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body
}

/// Imports one case and returns its dispute.
async fn imported(app: &TestApp, m: &Merchant, case_id: &str) -> Value {
    let report = import(app, m, json!({"case_ids": [case_id]})).await;
    let id = report["data"][0]["dispute_id"].as_str().unwrap().to_owned();
    dispute(app, m, &id).await
}

async fn dispute(app: &TestApp, m: &Merchant, id: &str) -> Value {
    let r = app
        .call(m, Method::GET, &format!("/disputes/{id}"), None)
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body
}

async fn case(app: &TestApp, m: &Merchant, case_id: &str) -> Value {
    let r = app
        .call(
            m,
            Method::GET,
            &format!("/disputes/wallet/cases/{case_id}"),
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body
}

async fn act(app: &TestApp, m: &Merchant, case_id: &str, body: Value) -> common::Answer {
    app.call(
        m,
        Method::POST,
        &format!("/disputes/wallet/cases/{case_id}/actions"),
        Some(body),
    )
    .await
}

/// The actions the case allows now.
async fn allowed(app: &TestApp, m: &Merchant, case_id: &str) -> Vec<String> {
    let r = app
        .call(
            m,
            Method::GET,
            &format!("/disputes/wallet/cases/{case_id}/actions"),
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["action"].as_str().unwrap().to_owned())
        .collect()
}

/// Moves the clock by `by` and waits (bounded) until the case has this status.
async fn after(app: &TestApp, m: &Merchant, case_id: &str, by: Duration, status: &str) -> Value {
    app.clock.advance(by);
    let deadline = Instant::now() + StdDuration::from_secs(10);
    loop {
        let c = case(app, m, case_id).await;
        if c["status"] == status {
            return c;
        }
        assert!(Instant::now() < deadline, "never {status}: {c}");
        actix_web::rt::time::sleep(StdDuration::from_millis(25)).await;
    }
}

/// Waits (bounded) until the dispute has this status.
async fn dispute_in(app: &TestApp, m: &Merchant, id: &str, status: &str) -> Value {
    let deadline = Instant::now() + StdDuration::from_secs(10);
    loop {
        let d = dispute(app, m, id).await;
        if d["status"] == status {
            return d;
        }
        assert!(Instant::now() < deadline, "never {status}: {d}");
        actix_web::rt::time::sleep(StdDuration::from_millis(25)).await;
    }
}

async fn count_disputes(app: &TestApp, m: &Merchant) -> usize {
    let r = app
        .call(m, Method::GET, "/disputes/list?limit=100", None)
        .await;
    r.body["data"].as_array().unwrap().len()
}

#[actix_web::test]
async fn import_opens_a_dispute_per_case_at_its_stage_and_twice_changes_nothing() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let (p1, p2) = (paid(&app, &m, 1000).await, paid(&app, &m, 2500).await);
    let inquiry = open_case(&app, &m, &p1, "INQUIRY").await;
    let chargeback = open_case(&app, &m, &p2, "CHARGEBACK").await;
    assert_eq!(inquiry["status"], "WAITING_FOR_SELLER_RESPONSE");
    assert_eq!(inquiry["stage"], "pre_dispute");
    assert_eq!(inquiry["dispute_id"], Value::Null);
    assert_eq!(chargeback["amount"], 2500);

    // The cases are at the processor; nothing is a dispute before an import.
    let cases = app
        .call(&m, Method::GET, "/disputes/wallet/cases", None)
        .await;
    assert_eq!(cases.body["data"].as_array().unwrap().len(), 2);
    assert_eq!(count_disputes(&app, &m).await, 0);

    let first = import(&app, &m, json!({})).await;
    assert_eq!(
        (first["created"].as_u64(), first["unchanged"].as_u64()),
        (Some(2), Some(0))
    );
    let dispute_of = |report: &Value, case_id: &Value| {
        report["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|i| i["case_id"] == *case_id)
            .map(|i| i["dispute_id"].as_str().unwrap().to_owned())
            .unwrap()
    };
    let d1 = dispute_of(&first, &inquiry["case_id"]);
    let d2 = dispute_of(&first, &chargeback["case_id"]);
    let (one, two) = (dispute(&app, &m, &d1).await, dispute(&app, &m, &d2).await);
    assert_eq!(
        (one["stage"].as_str(), one["status"].as_str()),
        (Some("pre_dispute"), Some("opened"))
    );
    assert_eq!(
        (two["stage"].as_str(), two["status"].as_str()),
        (Some("dispute"), Some("opened"))
    );
    assert_eq!(one["case_id"], inquiry["case_id"]);
    assert_eq!(one["reason"], "Item not received");
    assert_eq!(one["processor"], "wallet_sandbox");
    assert_eq!(one["amount"], 1000);
    assert_eq!(app.event_types(&m, &d1).await, ["dispute_opened"]);
    let c = case(&app, &m, inquiry["case_id"].as_str().unwrap()).await;
    assert_eq!(c["dispute_id"], d1.as_str());

    // Again: the same disputes, no new rows, no new events.
    let again = import(&app, &m, json!({})).await;
    assert_eq!(
        (
            again["created"].as_u64(),
            again["updated"].as_u64(),
            again["unchanged"].as_u64()
        ),
        (Some(0), Some(0), Some(2)),
        "{again}"
    );
    assert_eq!(dispute_of(&again, &inquiry["case_id"]), d1);
    assert_eq!(count_disputes(&app, &m).await, 2);
    assert_eq!(dispute(&app, &m, &d1).await, one);
    assert_eq!(app.event_types(&m, &d1).await, ["dispute_opened"]);
    assert_eq!(app.event_types(&m, &d2).await, ["dispute_opened"]);

    // Paging through an import.
    let page = import(&app, &m, json!({"limit": 1})).await;
    assert_eq!(
        (
            page["has_more"].as_bool(),
            page["data"].as_array().unwrap().len()
        ),
        (Some(true), 1)
    );
    let rest = import(
        &app,
        &m,
        json!({"limit": 1, "starting_after": page["last_case_id"]}),
    )
    .await;
    assert_eq!(rest["has_more"], false);
    assert_ne!(rest["data"][0]["case_id"], page["data"][0]["case_id"]);

    // A dispute that follows a case takes no merchant command of its own.
    let accept = app
        .call(&m, Method::POST, &format!("/disputes/accept/{d1}"), None)
        .await;
    assert_eq!(
        (accept.status, accept.code()),
        (409, "wallet_case"),
        "{}",
        accept.body
    );

    // Bad input names its field.
    let bad = app
        .call(
            &m,
            Method::POST,
            "/disputes/wallet/import",
            Some(json!({"limit": 0})),
        )
        .await;
    assert_eq!((bad.status, bad.param()), (400, Some("limit")));
    let list = app
        .call(
            &m,
            Method::GET,
            "/disputes/wallet/cases?status=OPENED",
            None,
        )
        .await;
    assert_eq!((list.status, list.param()), (400, Some("status")));
    let twice = app
        .call(
            &m,
            Method::POST,
            "/sandbox/wallet/cases",
            Some(json!({"payment_id": p1, "case_type": "INQUIRY", "reason": "again"})),
        )
        .await;
    assert_eq!((twice.status, twice.code()), (409, "case_exists"));
    let arbitration = app
        .call(
            &m,
            Method::POST,
            "/sandbox/wallet/cases",
            Some(json!({"payment_id": p1, "case_type": "ARBITRATION", "reason": "x"})),
        )
        .await;
    assert_eq!(
        (arbitration.status, arbitration.param()),
        (400, Some("case_type"))
    );
}

/// Issue 42, item 11: imports of one new case at once (on two instances with
/// `TEST_INSTANCES=2`) open one dispute, and exactly one of them reports it `created`.
#[actix_web::test]
async fn concurrent_imports_of_one_new_case_create_it_once() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    for round in 0..3 {
        let p = paid(&app, &m, 1000).await;
        let opened = open_case(&app, &m, &p, "CHARGEBACK").await;
        let case_id = opened["case_id"].clone();
        let reports = futures_util::future::join_all(
            (0..4).map(|_| import(&app, &m, json!({"case_ids": [case_id.clone()]}))),
        )
        .await;
        let results: Vec<&str> = reports
            .iter()
            .map(|r| r["data"][0]["result"].as_str().unwrap())
            .collect();
        assert_eq!(
            results.iter().filter(|r| **r == "created").count(),
            1,
            "round {round}: {results:?}"
        );
        assert!(
            results
                .iter()
                .all(|r| ["created", "updated", "unchanged"].contains(r)),
            "{results:?}"
        );
        let created: u64 = reports.iter().map(|r| r["created"].as_u64().unwrap()).sum();
        assert_eq!(created, 1, "{reports:?}");
        let ids: std::collections::HashSet<&str> = reports
            .iter()
            .map(|r| r["data"][0]["dispute_id"].as_str().unwrap())
            .collect();
        assert_eq!(ids.len(), 1, "one dispute for the case: {ids:?}");
        assert_eq!(count_disputes(&app, &m).await, round + 1);
        let id = ids.into_iter().next().unwrap().to_owned();
        assert_eq!(app.event_types(&m, &id).await, ["dispute_opened"]);
    }
    app.stop().await;
}

#[actix_web::test]
async fn each_action_is_allowed_or_refused_by_the_cases_status() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let pay = paid(&app, &m, 1000).await;
    let c = open_case(&app, &m, &pay, "CHARGEBACK").await;
    let id = c["case_id"].as_str().unwrap();
    let d = imported(&app, &m, id).await;
    let dispute_id = d["dispute_id"].as_str().unwrap();

    assert_eq!(
        allowed(&app, &m, id).await,
        ["accept_claim", "provide_evidence", "send_message"]
    );
    for refused in ["make_offer", "appeal", "escalate", "acknowledge_return"] {
        let mut body = json!({"action": refused});
        if refused == "make_offer" {
            body["amount"] = json!(100);
        }
        let r = act(&app, &m, id, body).await;
        assert_eq!(
            (r.status, r.code()),
            (409, "invalid_state"),
            "{refused}: {}",
            r.body
        );
        assert!(r.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("WAITING_FOR_SELLER_RESPONSE"));
    }

    // Bad requests name the field.
    for (body, param, status) in [
        (json!({"action": "shout"}), "action", 400),
        (json!({"action": "send_message"}), "message", 400),
        (
            json!({"action": "send_message", "message": "hi", "amount": 5}),
            "amount",
            400,
        ),
        (json!({"action": "provide_evidence"}), "file_ids", 400),
        (
            json!({"action": "provide_evidence", "file_ids": ["file_nope"]}),
            "file_ids",
            404,
        ),
    ] {
        let r = act(&app, &m, id, body.clone()).await;
        assert_eq!(
            (r.status, r.param()),
            (status, Some(param)),
            "{body}: {}",
            r.body
        );
    }

    // A message: the case waits for the buyer, who replies after the sandbox's delay.
    let r = act(
        &app,
        &m,
        id,
        json!({"action": "send_message", "message": "Tracking: ZX81"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["status"], "WAITING_FOR_BUYER_RESPONSE");
    assert_eq!(
        allowed(&app, &m, id).await,
        ["accept_claim", "send_message"]
    );
    let r = act(
        &app,
        &m,
        id,
        json!({"action": "provide_evidence", "file_ids": ["file_x"]}),
    )
    .await;
    assert_eq!(r.status, 404, "the file is checked first: {}", r.body);
    after(
        &app,
        &m,
        id,
        Duration::seconds(6),
        "WAITING_FOR_SELLER_RESPONSE",
    )
    .await;
    assert_eq!(dispute(&app, &m, dispute_id).await["status"], "opened");

    // Evidence: under review (the dispute is challenged), then decided for the seller.
    let file = app.upload(&m, "receipt.txt", b"shipped on time").await;
    let file_id = file.body["file_id"].as_str().unwrap();
    let r = act(
        &app,
        &m,
        id,
        json!({"action": "provide_evidence", "file_ids": [file_id], "message": "Proof of delivery"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["status"], "UNDER_REVIEW");
    let d = dispute_in(&app, &m, dispute_id, "challenged").await;
    assert_eq!(d["explanation"], "Proof of delivery");
    assert!(allowed(&app, &m, id).await.is_empty());
    let r = act(&app, &m, id, json!({"action": "accept_claim"})).await;
    assert_eq!((r.status, r.code()), (409, "invalid_state"));
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("UNDER_REVIEW"));

    let done = after(&app, &m, id, Duration::seconds(6), "RESOLVED").await;
    assert_eq!(done["outcome"], "RESOLVED_SELLER_FAVOUR");
    dispute_in(&app, &m, dispute_id, "won").await;
    assert_eq!(
        app.event_types(&m, dispute_id).await,
        ["dispute_opened", "dispute_challenged", "dispute_won"]
    );

    // The history: oldest first, who did what, the status changes and the evidence.
    let h = app
        .call(
            &m,
            Method::GET,
            &format!("/disputes/wallet/cases/{id}/history"),
            None,
        )
        .await;
    assert_eq!(h.status, 200);
    let entries = h.body["data"].as_array().unwrap();
    let told: Vec<(&str, &str)> = entries
        .iter()
        .map(|e| (e["actor"].as_str().unwrap(), e["kind"].as_str().unwrap()))
        .collect();
    assert_eq!(
        told,
        [
            ("buyer", "opened"),
            ("seller", "send_message"),
            ("buyer", "reply"),
            ("seller", "provide_evidence"),
            ("processor", "decided"),
        ]
    );
    let seqs: Vec<i64> = entries.iter().map(|e| e["seq"].as_i64().unwrap()).collect();
    assert_eq!(seqs, [1, 2, 3, 4, 5]);
    assert_eq!(entries[1]["message"], "Tracking: ZX81");
    assert_eq!(entries[1]["status_from"], "WAITING_FOR_SELLER_RESPONSE");
    assert_eq!(entries[1]["status_to"], "WAITING_FOR_BUYER_RESPONSE");
    assert_eq!(entries[3]["file_ids"], json!([file_id]));
    assert_eq!(entries[4]["status_to"], "RESOLVED");
}

#[actix_web::test]
async fn escalation_and_appeal_move_the_stage_forward_and_announce_it() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let pay = paid(&app, &m, 1000).await;
    let c = open_case(&app, &m, &pay, "INQUIRY").await;
    let id = c["case_id"].as_str().unwrap();
    let d = imported(&app, &m, id).await;
    let dispute_id = d["dispute_id"].as_str().unwrap();
    assert_eq!(d["stage"], "pre_dispute");
    assert!(allowed(&app, &m, id).await.contains(&"escalate".to_owned()));

    // The buyer escalates the inquiry: a chargeback, announced with its new stage.
    let up = app
        .call(
            &m,
            Method::POST,
            &format!("/sandbox/wallet/cases/{id}/escalate"),
            None,
        )
        .await;
    assert_eq!(up.status, 200, "{}", up.body);
    assert_eq!(
        (up.body["case_type"].as_str(), up.body["stage"].as_str()),
        (Some("CHARGEBACK"), Some("dispute"))
    );
    let d = dispute(&app, &m, dispute_id).await;
    assert_eq!(
        (d["stage"].as_str(), d["status"].as_str()),
        (Some("dispute"), Some("opened"))
    );
    assert_eq!(
        app.event_types(&m, dispute_id).await,
        ["dispute_opened", "dispute_opened"]
    );
    // A chargeback takes no seller escalation and no offer.
    let r = act(&app, &m, id, json!({"action": "escalate"})).await;
    assert_eq!((r.status, r.code()), (409, "invalid_state"));

    // Losing evidence: appealable (still challenged), then an appeal to pre-arbitration.
    let file = app.upload(&m, "note.txt", b"no proof").await;
    let r = act(
        &app,
        &m,
        id,
        json!({"action": "provide_evidence", "file_ids": [file.body["file_id"]], "message": "losing_evidence"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    after(&app, &m, id, Duration::seconds(6), "APPEALABLE").await;
    assert_eq!(allowed(&app, &m, id).await, ["accept_claim", "appeal"]);
    assert_eq!(dispute(&app, &m, dispute_id).await["status"], "challenged");
    let r = act(
        &app,
        &m,
        id,
        json!({"action": "appeal", "message": "New tracking data"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        (r.body["case_type"].as_str(), r.body["status"].as_str()),
        (Some("PRE_ARBITRATION"), Some("UNDER_REVIEW"))
    );
    let d = dispute(&app, &m, dispute_id).await;
    assert_eq!(
        (d["stage"].as_str(), d["status"].as_str()),
        (Some("pre_arbitration"), Some("challenged"))
    );

    // The buyer takes it to arbitration, where the appeal wins.
    let up = app
        .call(
            &m,
            Method::POST,
            &format!("/sandbox/wallet/cases/{id}/escalate"),
            None,
        )
        .await;
    assert_eq!(up.body["case_type"], "ARBITRATION");
    let again = app
        .call(
            &m,
            Method::POST,
            &format!("/sandbox/wallet/cases/{id}/escalate"),
            None,
        )
        .await;
    assert_eq!(
        (again.status, again.code()),
        (409, "invalid_state"),
        "no stage after arbitration"
    );
    after(&app, &m, id, Duration::seconds(6), "RESOLVED").await;
    let d = dispute_in(&app, &m, dispute_id, "won").await;
    assert_eq!(d["stage"], "arbitration");
    assert_eq!(
        app.event_types(&m, dispute_id).await,
        [
            "dispute_opened",
            "dispute_opened",
            "dispute_challenged",
            "dispute_challenged",
            "dispute_challenged",
            "dispute_won"
        ]
    );
}

#[actix_web::test]
async fn a_withdrawn_case_ends_the_dispute_cancelled_and_frees_the_refunds() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let pay = paid(&app, &m, 1000).await;
    let c = open_case(&app, &m, &pay, "CHARGEBACK").await;
    let id = c["case_id"].as_str().unwrap();
    let d = imported(&app, &m, id).await;
    let dispute_id = d["dispute_id"].as_str().unwrap();

    let held = app
        .call(
            &m,
            Method::POST,
            "/refunds",
            Some(json!({"payment_id": pay})),
        )
        .await;
    assert_eq!((held.status, held.code()), (409, "dispute_open"));

    let w = app
        .call(
            &m,
            Method::POST,
            &format!("/sandbox/wallet/cases/{id}/withdraw"),
            None,
        )
        .await;
    assert_eq!(w.status, 200, "{}", w.body);
    assert_eq!(
        (w.body["status"].as_str(), w.body["outcome"].as_str()),
        (Some("RESOLVED"), Some("CANCELED_BY_BUYER"))
    );
    assert_eq!(dispute(&app, &m, dispute_id).await["status"], "cancelled");
    assert_eq!(
        app.event_types(&m, dispute_id).await,
        ["dispute_opened", "dispute_cancelled"]
    );
    assert!(allowed(&app, &m, id).await.is_empty());
    let twice = app
        .call(
            &m,
            Method::POST,
            &format!("/sandbox/wallet/cases/{id}/withdraw"),
            None,
        )
        .await;
    assert_eq!((twice.status, twice.code()), (409, "invalid_state"));

    // Importing the closed case again changes nothing.
    let again = import(&app, &m, json!({"case_ids": [id]})).await;
    assert_eq!(again["data"][0]["result"], "unchanged");
    assert_eq!(
        app.event_types(&m, dispute_id).await,
        ["dispute_opened", "dispute_cancelled"]
    );

    // The buyer kept nothing: the whole amount can be refunded.
    let r = app
        .call(
            &m,
            Method::POST,
            "/refunds",
            Some(json!({"payment_id": pay})),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["amount"], 1000);
}

#[actix_web::test]
async fn a_resolution_in_the_buyers_favour_limits_refunds() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;

    // The buyer takes a partial offer: 400 is theirs, 600 can still be refunded.
    let pay = paid(&app, &m, 1000).await;
    let c = open_case(&app, &m, &pay, "INQUIRY").await;
    let id = c["case_id"].as_str().unwrap();
    let too_much = act(
        &app,
        &m,
        id,
        json!({"action": "make_offer", "amount": 1001}),
    )
    .await;
    assert_eq!(
        (too_much.status, too_much.param()),
        (400, Some("amount")),
        "{}",
        too_much.body
    );
    // An action through payd imports the case first.
    let r = act(
        &app,
        &m,
        id,
        json!({"action": "make_offer", "amount": 400, "message": "Half back?"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let dispute_id = r.body["dispute_id"].as_str().unwrap().to_owned();
    assert_eq!(r.body["offer_amount"], 400);
    after(&app, &m, id, Duration::seconds(6), "RESOLVED").await;
    let d = dispute_in(&app, &m, &dispute_id, "accepted").await;
    assert_eq!(d["amount"], 400);
    let over = app
        .call(
            &m,
            Method::POST,
            "/refunds",
            Some(json!({"payment_id": pay, "amount": 601})),
        )
        .await;
    assert_eq!(
        (over.status, over.code()),
        (400, "amount_exceeds_refundable"),
        "{}",
        over.body
    );
    let rest = app
        .call(
            &m,
            Method::POST,
            "/refunds",
            Some(json!({"payment_id": pay, "amount": 600})),
        )
        .await;
    assert_eq!(rest.status, 201, "{}", rest.body);

    // Nobody answers a chargeback in time: the processor decides for the buyer.
    let pay = paid(&app, &m, 700).await;
    let c = open_case(&app, &m, &pay, "CHARGEBACK").await;
    let id = c["case_id"].as_str().unwrap();
    let d = imported(&app, &m, id).await;
    assert_eq!(d["evidence_due_by"], c["due_by"]);
    let lost = after(&app, &m, id, Duration::days(8), "RESOLVED").await;
    assert_eq!(lost["outcome"], "RESOLVED_BUYER_FAVOUR");
    dispute_in(&app, &m, d["dispute_id"].as_str().unwrap(), "lost").await;
    let none = app
        .call(
            &m,
            Method::POST,
            "/refunds",
            Some(json!({"payment_id": pay})),
        )
        .await;
    assert_eq!(
        (none.status, none.code()),
        (400, "amount_exceeds_refundable"),
        "{}",
        none.body
    );

    // The seller accepts the claim.
    let pay = paid(&app, &m, 300).await;
    let c = open_case(&app, &m, &pay, "CHARGEBACK").await;
    let id = c["case_id"].as_str().unwrap();
    let r = act(&app, &m, id, json!({"action": "accept_claim"})).await;
    assert_eq!(r.body["outcome"], "ACCEPTED");
    let d = dispute(&app, &m, r.body["dispute_id"].as_str().unwrap()).await;
    assert_eq!(d["status"], "accepted");
}

#[actix_web::test]
async fn a_returned_item_can_be_acknowledged() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let pay = paid(&app, &m, 1000).await;
    let c = open_case(&app, &m, &pay, "INQUIRY").await;
    let id = c["case_id"].as_str().unwrap();
    let r = act(
        &app,
        &m,
        id,
        json!({"action": "send_message", "message": "please send it back: item_returned"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let back = after(
        &app,
        &m,
        id,
        Duration::seconds(6),
        "WAITING_FOR_SELLER_RESPONSE",
    )
    .await;
    assert_eq!(back["return_shipped"], true);
    assert!(allowed(&app, &m, id)
        .await
        .contains(&"acknowledge_return".to_owned()));
    let r = act(&app, &m, id, json!({"action": "acknowledge_return"})).await;
    assert_eq!(r.body["outcome"], "ACCEPTED", "{}", r.body);
}

#[actix_web::test]
async fn other_merchants_cases_answer_404_and_the_triggers_need_a_sandbox() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let other = app.create_merchant("Other").await;
    let pay = paid(&app, &m, 1000).await;
    let c = open_case(&app, &m, &pay, "INQUIRY").await;
    let id = c["case_id"].as_str().unwrap();

    for (method, path, body) in [
        (Method::GET, format!("/disputes/wallet/cases/{id}"), None),
        (
            Method::GET,
            format!("/disputes/wallet/cases/{id}/history"),
            None,
        ),
        (
            Method::GET,
            format!("/disputes/wallet/cases/{id}/actions"),
            None,
        ),
        (
            Method::POST,
            format!("/disputes/wallet/cases/{id}/actions"),
            Some(json!({"action": "accept_claim"})),
        ),
        (
            Method::POST,
            format!("/sandbox/wallet/cases/{id}/withdraw"),
            None,
        ),
        (
            Method::POST,
            format!("/sandbox/wallet/cases/{id}/escalate"),
            None,
        ),
        (
            Method::POST,
            "/disputes/wallet/import".to_owned(),
            Some(json!({"case_ids": [id]})),
        ),
        (
            Method::POST,
            "/sandbox/wallet/cases".to_owned(),
            Some(json!({"payment_id": pay, "case_type": "INQUIRY", "reason": "x"})),
        ),
    ] {
        let r = app.call(&other, method.clone(), &path, body).await;
        assert_eq!(r.status, 404, "{method} {path}: {}", r.body);
    }
    let list = app
        .call(&other, Method::GET, "/disputes/wallet/cases", None)
        .await;
    assert_eq!(list.body["data"], json!([]));
    let report = import(&app, &other, json!({})).await;
    assert_eq!(report["data"], json!([]));
    // Nothing changed for the owner.
    assert_eq!(
        case(&app, &m, id).await["status"],
        "WAITING_FOR_SELLER_RESPONSE"
    );
    assert_eq!(count_disputes(&app, &m).await, 0);
}

/// In a production deployment the sandbox triggers do not exist, even for a test key.
#[actix_web::test]
async fn the_sandbox_triggers_are_404_in_production() {
    let db = std::sync::Arc::new(TestDb::new().await);
    let app = spawn_with(db, common::PRODUCTION).await;
    let m = app.create_merchant("Acme").await;
    let pay = paid(&app, &m, 1000).await;
    let r = app
        .call(
            &m,
            Method::POST,
            "/sandbox/wallet/cases",
            Some(json!({"payment_id": pay, "case_type": "INQUIRY", "reason": "x"})),
        )
        .await;
    assert_eq!(r.status, 404, "{}", r.body);
}

//! Disputes: opened by the sandbox after a capture with card …0259, evidence files, accept,
//! submit, the verdict and the deadline, the events, and refunds held while one is open.

use crate::common;

use std::time::{Duration as StdDuration, Instant};

use actix_web::http::Method;
use chrono::Duration;
use common::{card, spawn_app, spawn_with, Merchant, TestApp, TestDb};
use serde_json::{json, Value};

const DISPUTED: &str = "4000000000000259";

/// `POST /files` with a form of these parts and these extra headers.
async fn post_form(
    app: &TestApp,
    m: &Merchant,
    parts: &[(&str, Option<&str>, &[u8])],
    headers: &[(&str, &str)],
) -> common::Answer {
    let (content_type, body) = common::form(parts);
    app.send_bytes(
        Method::POST,
        "/files",
        Some(&m.secret_key),
        Some((&content_type, body)),
        headers,
    )
    .await
}

async fn upload(app: &TestApp, m: &Merchant, name: &str, bytes: &[u8]) -> common::Answer {
    app.upload(m, name, bytes).await
}

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

/// Moves the clock past the sandbox's delay and waits (bounded) for the payment's dispute.
async fn dispute_of(app: &TestApp, m: &Merchant, payment_id: &str) -> Value {
    app.clock.advance(Duration::seconds(6));
    let deadline = Instant::now() + StdDuration::from_secs(10);
    loop {
        let r = app
            .call(
                m,
                Method::GET,
                &format!("/disputes/list?payment_id={payment_id}"),
                None,
            )
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
        if let Some(d) = r.body["data"].as_array().and_then(|d| d.first()) {
            return d.clone();
        }
        assert!(Instant::now() < deadline, "no dispute opened");
        actix_web::rt::time::sleep(StdDuration::from_millis(25)).await;
    }
}

/// Waits (bounded) until the dispute has this status.
async fn wait_for_status(app: &TestApp, m: &Merchant, id: &str, status: &str) -> Value {
    let deadline = Instant::now() + StdDuration::from_secs(10);
    loop {
        let r = app
            .call(m, Method::GET, &format!("/disputes/{id}"), None)
            .await;
        if r.body["status"] == status {
            return r.body;
        }
        assert!(Instant::now() < deadline, "never {status}: {}", r.body);
        actix_web::rt::time::sleep(StdDuration::from_millis(25)).await;
    }
}

async fn refund(
    app: &TestApp,
    m: &Merchant,
    payment_id: &str,
    amount: Option<i64>,
) -> common::Answer {
    let mut body = json!({"payment_id": payment_id});
    if let Some(a) = amount {
        body["amount"] = json!(a);
    }
    app.call(m, Method::POST, "/refunds", Some(body)).await
}

/// The dispute events of the merchant, oldest first.
async fn dispute_events(app: &TestApp, m: &Merchant, dispute_id: &str) -> Vec<Value> {
    let r = app
        .call(
            m,
            Method::POST,
            &format!("/events/{}", m.merchant_id),
            Some(json!({"object_id": dispute_id})),
        )
        .await;
    let mut events = r.body["data"].as_array().unwrap().clone();
    events.reverse();
    events
}

fn types(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["event_type"].as_str().unwrap())
        .collect()
}

#[actix_web::test]
async fn a_dispute_is_challenged_with_evidence_and_won() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let payment_id = pay(&app, &m, DISPUTED, 500).await;
    let d = dispute_of(&app, &m, &payment_id).await;
    let id = d["dispute_id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("dp_"));
    assert_eq!(
        (
            d["status"].as_str(),
            d["stage"].as_str(),
            d["amount"].as_i64(),
            d["currency"].as_str(),
            d["test_mode"].as_bool()
        ),
        (
            Some("opened"),
            Some("dispute"),
            Some(500),
            Some("EUR"),
            Some(true)
        )
    );
    let due = chrono::DateTime::parse_from_rfc3339(d["evidence_due_by"].as_str().unwrap()).unwrap();
    let created = chrono::DateTime::parse_from_rfc3339(d["created"].as_str().unwrap()).unwrap();
    assert_eq!(due - created, Duration::days(7));

    // While the dispute is open, refunds wait.
    let r = refund(&app, &m, &payment_id, Some(100)).await;
    assert_eq!(
        (r.status, r.code(), r.param()),
        (409, "dispute_open", Some("payment_id")),
        "{}",
        r.body
    );

    let pdf = b"%PDF-1.4\nreceipt for order 42\n";
    let receipt = upload(&app, &m, "receipt.pdf", pdf).await;
    assert_eq!(receipt.status, 201, "{}", receipt.body);
    assert_eq!(
        (
            receipt.body["content_type"].as_str(),
            receipt.body["size"].as_i64(),
            receipt.body["filename"].as_str()
        ),
        (
            Some("application/pdf"),
            Some(pdf.len() as i64),
            Some("receipt.pdf")
        )
    );
    use sha2::Digest;
    assert_eq!(
        receipt.body["sha256"].as_str(),
        Some(hex::encode(sha2::Sha256::digest(pdf)).as_str())
    );
    let file_id = receipt.body["file_id"].as_str().unwrap().to_owned();
    let note = upload(
        &app,
        &m,
        "../chat.txt",
        "the buyer confirmed delivery".as_bytes(),
    )
    .await;
    assert_eq!(note.body["filename"], "chat.txt");
    let note_id = note.body["file_id"].as_str().unwrap().to_owned();

    let attach =
        |file: &str, kind: &str| json!({"dispute_id": id, "file_id": file, "evidence_type": kind});
    let r = app
        .call(
            &m,
            Method::PUT,
            "/disputes/evidence",
            Some(attach(&file_id, "receipt")),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        (r.body["evidence_type"].as_str(), r.body["file_id"].as_str()),
        (Some("receipt"), Some(file_id.as_str()))
    );
    app.call(
        &m,
        Method::PUT,
        "/disputes/evidence",
        Some(attach(&note_id, "customer_communication")),
    )
    .await;
    let r = app
        .call(
            &m,
            Method::PUT,
            "/disputes/evidence",
            Some(attach(&note_id, "poem")),
        )
        .await;
    assert_eq!((r.status, r.param()), (400, Some("evidence_type")));
    let listed = app
        .call(&m, Method::GET, &format!("/disputes/evidence/{id}"), None)
        .await;
    assert_eq!(
        listed.body["data"].as_array().unwrap().len(),
        2,
        "{}",
        listed.body
    );
    let r = app
        .call(
            &m,
            Method::DELETE,
            "/disputes/evidence",
            Some(json!({"dispute_id": id, "file_id": note_id})),
        )
        .await;
    assert_eq!(
        (r.status, r.body["deleted"].as_bool()),
        (200, Some(true)),
        "{}",
        r.body
    );
    let r = app
        .call(
            &m,
            Method::DELETE,
            "/disputes/evidence",
            Some(json!({"dispute_id": id, "file_id": note_id})),
        )
        .await;
    assert_eq!(
        (r.status, r.param()),
        (404, Some("file_id")),
        "removing twice"
    );
    let listed = app
        .call(&m, Method::GET, &format!("/disputes/evidence/{id}"), None)
        .await;
    let evidence = listed.body["data"].as_array().unwrap();
    assert_eq!(
        (evidence.len(), evidence[0]["file_id"].as_str()),
        (1, Some(file_id.as_str()))
    );

    let r = app
        .call(
            &m,
            Method::POST,
            "/disputes/evidence",
            Some(
                json!({"dispute_id": id, "explanation": "delivered, signed for: winning_evidence"}),
            ),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["status"], "challenged");
    assert!(r.body["evidence_submitted_at"].is_string());
    let again = app
        .call(
            &m,
            Method::POST,
            "/disputes/evidence",
            Some(json!({"dispute_id": id})),
        )
        .await;
    assert_eq!(
        (again.status, again.code()),
        (409, "invalid_state"),
        "a second submit"
    );
    let late = app
        .call(
            &m,
            Method::PUT,
            "/disputes/evidence",
            Some(attach(&note_id, "uncategorized")),
        )
        .await;
    assert_eq!(
        (late.status, late.code()),
        (409, "invalid_state"),
        "evidence after submit"
    );
    let r = app
        .call(&m, Method::POST, &format!("/disputes/accept/{id}"), None)
        .await;
    assert_eq!(
        (r.status, r.code()),
        (409, "invalid_state"),
        "accept after submit"
    );
    let r = refund(&app, &m, &payment_id, Some(100)).await;
    assert_eq!(
        r.code(),
        "dispute_open",
        "a challenged dispute is still open"
    );

    app.clock.advance(Duration::seconds(6));
    wait_for_status(&app, &m, &id, "won").await;
    let r = refund(&app, &m, &payment_id, None).await;
    assert_eq!(
        (r.status, r.body["amount"].as_i64()),
        (201, Some(500)),
        "a won dispute leaves everything refundable: {}",
        r.body
    );

    let events = dispute_events(&app, &m, &id).await;
    assert_eq!(
        types(&events),
        ["dispute_opened", "dispute_challenged", "dispute_won"]
    );
    let opened = &events[0]["envelope"]["content"];
    assert_eq!(opened["type"], "dispute_details");
    assert_eq!(opened["object"]["status"], "opened");
    assert_eq!(opened["object"]["dispute_id"], id.as_str());
}

#[actix_web::test]
async fn lost_and_accepted_disputes_keep_their_amount_from_refunds() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;

    let lost_payment = pay(&app, &m, DISPUTED, 500).await;
    let d = dispute_of(&app, &m, &lost_payment).await;
    let id = d["dispute_id"].as_str().unwrap();
    let r = app
        .call(
            &m,
            Method::POST,
            "/disputes/evidence",
            Some(json!({"dispute_id": id})),
        )
        .await;
    assert_eq!(
        (r.status, r.code(), r.param()),
        (400, "evidence_required", Some("explanation")),
        "nothing to submit"
    );
    app.call(
        &m,
        Method::POST,
        "/disputes/evidence",
        Some(json!({"dispute_id": id, "explanation": "losing_evidence"})),
    )
    .await;
    app.clock.advance(Duration::seconds(6));
    wait_for_status(&app, &m, id, "lost").await;
    let r = refund(&app, &m, &lost_payment, Some(1)).await;
    assert_eq!(
        (r.status, r.code()),
        (400, "amount_exceeds_refundable"),
        "{}",
        r.body
    );
    assert_eq!(
        types(&dispute_events(&app, &m, id).await),
        ["dispute_opened", "dispute_challenged", "dispute_lost"]
    );

    // A refund made before the dispute opened is not disputed again.
    let partly = pay(&app, &m, DISPUTED, 500).await;
    let r = refund(&app, &m, &partly, Some(100)).await;
    assert_eq!(r.body["status"], "succeeded");
    let d = dispute_of(&app, &m, &partly).await;
    assert_eq!(d["amount"], 400);
    let id = d["dispute_id"].as_str().unwrap();
    let r = app
        .call(&m, Method::POST, &format!("/disputes/accept/{id}"), None)
        .await;
    assert_eq!(
        (r.status, r.body["status"].as_str()),
        (200, Some("accepted")),
        "{}",
        r.body
    );
    let r = app
        .call(&m, Method::POST, &format!("/disputes/accept/{id}"), None)
        .await;
    assert_eq!((r.status, r.code()), (409, "invalid_state"), "accept twice");
    let r = refund(&app, &m, &partly, None).await;
    assert_eq!(r.code(), "amount_exceeds_refundable", "{}", r.body);
    assert_eq!(
        types(&dispute_events(&app, &m, id).await),
        ["dispute_opened", "dispute_accepted"]
    );
}

/// A stored status that is none of a dispute's is a read error (500), never read as one
/// that does not hold the payment: a refund is not let through past a dispute whose status
/// cannot be read.
#[actix_web::test]
async fn a_corrupt_dispute_status_answers_500_and_lets_no_refund_through() {
    use sea_orm::ConnectionTrait;
    let db = std::sync::Arc::new(TestDb::new().await);
    let app = spawn_with(db, &[("PAYD_ACTORS__ROW_CACHE_MS", "1")]).await;
    let m = app.create_merchant("Acme").await;
    let payment_id = pay(&app, &m, DISPUTED, 500).await;
    let d = dispute_of(&app, &m, &payment_id).await;
    let id = d["dispute_id"].as_str().unwrap();
    app.state
        .db
        .execute_unprepared(&format!(
            "UPDATE disputes SET status = 'under_review' WHERE id = '{id}'"
        ))
        .await
        .unwrap();
    // Past the actor's row cache, so the next command reads the corrupt row.
    actix_web::rt::time::sleep(StdDuration::from_millis(50)).await;
    let r = app
        .call(&m, Method::GET, &format!("/disputes/{id}"), None)
        .await;
    assert_eq!(r.status, 500, "{}", r.body);
    let r = app
        .call(&m, Method::POST, &format!("/disputes/accept/{id}"), None)
        .await;
    assert_eq!(r.status, 500, "{}", r.body);
    let r = refund(&app, &m, &payment_id, Some(100)).await;
    assert_eq!(r.status, 500, "{}", r.body);
    let p = app
        .call(&m, Method::GET, &format!("/payments/{payment_id}"), None)
        .await;
    assert_eq!(p.body["amount_refunded"], 0, "{}", p.body);
    app.stop().await;
}

#[actix_web::test]
async fn an_unanswered_dispute_expires_at_its_deadline_and_others_are_never_disputed() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let payment_id = pay(&app, &m, DISPUTED, 500).await;
    let d = dispute_of(&app, &m, &payment_id).await;
    let id = d["dispute_id"].as_str().unwrap();
    app.clock.advance(Duration::days(6));
    app.run_due_jobs().await;
    let r = app
        .call(&m, Method::GET, &format!("/disputes/{id}"), None)
        .await;
    assert_eq!(r.body["status"], "opened", "not yet due");
    app.clock.advance(Duration::days(1));
    wait_for_status(&app, &m, id, "expired").await;
    let r = app
        .call(&m, Method::POST, &format!("/disputes/accept/{id}"), None)
        .await;
    assert_eq!((r.status, r.code()), (409, "invalid_state"));
    assert_eq!(
        types(&dispute_events(&app, &m, id).await),
        ["dispute_opened", "dispute_expired"]
    );

    // A manual-capture payment is disputed only once captured; an ordinary card never.
    let r = app
        .create_payment(&m, json!({"amount": 300, "currency": "EUR", "confirm": true, "capture_method": "manual", "payment_method_data": card(DISPUTED)}))
        .await;
    let manual = r.body["payment_id"].as_str().unwrap().to_owned();
    let plain = pay(&app, &m, "4242424242424242", 200).await;
    app.clock.advance(Duration::seconds(6));
    app.run_due_jobs().await;
    for p in [&manual, &plain] {
        let r = app
            .call(
                &m,
                Method::GET,
                &format!("/disputes/list?payment_id={p}"),
                None,
            )
            .await;
        assert_eq!(
            r.body["data"].as_array().unwrap().len(),
            0,
            "{p} disputed early"
        );
    }
    let r = app
        .call(
            &m,
            Method::POST,
            &format!("/payments/{manual}/capture"),
            Some(json!({"amount": 200})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let d = dispute_of(&app, &m, &manual).await;
    assert_eq!(d["amount"], 200, "the captured part is disputed");

    let all = app
        .call(&m, Method::GET, "/disputes/list?status=expired", None)
        .await;
    assert_eq!(all.body["data"].as_array().unwrap().len(), 1);
    let r = app
        .call(&m, Method::GET, "/disputes/list?status=closed", None)
        .await;
    assert_eq!((r.status, r.param()), (400, Some("status")));
    let r = app
        .call(&m, Method::GET, "/disputes/list?stage=appeal", None)
        .await;
    assert_eq!((r.status, r.param()), (400, Some("stage")));
}

#[actix_web::test]
async fn refunds_racing_the_dispute_never_take_more_than_was_captured() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let payment_id = pay(&app, &m, DISPUTED, 500).await;
    app.clock.advance(Duration::seconds(6));
    // The open job is due now: 30 refunds of 10 race it through the payment's actor.
    let answers =
        futures_util::future::join_all((0..30).map(|_| refund(&app, &m, &payment_id, Some(10))))
            .await;
    let mut refunded = 0;
    for a in &answers {
        match a.status {
            201 => refunded += a.body["amount"].as_i64().unwrap(),
            409 => assert!(
                matches!(a.code(), "dispute_open" | "concurrent_update"),
                "{}",
                a.body
            ),
            other => panic!("unexpected {other}: {}", a.body),
        }
    }
    let d = dispute_of(&app, &m, &payment_id).await;
    let p = app
        .call(&m, Method::GET, &format!("/payments/{payment_id}"), None)
        .await;
    assert_eq!(p.body["amount_refunded"], refunded);
    assert_eq!(
        d["amount"].as_i64().unwrap() + refunded,
        500,
        "the dispute takes what the refunds left, no more"
    );
}

#[actix_web::test]
async fn files_are_checked_and_everything_stays_with_its_merchant() {
    let db = std::sync::Arc::new(TestDb::new().await);
    let app = spawn_with(db, &[("PAYD_LIMITS__MAX_FILE_BYTES", "1024")]).await;
    let m = app.create_merchant("Acme").await;
    let other = app.create_merchant("Other").await;

    let r = upload(&app, &m, "big.txt", &[b'a'; 1025]).await;
    assert_eq!(
        (r.status, r.code(), r.param()),
        (413, "file_too_large", Some("file")),
        "{}",
        r.body
    );
    let r = upload(&app, &m, "tool.exe", b"MZ\x90\x00\x03\x00\x00\x00").await;
    assert_eq!(
        (r.status, r.code(), r.param()),
        (400, "file_type_unsupported", Some("file"))
    );
    let r = upload(&app, &m, "empty.txt", b"").await;
    assert_eq!((r.status, r.code()), (400, "file_empty"));
    let r = post_form(&app, &m, &[("file", Some("a.txt"), b"hello")], &[]).await;
    assert_eq!((r.status, r.param()), (400, Some("purpose")), "{}", r.body);
    let parts: [(&str, Option<&str>, &[u8]); 2] = [
        ("purpose", None, b"avatar"),
        ("file", Some("a.txt"), b"hello"),
    ];
    let r = post_form(&app, &m, &parts, &[]).await;
    assert_eq!((r.status, r.param()), (400, Some("purpose")));
    let parts: [(&str, Option<&str>, &[u8]); 2] = [
        ("purpose", None, b"dispute_evidence"),
        ("extra", None, b"x"),
    ];
    let r = post_form(&app, &m, &parts, &[]).await;
    assert_eq!((r.status, r.param()), (400, Some("extra")));
    let r = app
        .call(&m, Method::POST, "/files", Some(json!({"file": "hello"})))
        .await;
    assert_eq!(
        (r.status, r.param()),
        (400, Some("file")),
        "JSON is not a form: {}",
        r.body
    );
    let r = upload(&app, &m, "a.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR").await;
    assert_eq!(r.body["content_type"], "image/png");

    // An upload with an Idempotency-Key is made once.
    let parts: [(&str, Option<&str>, &[u8]); 2] = [
        ("purpose", None, b"dispute_evidence"),
        ("file", Some("r.txt"), b"receipt"),
    ];
    let mut ids = vec![];
    for _ in 0..2 {
        let r = post_form(&app, &m, &parts, &[("idempotency-key", "upload-1")]).await;
        assert_eq!(r.status, 201, "{}", r.body);
        ids.push(r.body["file_id"].as_str().unwrap().to_owned());
    }
    assert_eq!(ids[0], ids[1]);

    let payment_id = pay(&app, &m, DISPUTED, 500).await;
    let d = dispute_of(&app, &m, &payment_id).await;
    let id = d["dispute_id"].as_str().unwrap();
    for path in [
        format!("/disputes/{id}"),
        format!("/disputes/evidence/{id}"),
    ] {
        let r = app.call(&other, Method::GET, &path, None).await;
        assert_eq!((r.status, r.code()), (404, "resource_missing"), "{path}");
    }
    let r = app
        .call(
            &other,
            Method::POST,
            &format!("/disputes/accept/{id}"),
            None,
        )
        .await;
    assert_eq!(r.status, 404);
    let r = app.call(&other, Method::GET, "/disputes/list", None).await;
    assert_eq!(r.body["data"].as_array().unwrap().len(), 0);
    let theirs = upload(&app, &other, "x.txt", b"not yours").await;
    let r = app
        .call(
            &m,
            Method::PUT,
            "/disputes/evidence",
            Some(json!({"dispute_id": id, "file_id": theirs.body["file_id"]})),
        )
        .await;
    assert_eq!(
        (r.status, r.param()),
        (404, Some("file_id")),
        "another merchant's file"
    );
    let r = app
        .call(&m, Method::GET, "/disputes/dp_nothing", None)
        .await;
    assert_eq!(r.status, 404);
    let r = app
        .call(
            &m,
            Method::PUT,
            "/disputes/evidence",
            Some(json!({"dispute_id": "dp_x", "file_id": ids[0]})),
        )
        .await;
    assert_eq!((r.status, r.param()), (404, Some("dispute_id")));
}

/// A capture is not voided while a dispute is open, and a capture voided first is not disputed:
/// the buyer never gets the money twice.
#[actix_web::test]
async fn a_capture_is_not_voided_against_a_dispute_nor_disputed_once_voided() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let disputed = pay(&app, &m, DISPUTED, 1000).await;
    let d = dispute_of(&app, &m, &disputed).await;
    assert_eq!(d["status"], "opened");
    let cancel = |id: String| {
        let path = format!("/payments/{id}/cancel");
        let app = &app;
        let m = &m;
        async move { app.call(m, Method::POST, &path, Some(json!({}))).await }
    };
    let r = cancel(disputed.clone()).await;
    assert_eq!(
        (r.status, r.code(), r.param()),
        (409, "dispute_open", Some("payment_id"))
    );
    let p = app
        .call(&m, Method::GET, &format!("/payments/{disputed}"), None)
        .await;
    assert_eq!(p.body["status"], "succeeded");

    // The other order: voided within the window, then the processor's dispute time comes.
    let voided = pay(&app, &m, DISPUTED, 1000).await;
    let r = cancel(voided.clone()).await;
    assert_eq!(
        (r.status, r.body["status"].as_str()),
        (200, Some("cancelled_post_capture"))
    );
    app.clock.advance(Duration::seconds(6));
    app.state.scheduler.tick().await.expect("due jobs run");
    let list = app
        .call(
            &m,
            Method::GET,
            &format!("/disputes/list?payment_id={voided}"),
            None,
        )
        .await;
    assert_eq!(
        list.body["data"],
        json!([]),
        "a voided capture has nothing to dispute"
    );
    app.stop().await;
}

/// The chunks stored for a file, in order.
async fn chunks_of(app: &TestApp, file_id: &str) -> Vec<Vec<u8>> {
    use payd_entity::file_chunk;
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
    file_chunk::Entity::find()
        .filter(file_chunk::Column::FileId.eq(file_id))
        .order_by_asc(file_chunk::Column::Seq)
        .all(&app.state.db)
        .await
        .unwrap()
        .into_iter()
        .map(|c| c.bytes)
        .collect()
}

#[actix_web::test]
async fn uploads_are_written_in_chunks_and_bounded_per_merchant() {
    use payd::clock::Clock;
    use sea_orm::{EntityTrait, PaginatorTrait};
    use sha2::{Digest, Sha256};
    let db = std::sync::Arc::new(TestDb::new().await);
    let app = spawn_with(
        db,
        &[
            ("PAYD_LIMITS__MAX_FILE_BYTES", "1048576"),
            ("PAYD_LIMITS__MAX_FILES_PER_MERCHANT", "3"),
            ("PAYD_LIMITS__MAX_FILE_BYTES_PER_MERCHANT", "1000000"),
        ],
    )
    .await;
    let m = app.create_merchant("Acme").await;
    let other = app.create_merchant("Other").await;

    let big: Vec<u8> = b"receipt line, 2 \xc3\x97 mug\n"
        .iter()
        .copied()
        .cycle()
        .take(600_000)
        .collect();
    let r = upload(&app, &m, "receipts.txt", &big).await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["size"], 600_000);
    assert_eq!(r.body["content_type"], "text/plain");
    assert_eq!(r.body["sha256"], hex::encode(Sha256::digest(&big)));
    let chunks = chunks_of(&app, r.body["file_id"].as_str().unwrap()).await;
    assert_eq!(
        chunks.iter().map(Vec::len).collect::<Vec<_>>(),
        [262_144, 262_144, 75_712],
        "written a chunk at a time"
    );
    assert_eq!(chunks.concat(), big);

    // Read back: the record as uploaded, and the bytes as stored, with their type; another
    // merchant's key finds nothing.
    let file_id = r.body["file_id"].as_str().unwrap();
    let record = app
        .call(&m, Method::GET, &format!("/files/{file_id}"), None)
        .await;
    assert_eq!((record.status, &record.body), (200, &r.body));
    let contents = app
        .call(&m, Method::GET, &format!("/files/{file_id}/contents"), None)
        .await;
    assert_eq!(contents.status, 200);
    assert_eq!(contents.header("content-type"), Some("text/plain"));
    assert_eq!(
        contents.header("content-disposition"),
        Some("attachment; filename=\"receipts.txt\"")
    );
    assert_eq!(
        contents.raw.as_ref(),
        big.as_slice(),
        "the bytes come back whole"
    );
    for path in [
        format!("/files/{file_id}"),
        format!("/files/{file_id}/contents"),
    ] {
        let theirs = app.call(&other, Method::GET, &path, None).await;
        assert_eq!(
            (theirs.status, theirs.code()),
            (404, "resource_missing"),
            "{path}"
        );
    }

    // Past the merchant's bytes: refused, and nothing of it stays.
    let r = upload(&app, &m, "more.txt", &big).await;
    assert_eq!((r.status, r.code()), (409, "limit_reached"), "{}", r.body);
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("limits.max_file_bytes_per_merchant"));
    let stored = payd_entity::file_chunk::Entity::find()
        .count(&app.state.db)
        .await
        .unwrap();
    assert_eq!(stored, 3);

    // Past the merchant's count.
    for name in ["a.txt", "b.txt"] {
        assert_eq!(upload(&app, &m, name, b"hello").await.status, 201);
    }
    let r = upload(&app, &m, "c.txt", b"hello").await;
    assert_eq!((r.status, r.code()), (409, "limit_reached"));
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("limits.max_files_per_merchant"));
    assert_eq!(
        upload(&app, &other, "theirs.txt", b"hello").await.status,
        201
    );

    // Chunks of an upload a crash cut off are purged after a day; a file's are kept.
    let now = app.clock.now();
    let orphan = payd_entity::file_chunk::Model {
        file_id: "file_cut_off".into(),
        seq: 0,
        bytes: vec![1, 2, 3],
        created_at: now - Duration::days(2),
    };
    sea_orm::ActiveModelTrait::insert(
        sea_orm::IntoActiveModel::into_active_model(orphan),
        &app.state.db,
    )
    .await
    .unwrap();
    let purged = payd::files::store::purge_orphan_chunks(&app.state.db, now - Duration::days(1))
        .await
        .unwrap();
    assert_eq!(purged, 1);
    assert_eq!(
        chunks_of(&app, r.body["file_id"].as_str().unwrap_or(""))
            .await
            .len(),
        0
    );
    let kept = payd_entity::file_chunk::Entity::find()
        .count(&app.state.db)
        .await
        .unwrap();
    assert_eq!(
        kept, 6,
        "three chunks of the big file, one of each small one"
    );
}

/// The merchant's sandbox test clock drives its disputes too: the sandbox's dispute opens and
/// its deadline passes as the clock is advanced, synchronously, at their own times; another
/// merchant's dispute does not move.
#[actix_web::test]
async fn a_dispute_opens_and_expires_on_the_merchants_test_clock() {
    let app = spawn_app().await;
    let (m, other) = (
        app.create_merchant("Acme").await,
        app.create_merchant("Other").await,
    );
    let payment_id = pay(&app, &m, DISPUTED, 500).await;
    let theirs = pay(&app, &other, DISPUTED, 500).await;
    let theirs = dispute_of(&app, &other, &theirs).await;
    let advance = |seconds: i64| {
        let m = m.clone();
        let app = &app;
        async move {
            let r = app
                .call(
                    &m,
                    Method::POST,
                    "/sandbox/clock/advance",
                    Some(json!({ "seconds": seconds })),
                )
                .await;
            assert_eq!(r.status, 200, "{}", r.body);
            r.body
        }
    };
    advance(10).await;
    let listed = app
        .call(
            &m,
            Method::GET,
            &format!("/disputes/list?payment_id={payment_id}"),
            None,
        )
        .await;
    let d = listed.body["data"][0].clone();
    let id = d["dispute_id"]
        .as_str()
        .expect("opened by the advance")
        .to_owned();
    assert_eq!(d["status"], "opened");
    advance(8 * 86_400).await;
    let r = app
        .call(&m, Method::GET, &format!("/disputes/{id}"), None)
        .await;
    assert_eq!(r.body["status"], "expired", "{}", r.body);
    let events = dispute_events(&app, &m, &id).await;
    assert_eq!(types(&events), ["dispute_opened", "dispute_expired"]);
    let at = |e: &Value| {
        e["created"]
            .as_str()
            .unwrap()
            .parse::<chrono::DateTime<chrono::Utc>>()
            .unwrap()
    };
    let waited = at(&events[1]) - at(&events[0]);
    assert!(
        waited >= Duration::days(7) && waited < Duration::days(8),
        "expired at its deadline on the merchant's clock, {waited} after opening"
    );
    let r = app
        .call(
            &other,
            Method::GET,
            &format!("/disputes/{}", theirs["dispute_id"].as_str().unwrap()),
            None,
        )
        .await;
    assert_eq!(
        r.body["status"], "opened",
        "another merchant's clock did not move"
    );
}

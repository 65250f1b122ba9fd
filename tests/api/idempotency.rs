//! `Idempotency-Key` on POST routes.

use crate::common;

use actix_web::http::Method;
use chrono::Duration;
use common::{spawn_app, TestApp};
use payd::clock::Clock;
use payd_entity::idempotency_key;
use sea_orm::{ActiveModelTrait, Set};
use serde_json::{json, Value};

async fn create_shop(app: &TestApp, key: &str, idem: &str, body: Value) -> common::Answer {
    app.send(
        Method::POST,
        "/account/shops",
        Some(key),
        Some(&body),
        &[("idempotency-key", idem)],
    )
    .await
}

/// The stored row of the `Idempotency-Key` `key`.
async fn key_row(app: &TestApp, key: &str) -> idempotency_key::Model {
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
    idempotency_key::Entity::find()
        .filter(idempotency_key::Column::Key.eq(key))
        .one(&app.state.db)
        .await
        .unwrap()
        .expect("the key's row")
}

async fn shop_count(app: &TestApp, key: &str) -> usize {
    app.get("/account/shops?limit=100", key).await.body["data"]
        .as_array()
        .unwrap()
        .len()
}

#[actix_web::test]
async fn the_same_key_and_body_replay_the_first_answer_byte_for_byte() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let first = create_shop(&app, &m.secret_key, "k-1", json!({"name": "Berlin"})).await;
    assert_eq!(first.status, 201);
    assert_eq!(first.header("idempotent-replayed"), None);
    let again = create_shop(&app, &m.secret_key, "k-1", json!({"name": "Berlin"})).await;
    assert_eq!(again.status, 201);
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.raw, first.raw);
    assert_eq!(again.header("content-type"), first.header("content-type"));
    assert_eq!(shop_count(&app, &m.secret_key).await, 2);

    let other_body = create_shop(&app, &m.secret_key, "k-1", json!({"name": "Paris"})).await;
    assert_eq!(
        (other_body.status, other_body.code()),
        (409, "idempotency_key_reused")
    );
    assert_eq!(other_body.param(), Some("Idempotency-Key"));

    // The same request serialized again, with other key order and whitespace, is the same
    // request; a changed value is not.
    let send_raw = |raw: &'static str| {
        app.send_bytes(
            Method::POST,
            "/customers",
            Some(&m.secret_key),
            Some(("application/json", raw.as_bytes().to_vec())),
            &[("idempotency-key", "k-canonical")],
        )
    };
    let first = send_raw(r#"{"name":"Ada","metadata":{"a":"1","b":"2"}}"#).await;
    assert_eq!(first.status, 201, "{}", first.body);
    let respelled =
        send_raw("{ \"metadata\": {\"b\": \"2\", \"a\": \"1\"},\n  \"name\": \"Ada\" }").await;
    assert_eq!(
        respelled.header("idempotent-replayed"),
        Some("true"),
        "{}",
        respelled.body
    );
    assert_eq!(respelled.raw, first.raw);
    let changed = send_raw(r#"{"name":"Ada","metadata":{"a":"1","b":"3"}}"#).await;
    assert_eq!(changed.code(), "idempotency_key_reused");

    // Error answers are stored too.
    let bad = create_shop(&app, &m.secret_key, "k-2", json!({"name": ""})).await;
    assert_eq!(bad.status, 400);
    let bad_again = create_shop(&app, &m.secret_key, "k-2", json!({"name": ""})).await;
    assert_eq!(
        (bad_again.status, bad_again.raw.clone()),
        (400, bad.raw.clone())
    );
    assert_eq!(bad_again.header("idempotent-replayed"), Some("true"));
}

/// The state a lost answer leaves: a key in flight whose lock lapsed, with the customer its
/// request stored as its recovery point. The retry answers with that customer; it makes no
/// second one.
#[actix_web::test]
async fn a_retry_resumes_from_the_object_its_lost_answer_had_made() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let body = json!({"name": "Ada", "email": "ada@example.com"});
    let send = |key: &'static str| {
        let (app, m, body) = (&app, &m, &body);
        async move {
            let headers = [("idempotency-key", key)];
            app.send(
                Method::POST,
                "/customers",
                Some(&m.secret_key),
                Some(body),
                &headers,
            )
            .await
        }
    };
    let made = send("probe").await;
    assert_eq!(made.status, 201, "{}", made.body);
    let row = key_row(&app, "probe").await;
    let now = app.clock.now();
    idempotency_key::ActiveModel {
        key: Set("lost".into()),
        state: Set(payd_model::idempotency::KeyState::InFlight),
        response_status: Set(None),
        response_headers: Set(None),
        response_body: Set(None),
        locked_until: Set(now - Duration::seconds(1)),
        recovery_point: Set(made.body["customer_id"].as_str().map(str::to_owned)),
        ..idempotency_key::ActiveModel::from(row)
    }
    .insert(&app.state.db)
    .await
    .unwrap();
    let retry = send("lost").await;
    assert_eq!(
        (retry.status, &retry.body["customer_id"]),
        (201, &made.body["customer_id"]),
        "{}",
        retry.body
    );
    let listed = app.get("/customers/list?limit=100", &m.secret_key).await;
    assert_eq!(
        listed.body["data"].as_array().unwrap().len(),
        1,
        "one customer"
    );
    // Its answer is stored now: the next retry replays it.
    let again = send("lost").await;
    assert_eq!(again.header("idempotent-replayed"), Some("true"));
    assert_eq!(again.raw, retry.raw);
}

#[actix_web::test]
async fn keys_are_scoped_to_the_merchant() {
    let app = spawn_app().await;
    let a = app.create_merchant("A").await;
    let b = app.create_merchant("B").await;
    let ra = create_shop(&app, &a.secret_key, "shared", json!({"name": "X"})).await;
    let rb = create_shop(&app, &b.secret_key, "shared", json!({"name": "X"})).await;
    assert_eq!((ra.status, rb.status), (201, 201));
    assert_eq!(rb.header("idempotent-replayed"), None);
    assert_ne!(ra.body["profile_id"], rb.body["profile_id"]);
}

#[actix_web::test]
async fn a_key_in_flight_is_refused_until_its_lock_runs_out() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let body = json!({"name": "Berlin"});
    // Run once to learn the fingerprint, then pretend a request with that key is running.
    let first = create_shop(&app, &m.secret_key, "probe", body.clone()).await;
    assert_eq!(first.status, 201);
    let row = key_row(&app, "probe").await;
    let now = app.clock.now();
    idempotency_key::ActiveModel {
        merchant_id: Set(row.merchant_id.clone()),
        mode: Set(row.mode),
        scope: Set(row.scope.clone()),
        key: Set("running".into()),
        fingerprint: Set(row.fingerprint.clone()),
        state: Set(payd_model::idempotency::KeyState::InFlight),
        response_status: Set(None),
        response_headers: Set(None),
        response_body: Set(None),
        owner_key_id: Set(None),
        created_at: Set(now),
        locked_until: Set(now + Duration::seconds(60)),
        recovery_point: Set(None),
    }
    .insert(&app.state.db)
    .await
    .unwrap();
    // The fingerprint covers the path and body, not the key, so "running" matches this request.
    let busy = create_shop(&app, &m.secret_key, "running", body.clone()).await;
    assert_eq!((busy.status, busy.code()), (409, "idempotency_key_in_use"));
    assert_eq!(shop_count(&app, &m.secret_key).await, 2);

    app.clock.advance(Duration::seconds(61));
    let taken_over = create_shop(&app, &m.secret_key, "running", body).await;
    assert_eq!(taken_over.status, 201, "{:?}", taken_over.body);
    assert_eq!(shop_count(&app, &m.secret_key).await, 3);
}

#[actix_web::test]
async fn keys_expire_after_a_day() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let first = create_shop(&app, &m.secret_key, "daily", json!({"name": "A"})).await;
    app.clock.advance(Duration::hours(23));
    let replay = create_shop(&app, &m.secret_key, "daily", json!({"name": "A"})).await;
    assert_eq!(replay.header("idempotent-replayed"), Some("true"));
    app.clock.advance(Duration::hours(2));
    let fresh = create_shop(&app, &m.secret_key, "daily", json!({"name": "A"})).await;
    assert_eq!(fresh.status, 201);
    assert_eq!(fresh.header("idempotent-replayed"), None);
    assert_ne!(fresh.body["profile_id"], first.body["profile_id"]);
}

#[actix_web::test]
async fn concurrent_requests_with_one_key_create_one_object() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let body = json!({"name": "Once"});
    let answers = futures_util::future::join_all(
        (0..12).map(|_| create_shop(&app, &m.secret_key, "race", body.clone())),
    )
    .await;
    let created: Vec<_> = answers
        .iter()
        .filter(|a| a.status == 201 && a.header("idempotent-replayed").is_none())
        .collect();
    assert_eq!(created.len(), 1, "exactly one request ran");
    for a in &answers {
        match a.status {
            201 => assert_eq!(a.body["profile_id"], created[0].body["profile_id"]),
            409 => assert_eq!(a.code(), "idempotency_key_in_use"),
            other => panic!("unexpected {other}: {:?}", a.body),
        }
    }
    assert_eq!(shop_count(&app, &m.secret_key).await, 2);
}

#[actix_web::test]
async fn malformed_keys_are_refused_and_get_is_untouched() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let long = "k".repeat(256);
    let res = create_shop(&app, &m.secret_key, &long, json!({"name": "A"})).await;
    assert_eq!((res.status, res.param()), (400, Some("Idempotency-Key")));
    let res = app
        .send(
            Method::GET,
            "/account",
            Some(&m.secret_key),
            None,
            &[("idempotency-key", "g")],
        )
        .await;
    assert_eq!(res.status, 200);
    assert_eq!(res.header("idempotent-replayed"), None);
}

/// The API key `kind` minted by `key` (unbound unless `profile_id` is given).
async fn new_key(app: &TestApp, key: &str, kind: &str, profile_id: Option<&str>) -> String {
    let mut body = json!({"kind": kind});
    if let Some(p) = profile_id {
        body["profile_id"] = json!(p);
    }
    let made = app.post("/account/api-keys", key, body).await;
    assert_eq!(made.status, 201, "{:?}", made.body);
    made.body["key"].as_str().unwrap().to_owned()
}

/// `POST /account/api-keys {"kind": "secret"}` under `Idempotency-Key: mint-1`.
async fn mint(app: &TestApp, key: &str) -> common::Answer {
    let body = json!({"kind": "secret"});
    app.send(
        Method::POST,
        "/account/api-keys",
        Some(key),
        Some(&body),
        &[("idempotency-key", "mint-1")],
    )
    .await
}

#[actix_web::test]
async fn a_publishable_key_never_gets_a_secret_answer_replayed() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let minted = mint(&app, &m.secret_key).await;
    assert_eq!(minted.status, 201);
    let secret = minted.body["key"].as_str().unwrap().to_owned();

    let public = mint(&app, &m.publishable_key).await;
    assert_eq!((public.status, public.code()), (403, "secret_key_required"));
    assert_eq!(public.header("idempotent-replayed"), None);
    assert!(!String::from_utf8_lossy(&public.raw).contains(&secret));
    // Asked again, still refused: a refusal is not stored, and never becomes the answer.
    let again = mint(&app, &m.publishable_key).await;
    assert_eq!(
        (again.status, again.header("idempotent-replayed")),
        (403, None)
    );

    // The one-time secret is replayed to the key that asked for it, and to no other key.
    let mine = mint(&app, &m.secret_key).await;
    assert_eq!(mine.header("idempotent-replayed"), Some("true"));
    assert_eq!(mine.body["key"], secret.as_str());
    let other_secret = new_key(&app, &m.secret_key, "secret", None).await;
    let other = mint(&app, &other_secret).await;
    assert_eq!(
        (other.status, other.code()),
        (409, "idempotency_key_reused")
    );
    assert!(!String::from_utf8_lossy(&other.raw).contains(&secret));
}

#[actix_web::test]
async fn a_refused_request_does_not_claim_the_key() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let order = json!({"amount": 1000, "currency": "EUR"});
    let idem = [
        ("idempotency-key", "order-1001"),
        ("x-profile-id", m.profile_id.as_str()),
    ];
    let refused = app
        .send(
            Method::POST,
            "/payments",
            Some(&m.publishable_key),
            Some(&order),
            &idem,
        )
        .await;
    assert_eq!(
        (refused.status, refused.code()),
        (403, "secret_key_required")
    );
    let real = app
        .send(
            Method::POST,
            "/payments",
            Some(&m.secret_key),
            Some(&order),
            &idem,
        )
        .await;
    assert_eq!(real.status, 201, "{:?}", real.body);
    assert_eq!(real.header("idempotent-replayed"), None);
    let replayed = app
        .send(
            Method::POST,
            "/payments",
            Some(&m.secret_key),
            Some(&order),
            &idem,
        )
        .await;
    assert_eq!(replayed.header("idempotent-replayed"), Some("true"));
    assert_eq!(replayed.body["payment_id"], real.body["payment_id"]);
}

#[actix_web::test]
async fn keys_bound_to_other_shops_get_their_own_answers() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let other = app
        .post("/account/shops", &m.secret_key, json!({"name": "Paris"}))
        .await;
    let other_shop = other.body["profile_id"].as_str().unwrap().to_owned();
    let bound_here = new_key(&app, &m.secret_key, "secret", Some(&m.profile_id)).await;
    let bound_there = new_key(&app, &m.secret_key, "secret", Some(&other_shop)).await;
    let hook = json!({"url": "https://shop.example/hooks"});
    let put = app
        .send(
            Method::PUT,
            &format!("/account/shops/{}/webhook", m.profile_id),
            Some(&m.secret_key),
            Some(&hook),
            &[],
        )
        .await;
    assert_eq!(put.status, 200, "{:?}", put.body);

    let rotate = format!("/account/shops/{}/webhook/rotate", m.profile_id);
    let idem = [("idempotency-key", "rotate-1")];
    let rotated = app
        .send(Method::POST, &rotate, Some(&bound_here), None, &idem)
        .await;
    assert_eq!(rotated.status, 200, "{:?}", rotated.body);
    let secret = rotated.body["secret"].as_str().unwrap().to_owned();

    // A key of another shop gets the refusal its own request earns, never the rotation.
    let elsewhere = app
        .send(Method::POST, &rotate, Some(&bound_there), None, &idem)
        .await;
    assert_eq!(elsewhere.status, 404, "{:?}", elsewhere.body);
    assert_eq!(elsewhere.header("idempotent-replayed"), None);
    assert!(!String::from_utf8_lossy(&elsewhere.raw).contains(&secret));
    // An unbound key has its own scope: the same key and request run again (a new secret).
    let unbound = app
        .send(Method::POST, &rotate, Some(&m.secret_key), None, &idem)
        .await;
    assert_eq!(unbound.status, 200);
    assert_eq!(unbound.header("idempotent-replayed"), None);
    assert_ne!(unbound.body["secret"], secret.as_str());
}

#[actix_web::test]
async fn read_only_routes_store_no_answer() {
    use sea_orm::{EntityTrait, PaginatorTrait};
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let idem = [("idempotency-key", "list-1")];
    let query = json!({"limit": 10});
    let empty = app
        .send(
            Method::POST,
            "/payments/list",
            Some(&m.secret_key),
            Some(&query),
            &idem,
        )
        .await;
    assert_eq!(empty.status, 200, "{:?}", empty.body);
    let created = app
        .create_payment(&m, json!({"amount": 500, "currency": "EUR"}))
        .await;
    assert_eq!(created.status, 201);
    let listed = app
        .send(
            Method::POST,
            "/payments/list",
            Some(&m.secret_key),
            Some(&query),
            &idem,
        )
        .await;
    assert_eq!(listed.header("idempotent-replayed"), None);
    assert_ne!(
        listed.raw, empty.raw,
        "the list is read again, not replayed"
    );
    let events = app
        .send(
            Method::POST,
            &format!("/events/{}", m.merchant_id),
            Some(&m.secret_key),
            Some(&json!({})),
            &idem,
        )
        .await;
    assert_eq!(events.status, 200, "{:?}", events.body);
    let stored = idempotency_key::Entity::find()
        .count(&app.state.db)
        .await
        .unwrap();
    assert_eq!(stored, 0);
}

/// Issue #14's first way to lose money: a refund that outlives the request deadline. The client
/// gets 503, but the refund runs to its end and its answer is stored under the key; a retry
/// while it runs is 409 (also after the key's lock time, which its owner renews), and a retry
/// afterwards replays the answer. One refund, at payd and at the processor. With two
/// instances, each retry goes to the other one.
#[actix_web::test]
async fn a_refund_that_outlives_the_deadline_runs_once() {
    use common::sim::{add_remote, fault, start_sim};
    use std::sync::atomic::Ordering;
    let db = std::sync::Arc::new(common::TestDb::new().await);
    let app = common::spawn_with(
        db,
        &[
            ("PAYD_HTTP__REQUEST_TIMEOUT_SECS", "2"),
            ("PAYD_IDEMPOTENCY__LOCK_SECS", "3"),
        ],
    )
    .await;
    let m = app.create_merchant("Acme").await;
    let (sim, url) = start_sim().await;
    add_remote(&app, &m, &url, 10_000).await;
    let paid = app
        .create_payment(
            &m,
            json!({"amount": 500, "currency": "USD", "confirm": true, "payment_method_data": common::card("4242424242424242")}),
        )
        .await;
    assert_eq!(paid.body["status"], "succeeded", "{}", paid.body);
    let id = paid.body["payment_id"].as_str().unwrap();
    // The processor answers the refund after 5 s: past the deadline and the key's lock time.
    fault(&url, json!({"kind": "slow", "delay_ms": 5000})).await;
    let body = json!({"payment_id": id, "amount": 300});
    let refund = || {
        app.send(
            Method::POST,
            "/refunds",
            Some(&m.secret_key),
            Some(&body),
            &[("idempotency-key", "refund-once")],
        )
    };
    let first = refund().await;
    assert_eq!(
        (first.status, first.code()),
        (503, "request_timeout"),
        "{}",
        first.body
    );
    // Past the lock time (3 s) on the test's clock, still running: the lock is renewed (a
    // third of the lock time at a time) to after that moment, so the key is held, not taken
    // over.
    app.clock.advance(chrono::Duration::seconds(4));
    let held = {
        use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        loop {
            let key = idempotency_key::Entity::find()
                .filter(idempotency_key::Column::Key.eq("refund-once"))
                .one(&app.state.db)
                .await
                .unwrap()
                .expect("the key's row");
            if key.locked_until > app.clock.base() || std::time::Instant::now() > deadline {
                break key.locked_until;
            }
            actix_web::rt::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    };
    assert!(held > app.clock.base(), "the lock was renewed: {held}");
    let busy = refund().await;
    assert_eq!(
        (busy.status, busy.code(), busy.header("retry-after")),
        (409, "idempotency_key_in_use", Some("1")),
        "{}",
        busy.body
    );
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(15);
    let replayed = loop {
        let r = refund().await;
        if r.status != 409 {
            break r;
        }
        assert!(std::time::Instant::now() < deadline, "{}", r.body);
        actix_web::rt::time::sleep(std::time::Duration::from_millis(200)).await;
    };
    assert_eq!(replayed.status, 201, "{}", replayed.body);
    assert_eq!(replayed.header("idempotent-replayed"), Some("true"));
    let payment = app.get(&format!("/payments/{id}"), &m.secret_key).await;
    assert_eq!(payment.body["amount_refunded"], 300, "{}", payment.body);
    let refunds = app
        .post("/refunds/list", &m.secret_key, json!({"payment_id": id}))
        .await;
    assert_eq!(refunds.body["data"].as_array().unwrap().len(), 1);
    assert_eq!(
        refunds.body["data"][0]["refund_id"],
        replayed.body["refund_id"]
    );
    assert_eq!(
        sim.refunds_done.load(Ordering::SeqCst),
        1,
        "one refund at the processor"
    );
}

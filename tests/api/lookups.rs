//! The per-instance caches of API keys and shops' routing (`src/lookups.rs`): a payment in the
//! steady state reads neither, and a change to them is in force on every instance when the
//! route that made it answers: a revoked key, an advanced test clock, new routing rules. On
//! PostgreSQL these run on two instances over one database, each request sent to the instance
//! named; on SQLite (one instance) they run on one. A change written by another process (as
//! `payd admin rotate-master-key` does) reaches the instances within the staleness bound.

use crate::common;

use std::time::Duration;

use actix_web::http::Method;
use common::{card, spawn_instances, Answer, Merchant, TestApp, TestDb};
use sea_orm::{ConnectionTrait, Database};
use serde_json::{json, Value};

/// The bound the tests run with (`database.lookup_staleness_ms`, the harness's setting).
const BOUND_MS: u64 = 250;

async fn two_instances() -> TestApp {
    let db = std::sync::Arc::new(TestDb::new().await);
    let count = if db.is_postgres() { 2 } else { 1 };
    spawn_instances(db, &[], count).await
}

/// Sends to the instance `i` (modulo the instances there are), in the merchant's shop.
async fn at(
    app: &TestApp,
    i: usize,
    (m, key): (&Merchant, &str),
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Answer {
    let body = body.map(|b| ("application/json", serde_json::to_vec(&b).expect("JSON")));
    let shop = [("x-profile-id", m.profile_id.as_str())];
    app.send_to(i, method, path, Some(key), body, &shop).await
}

/// A confirmed payment with the test card that succeeds, created on instance `i`.
async fn pay(app: &TestApp, i: usize, m: &Merchant) -> Value {
    let body = json!({"amount": 500, "currency": "USD", "confirm": true,
        "payment_method_data": card("4242424242424242")});
    let r = at(
        app,
        i,
        (m, &m.secret_key),
        Method::POST,
        "/payments",
        Some(body),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body
}

/// The processor a payment made on instance `i` was routed to.
async fn processor(app: &TestApp, i: usize, m: &Merchant) -> String {
    let id = pay(app, i, m).await["payment_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/payments/{id}/attempts");
    let r = at(app, i, (m, &m.secret_key), Method::GET, &path, None).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["data"][0]["processor"]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Lets every instance read the generation once (it starts trusting its caches then).
async fn settle() {
    actix_web::rt::time::sleep(Duration::from_millis(BOUND_MS / 2)).await;
}

/// Adds the processors `alpha` and `beta` to the merchant's shop; returns the routing rules
/// that send everything to one of them.
async fn two_processors(app: &TestApp, m: &Merchant) -> impl Fn(&str) -> Value {
    for name in ["alpha", "beta"] {
        let r = at(
            app,
            0,
            (m, &m.secret_key),
            Method::POST,
            &format!("/account/shops/{}/processors", m.profile_id),
            Some(json!({"name": name})),
        )
        .await;
        assert_eq!(r.status, 201, "{}", r.body);
    }
    |processor: &str| json!({"rules": [{"name": "all", "processors": [{"processor": processor}]}]})
}

/// Routes the merchant's shop by `rules`, through the route (every instance learns of it).
async fn route(app: &TestApp, m: &Merchant, rules: Value) {
    let path = format!("/account/shops/{}/routing", m.profile_id);
    let r = at(app, 0, (m, &m.secret_key), Method::PUT, &path, Some(rules)).await;
    assert_eq!(r.status, 200, "{}", r.body);
}

/// Runs `statements` in one transaction on a connection of its own, as another process
/// would: no instance is told of it.
async fn behind_the_back(app: &TestApp, statements: &[String]) {
    let other = Database::connect(app.db.url.as_str())
        .await
        .expect("connect");
    let backend = other.get_database_backend();
    let txn = sea_orm::TransactionTrait::begin(&other)
        .await
        .expect("begin");
    for sql in statements {
        txn.execute_raw(sea_orm::Statement::from_string(backend, sql.clone()))
            .await
            .expect("write");
    }
    txn.commit().await.expect("commit");
    other.close().await.ok();
}

/// In the steady state a payment takes its key and its shop's routing from the instance's
/// caches: with both changed in the database behind payd's back (the key revoked, the shop
/// routed elsewhere, and no instance told), every instance still takes the key and routes as
/// before. (A payment that read either would be refused, or routed to `beta`.)
#[actix_web::test]
async fn in_the_steady_state_a_payment_reads_neither_its_key_nor_its_shops_routing() {
    let app = two_instances().await;
    let m = app.create_merchant("Acme").await;
    let to = two_processors(&app, &m).await;
    route(&app, &m, to("beta")).await;
    // The rules that route to `beta`, as stored.
    let to_beta = {
        let db = Database::connect(app.db.url.as_str())
            .await
            .expect("connect");
        let backend = db.get_database_backend();
        let sql = format!(
            "SELECT rules FROM routing_configs WHERE profile_id = '{}'",
            m.profile_id
        );
        let row = db
            .query_one_raw(sea_orm::Statement::from_string(backend, sql))
            .await
            .expect("read")
            .expect("the shop's routing");
        row.try_get::<String>("", "rules").expect("rules")
    };
    route(&app, &m, to("alpha")).await;
    settle().await;
    for i in 0..app.instances() {
        for _ in 0..2 {
            assert_eq!(processor(&app, i, &m).await, "alpha", "instance {i}");
        }
    }
    let quoted = to_beta.replace('\'', "''");
    let reroute = format!(
        "UPDATE routing_configs SET rules = '{quoted}' WHERE profile_id = '{}'",
        m.profile_id
    );
    let revoke = format!(
        "UPDATE api_keys SET revoked_at = CURRENT_TIMESTAMP WHERE merchant_id = '{}'",
        m.merchant_id
    );
    behind_the_back(&app, &[reroute, revoke]).await;
    for n in 0..10 {
        assert_eq!(processor(&app, n, &m).await, "alpha", "payment {n}");
    }
    app.stop().await;
}

#[actix_web::test]
async fn a_revoked_key_is_refused_by_every_instance_when_the_revoke_answers() {
    let app = two_instances().await;
    let m = app.create_merchant("Acme").await;
    let created = at(
        &app,
        0,
        (&m, &m.secret_key),
        Method::POST,
        "/account/api-keys",
        Some(json!({"kind": "secret", "name": "ci"})),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let key = created.body["key"].as_str().unwrap().to_owned();
    let key_id = created.body["key_id"].as_str().unwrap().to_owned();
    settle().await;
    // Each instance has the key cached.
    for i in 0..app.instances() {
        for _ in 0..2 {
            assert_eq!(
                at(&app, i, (&m, &key), Method::GET, "/account", None)
                    .await
                    .status,
                200
            );
        }
    }
    let revoked = at(
        &app,
        0,
        (&m, &m.secret_key),
        Method::DELETE,
        &format!("/account/api-keys/{key_id}"),
        None,
    )
    .await;
    assert_eq!(revoked.status, 200, "{}", revoked.body);
    for i in (0..app.instances()).rev() {
        let r = at(&app, i, (&m, &key), Method::GET, "/account", None).await;
        assert_eq!(
            (r.status, r.code()),
            (401, "api_key_revoked"),
            "instance {i}"
        );
    }
    app.stop().await;
}

#[actix_web::test]
async fn an_advanced_test_clock_is_every_instances_clock_when_the_advance_answers() {
    let app = two_instances().await;
    let m = app.create_merchant("Acme").await;
    settle().await;
    for i in 0..app.instances() {
        pay(&app, i, &m).await;
    }
    let day = 86_400;
    let r = at(
        &app,
        0,
        (&m, &m.secret_key),
        Method::POST,
        "/sandbox/clock/advance",
        Some(json!({"seconds": 30 * day})),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let now = payd::clock::Clock::base(&*app.clock);
    for i in (0..app.instances()).rev() {
        let p = pay(&app, i, &m).await;
        let created: chrono::DateTime<chrono::Utc> =
            p["created"].as_str().unwrap().parse().unwrap();
        let ahead = (created - now).num_days();
        assert_eq!(
            ahead, 30,
            "instance {i} created the payment {ahead} days ahead"
        );
    }
    app.stop().await;
}

#[actix_web::test]
async fn new_routing_rules_route_every_instances_next_payment() {
    let app = two_instances().await;
    let m = app.create_merchant("Acme").await;
    let to = two_processors(&app, &m).await;
    route(&app, &m, to("alpha")).await;
    settle().await;
    for i in 0..app.instances() {
        for _ in 0..2 {
            assert_eq!(processor(&app, i, &m).await, "alpha", "instance {i}");
        }
    }
    route(&app, &m, to("beta")).await;
    for i in (0..app.instances()).rev() {
        assert_eq!(processor(&app, i, &m).await, "beta", "instance {i}");
    }
    app.stop().await;
}

#[actix_web::test]
async fn a_change_another_process_writes_reaches_every_instance_within_the_bound() {
    let app = two_instances().await;
    let m = app.create_merchant("Acme").await;
    settle().await;
    for i in 0..app.instances() {
        for _ in 0..2 {
            let r = at(&app, i, (&m, &m.secret_key), Method::GET, "/account", None).await;
            assert_eq!(r.status, 200, "{}", r.body);
        }
    }
    // What another process (an operator's tool, `payd admin`) writes: the row and the count,
    // in one transaction, and no route to wait for.
    let statements = [
        format!(
            "UPDATE api_keys SET revoked_at = CURRENT_TIMESTAMP WHERE merchant_id = '{}'",
            m.merchant_id
        ),
        "UPDATE lookup_generation SET generation = generation + 1 WHERE id = 1".to_owned(),
    ];
    behind_the_back(&app, &statements).await;
    actix_web::rt::time::sleep(Duration::from_millis(BOUND_MS)).await;
    for i in 0..app.instances() {
        let r = at(&app, i, (&m, &m.secret_key), Method::GET, "/account", None).await;
        assert_eq!(
            (r.status, r.code()),
            (401, "api_key_revoked"),
            "instance {i}"
        );
    }
    app.stop().await;
}

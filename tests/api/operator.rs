//! The operator's hold on merchants and their keys (admin key): live merchants by default in
//! production, live keys issued to a sandbox merchant, suspension, revocation, and the pepper
//! and admin key rotated with an overlap (docs/operations.md).

use crate::common;

use std::sync::Arc;

use awc::http::Method;
use common::{spawn_with, TestApp, TestDb, ADMIN_KEY, PRODUCTION};
use serde_json::{json, Value};

fn text(v: &Value, field: &str) -> String {
    v[field]
        .as_str()
        .unwrap_or_else(|| panic!("{field} in {v}"))
        .to_owned()
}

/// The actions of the merchant's audit log, oldest first, and who did each.
async fn audit(app: &TestApp, key: &str) -> Vec<(String, Value)> {
    let log = app.get("/account/audit-log", key).await;
    assert_eq!(log.status, 200, "{}", log.body);
    let mut entries: Vec<(String, Value)> = log.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| (text(e, "action"), e["actor_key_id"].clone()))
        .collect();
    entries.reverse();
    entries
}

#[actix_web::test]
async fn production_merchants_are_live_by_default_and_sandbox_ones_get_live_keys_later() {
    let app = spawn_with(Arc::new(TestDb::new().await), PRODUCTION).await;
    let live = app
        .post("/admin/merchants", ADMIN_KEY, json!({"name": "Live"}))
        .await;
    assert_eq!(live.status, 201, "{}", live.body);
    assert!(text(&live.body, "secret_key").starts_with("prd_"));
    assert_eq!(live.body["test_mode"], false);

    let trial = app
        .post(
            "/admin/merchants",
            ADMIN_KEY,
            json!({"name": "Trial", "mode": "sandbox"}),
        )
        .await;
    assert_eq!(trial.status, 201, "{}", trial.body);
    let (merchant, sandbox_key) = (
        text(&trial.body, "merchant_id"),
        text(&trial.body, "secret_key"),
    );
    assert!(sandbox_key.starts_with("snd_"));

    // Its live keys, later: a pair not bound to a shop, shown once, the operator's in its log.
    let path = format!("/admin/merchants/{merchant}/api-keys");
    let issued = app.post(&path, ADMIN_KEY, json!({})).await;
    assert_eq!(issued.status, 201, "{}", issued.body);
    assert_eq!(issued.body["merchant_id"], merchant.as_str());
    assert_eq!(issued.body["test_mode"], false);
    let live_key = text(&issued.body, "secret_key");
    assert!(live_key.starts_with("prd_"));
    assert!(text(&issued.body, "publishable_key").starts_with("pk_prd_"));
    let account = app.get("/account", &live_key).await;
    assert_eq!(account.body["merchant_id"], merchant.as_str());
    assert_eq!(account.body["test_mode"], false);
    let live_keys = app.get("/account/api-keys", &live_key).await;
    assert_eq!(live_keys.body["data"].as_array().unwrap().len(), 2);
    let created = audit(&app, &live_key).await;
    assert_eq!(
        created,
        [
            ("api_key.created".to_owned(), Value::Null),
            ("api_key.created".to_owned(), Value::Null)
        ]
    );

    let missing = app
        .post(
            "/admin/merchants/mer_0000000000000000/api-keys",
            ADMIN_KEY,
            json!({}),
        )
        .await;
    assert_eq!(
        (missing.status, missing.param()),
        (404, Some("merchant_id"))
    );
    let wrong = app.post(&path, &live_key, json!({})).await;
    assert_eq!(wrong.status, 401, "a merchant key is not the admin key");
    let bad = app.post(&path, ADMIN_KEY, json!({"mode": "staging"})).await;
    assert_eq!((bad.status, bad.param()), (400, Some("mode")));
}

#[actix_web::test]
async fn a_sandbox_deployment_issues_only_sandbox_keys() {
    let app = common::spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let path = format!("/admin/merchants/{}/api-keys", m.merchant_id);
    let issued = app.post(&path, ADMIN_KEY, json!({})).await;
    assert_eq!(issued.status, 201, "{}", issued.body);
    assert!(text(&issued.body, "secret_key").starts_with("snd_"));
    let live = app
        .post(&path, ADMIN_KEY, json!({"mode": "production"}))
        .await;
    assert_eq!(
        (live.status, live.code(), live.param()),
        (403, "production_disabled", Some("mode"))
    );
}

#[actix_web::test]
async fn a_suspended_merchants_keys_are_refused_until_it_is_reinstated() {
    let app = common::spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let other = app.create_merchant("Other").await;
    let base = format!("/admin/merchants/{}", m.merchant_id);

    let suspended = app
        .post(&format!("{base}/suspend"), ADMIN_KEY, json!({}))
        .await;
    assert_eq!(suspended.status, 200, "{}", suspended.body);
    let at = suspended.body["suspended_at"].clone();
    assert!(at.is_string(), "{}", suspended.body);
    // Again: nothing changes, and the log does not say it twice.
    let again = app
        .post(&format!("{base}/suspend"), ADMIN_KEY, json!({}))
        .await;
    assert_eq!(again.body["suspended_at"], at);
    assert_eq!(app.get(&base, ADMIN_KEY).await.body["suspended_at"], at);

    // Every instance refuses both its keys; another merchant goes on.
    for key in [&m.secret_key, &m.publishable_key] {
        let refused = app.get("/account", key).await;
        assert_eq!(
            (refused.status, refused.code()),
            (403, "merchant_suspended"),
            "{}",
            refused.body
        );
    }
    assert_eq!(app.get("/account", &other.secret_key).await.status, 200);

    let back = app
        .post(&format!("{base}/reinstate"), ADMIN_KEY, json!({}))
        .await;
    assert_eq!(back.status, 200, "{}", back.body);
    assert_eq!(back.body["suspended_at"], Value::Null);
    assert_eq!(app.get("/account", &m.secret_key).await.status, 200);
    let actions: Vec<String> = audit(&app, &m.secret_key)
        .await
        .into_iter()
        .map(|(action, actor)| {
            assert_eq!(actor, Value::Null, "the operator acted");
            action
        })
        .collect();
    assert_eq!(actions, ["merchant.suspended", "merchant.reinstated"]);

    let missing = app
        .post(
            "/admin/merchants/mer_0000000000000000/suspend",
            ADMIN_KEY,
            json!({}),
        )
        .await;
    assert_eq!(
        (missing.status, missing.param()),
        (404, Some("merchant_id"))
    );
}

#[actix_web::test]
async fn the_operator_revokes_any_key_of_a_merchant() {
    let app = common::spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let other = app.create_merchant("Other").await;
    let bound = app
        .post(
            "/account/api-keys",
            &m.secret_key,
            json!({"kind": "secret", "profile_id": m.profile_id}),
        )
        .await;
    assert_eq!(bound.status, 201, "{}", bound.body);
    let (key_id, key) = (text(&bound.body, "key_id"), text(&bound.body, "key"));
    assert_eq!(app.get("/account", &key).await.status, 200);

    // Named under another merchant, the key is not found.
    let elsewhere = format!("/admin/merchants/{}/api-keys/{key_id}", other.merchant_id);
    assert_eq!(app.delete(&elsewhere, ADMIN_KEY).await.status, 404);
    let path = format!("/admin/merchants/{}/api-keys/{key_id}", m.merchant_id);
    let revoked = app.delete(&path, ADMIN_KEY).await;
    assert_eq!(revoked.status, 200, "{}", revoked.body);
    assert!(revoked.body["revoked_at"].is_string(), "{}", revoked.body);
    let refused = app.get("/account", &key).await;
    assert_eq!((refused.status, refused.code()), (401, "api_key_revoked"));
    assert_eq!(app.get("/account", &m.secret_key).await.status, 200);
    let log = audit(&app, &m.secret_key).await;
    assert_eq!(
        log.last(),
        Some(&("api_key.revoked".to_owned(), Value::Null))
    );
}

/// The keys each pepper serves, as `GET /admin/key-peppers` counts them: `(state, keys)`.
async fn peppers(app: &TestApp) -> Vec<(String, i64)> {
    let res = app.get("/admin/key-peppers", ADMIN_KEY).await;
    assert_eq!(res.status, 200, "{}", res.body);
    let mut counts: Vec<(String, i64)> = res.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (text(p, "state"), p["keys"].as_i64().unwrap()))
        .collect();
    counts.sort();
    counts
}

const OLD_PEPPER: &str = "the-old-pepper-0123456789";
const NEW_PEPPER: &str = "the-new-pepper-0123456789";

/// A pepper rotation's overlap, from a key made before payd recorded peppers to the end of
/// the old pepper: the old keys work while it is a previous pepper, new keys are made under the
/// new one, and each pepper's keys are counted.
#[actix_web::test]
async fn the_key_pepper_is_rotated_with_an_overlap() {
    let db = Arc::new(TestDb::new().await);
    let old = [("PAYD_SECURITY__KEY_PEPPER", OLD_PEPPER)];
    let app = spawn_with(db.clone(), &old).await;
    let m = app.create_merchant("Acme").await;
    assert_eq!(peppers(&app).await, [("current".to_owned(), 2)]);
    // As a release before 0.2.0 left them.
    let conn = payd::db::connect(&db.url, Some(1)).await.unwrap();
    use sea_orm::ConnectionTrait;
    conn.execute_unprepared("UPDATE api_keys SET pepper_id = NULL")
        .await
        .unwrap();

    let rotating = [
        ("PAYD_SECURITY__KEY_PEPPER", NEW_PEPPER),
        ("PAYD_SECURITY__PREVIOUS_KEY_PEPPERS", OLD_PEPPER),
    ];
    let app = spawn_with(db.clone(), &rotating).await;
    assert_eq!(peppers(&app).await, [("unrecorded".to_owned(), 2)]);
    assert_eq!(app.get("/account", &m.secret_key).await.status, 200);
    let made = app
        .post(
            "/account/api-keys",
            &m.secret_key,
            json!({"kind": "secret"}),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.body);
    let new_key = text(&made.body, "key");
    assert_eq!(app.get("/account", &new_key).await.status, 200);
    assert_eq!(
        peppers(&app).await,
        [("current".to_owned(), 1), ("unrecorded".to_owned(), 2)]
    );

    // Started with the old pepper alone, payd records it on the keys it serves.
    let back = spawn_with(db.clone(), &old).await;
    assert_eq!(
        peppers(&back).await,
        [("current".to_owned(), 2), ("unknown".to_owned(), 1)]
    );
    let app = spawn_with(db.clone(), &rotating).await;
    assert_eq!(
        peppers(&app).await,
        [("current".to_owned(), 1), ("previous".to_owned(), 2)]
    );

    // The overlap ends: keys under the old pepper are refused, the new one goes on.
    let done = spawn_with(db, &rotating[..1]).await;
    let refused = done.get("/account", &m.secret_key).await;
    assert_eq!((refused.status, refused.code()), (401, "invalid_api_key"));
    assert_eq!(done.get("/account", &new_key).await.status, 200);
}

#[actix_web::test]
async fn the_admin_key_is_rotated_with_an_overlap() {
    let db = Arc::new(TestDb::new().await);
    let new = "the-new-admin-key-0123";
    let app = spawn_with(
        db,
        &[
            ("PAYD_ADMIN_KEY", new),
            ("PAYD_PREVIOUS_ADMIN_KEYS", ADMIN_KEY),
        ],
    )
    .await;
    let ask = |key: &'static str| app.get("/admin/merchants", key);
    let answers: Vec<u16> = vec![
        ask(new).await.status,
        ask(ADMIN_KEY).await.status,
        ask("not-an-admin-key").await.status,
    ];
    assert_eq!(answers, [200, 200, 401]);
    // The operator sees when the old key is still in use.
    let scrape = app.send(Method::GET, "/metrics", None, None, &[]).await;
    let text = String::from_utf8_lossy(&scrape.raw);
    let uses: f64 = text
        .lines()
        .find_map(|l| l.strip_prefix("payd_admin_previous_key_uses_total "))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no payd_admin_previous_key_uses_total in {text}"));
    assert!(uses >= 1.0, "{uses}");
}

#[test]
fn a_previous_admin_key_needs_a_current_one() {
    let err = payd::settings::Settings::load_from(vec![(
        "PAYD_PREVIOUS_ADMIN_KEYS".to_owned(),
        "an-old-admin-key".to_owned(),
    )])
    .unwrap_err()
    .to_string();
    assert!(err.contains("previous_admin_keys"), "{err}");
}

//! Merchants, shops and API keys through the HTTP API.

use crate::common;

use std::sync::Arc;

use common::{spawn_app, spawn_with, TestDb, ADMIN_KEY};
use serde_json::json;

#[actix_web::test]
async fn admin_creates_a_merchant_with_a_shop_and_keys() {
    let app = spawn_app().await;
    let res = app
        .post("/admin/merchants", ADMIN_KEY, json!({"name": "Acme"}))
        .await;
    assert_eq!(res.status, 201, "{:?}", res.body);
    let b = &res.body;
    assert!(b["merchant_id"].as_str().unwrap().starts_with("mer_"));
    assert!(b["profile_id"].as_str().unwrap().starts_with("prof_"));
    assert!(b["secret_key"].as_str().unwrap().starts_with("snd_"));
    assert!(b["publishable_key"]
        .as_str()
        .unwrap()
        .starts_with("pk_snd_"));
    assert_eq!(b["test_mode"], true);

    let account = app.get("/account", b["secret_key"].as_str().unwrap()).await;
    assert_eq!(account.status, 200);
    assert_eq!(account.body["merchant_id"], b["merchant_id"]);
    assert_eq!(account.body["name"], "Acme");
    assert_eq!(account.body["test_mode"], true);
}

/// The operator's list of merchants: newest first, paged, the admin key only.
#[actix_web::test]
async fn admin_lists_merchants_newest_first_by_page() {
    let app = spawn_app().await;
    let mut made = Vec::new();
    for name in ["First", "Second", "Third"] {
        made.push(app.create_merchant(name).await);
    }
    let first = app.get("/admin/merchants?limit=2", ADMIN_KEY).await;
    assert_eq!(first.status, 200, "{}", first.body);
    let names: Vec<&str> = first.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["Third", "Second"]);
    assert_eq!(first.body["has_more"], true);
    assert_eq!(
        first.body["data"][0]["merchant_id"],
        made[2].merchant_id.as_str()
    );
    assert!(first.body["data"][0]["created"].is_string());
    let last = first.body["data"][1]["merchant_id"].as_str().unwrap();
    let rest = app
        .get(
            &format!("/admin/merchants?limit=2&starting_after={last}"),
            ADMIN_KEY,
        )
        .await;
    assert_eq!(
        rest.body["data"].as_array().unwrap().len(),
        1,
        "{}",
        rest.body
    );
    assert_eq!(
        rest.body["data"][0]["merchant_id"],
        made[0].merchant_id.as_str()
    );
    assert_eq!(rest.body["has_more"], false);
    for key in ["wrong-admin-key", made[0].secret_key.as_str()] {
        let res = app.get("/admin/merchants", key).await;
        assert_eq!((res.status, res.code()), (401, "invalid_api_key"));
    }
}

#[actix_web::test]
async fn admin_route_refuses_wrong_keys_and_production_in_a_sandbox() {
    let app = spawn_app().await;
    let merchant = app.create_merchant("Acme").await;
    for key in ["wrong-admin-key", merchant.secret_key.as_str()] {
        let res = app
            .post("/admin/merchants", key, json!({"name": "Evil"}))
            .await;
        assert_eq!((res.status, res.code()), (401, "invalid_api_key"));
    }
    let res = app
        .post(
            "/admin/merchants",
            ADMIN_KEY,
            json!({"name": "Live", "mode": "production"}),
        )
        .await;
    assert_eq!(
        (res.status, res.code(), res.param()),
        (403, "production_disabled", Some("mode"))
    );
    let res = app
        .post("/admin/merchants", ADMIN_KEY, json!({"name": "  "}))
        .await;
    assert_eq!((res.status, res.param()), (400, Some("name")));
    let res = app
        .post(
            "/admin/merchants",
            ADMIN_KEY,
            json!({"name": "X", "mode": "staging"}),
        )
        .await;
    assert_eq!((res.status, res.param()), (400, Some("mode")));
}

#[actix_web::test]
async fn admin_route_is_disabled_without_an_admin_key() {
    let db = Arc::new(TestDb::new().await);
    let app = spawn_with(db, &[("PAYD_ADMIN_KEY", "")]).await;
    let res = app
        .post("/admin/merchants", ADMIN_KEY, json!({"name": "Acme"}))
        .await;
    assert_eq!((res.status, res.code()), (401, "admin_disabled"));
}

#[actix_web::test]
async fn keys_are_checked_revocable_and_shown_once() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;

    let res = app.get("/account", &m.publishable_key).await;
    assert_eq!((res.status, res.code()), (403, "secret_key_required"));
    let res = app
        .get("/account", "snd_0000000000000000000000000000000000000000")
        .await;
    assert_eq!((res.status, res.code()), (401, "invalid_api_key"));
    let res = app.get("/account", "not-a-key").await;
    assert_eq!((res.status, res.code()), (401, "invalid_api_key"));

    let created = app
        .post(
            "/account/api-keys",
            &m.secret_key,
            json!({"kind": "secret", "name": "ci"}),
        )
        .await;
    assert_eq!(created.status, 201, "{:?}", created.body);
    let new_key = created.body["key"].as_str().unwrap().to_owned();
    let key_id = created.body["key_id"].as_str().unwrap().to_owned();
    assert!(new_key.starts_with("snd_"));
    assert_eq!(created.body["last4"], new_key[new_key.len() - 4..]);
    assert_eq!(app.get("/account", &new_key).await.status, 200);

    let list = app.get("/account/api-keys", &m.secret_key).await;
    assert_eq!(list.status, 200);
    assert_eq!(list.body["data"].as_array().unwrap().len(), 3);
    let text = String::from_utf8_lossy(&list.raw);
    assert!(
        !text.contains(&new_key) && !text.contains(&m.secret_key),
        "keys never listed"
    );

    let revoked = app
        .delete(&format!("/account/api-keys/{key_id}"), &m.secret_key)
        .await;
    assert_eq!(revoked.status, 200);
    assert!(revoked.body["revoked_at"].is_string());
    let res = app.get("/account", &new_key).await;
    assert_eq!((res.status, res.code()), (401, "api_key_revoked"));

    // Another merchant cannot see or revoke these keys.
    let other = app.create_merchant("Other").await;
    let res = app
        .delete(&format!("/account/api-keys/{key_id}"), &other.secret_key)
        .await;
    assert_eq!((res.status, res.code()), (404, "resource_missing"));
    let res = app
        .delete("/account/api-keys/key_nonsense", &other.secret_key)
        .await;
    assert_eq!(res.status, 404);
}

#[actix_web::test]
async fn shops_are_listed_with_cursors() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let mut ids = vec![m.profile_id.clone()];
    for i in 0..11 {
        let res = app
            .post(
                "/account/shops",
                &m.secret_key,
                json!({"name": format!("Shop {i}")}),
            )
            .await;
        assert_eq!(res.status, 201);
        ids.push(res.body["profile_id"].as_str().unwrap().to_owned());
    }
    ids.reverse(); // newest first
    let page = |res: &common::Answer| -> Vec<String> {
        res.body["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["profile_id"].as_str().unwrap().to_owned())
            .collect()
    };
    let first = app.get("/account/shops?limit=5", &m.secret_key).await;
    assert_eq!(page(&first), ids[0..5]);
    assert_eq!(first.body["has_more"], true);
    let second = app
        .get(
            &format!("/account/shops?limit=5&starting_after={}", ids[4]),
            &m.secret_key,
        )
        .await;
    assert_eq!(page(&second), ids[5..10]);
    let last = app
        .get(
            &format!("/account/shops?limit=5&starting_after={}", ids[9]),
            &m.secret_key,
        )
        .await;
    assert_eq!(page(&last), ids[10..12]);
    assert_eq!(last.body["has_more"], false);
    let back = app
        .get(
            &format!("/account/shops?limit=3&ending_before={}", ids[5]),
            &m.secret_key,
        )
        .await;
    assert_eq!(page(&back), ids[2..5]);
    assert_eq!(back.body["has_more"], true);
    let default = app.get("/account/shops", &m.secret_key).await;
    assert_eq!(page(&default).len(), 10);

    for bad in [
        "limit=0",
        "limit=101",
        "limit=abc",
        "starting_after=a&ending_before=b",
    ] {
        let res = app
            .get(&format!("/account/shops?{bad}"), &m.secret_key)
            .await;
        assert_eq!(res.status, 400, "{bad}");
        assert!(res.param().is_some(), "{bad}: {:?}", res.body);
    }

    // Another merchant sees only its own shop.
    let other = app.create_merchant("Other").await;
    let res = app.get("/account/shops", &other.secret_key).await;
    assert_eq!(page(&res), vec![other.profile_id]);
}

#[actix_web::test]
async fn shop_selection_and_shop_bound_keys() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let other = app.create_merchant("Other").await;
    let shop2 = app
        .post("/account/shops", &m.secret_key, json!({"name": "Second"}))
        .await
        .body["profile_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let with_shop = |shop: &str| [("x-profile-id", shop.to_owned())];
    let get_scoped = |key: String, shop: String| {
        let app = &app;
        async move {
            app.send(
                actix_web::http::Method::GET,
                "/account",
                Some(&key),
                None,
                &with_shop(&shop)
                    .iter()
                    .map(|(k, v)| (*k, v.as_str()))
                    .collect::<Vec<_>>(),
            )
            .await
        }
    };
    let res = get_scoped(m.secret_key.clone(), shop2.clone()).await;
    assert_eq!(res.body["profile_id"], shop2);
    // Another merchant's shop, also once its owner has named it (the service then knows the
    // shop exists, and whose it is).
    let res = get_scoped(m.secret_key.clone(), other.profile_id.clone()).await;
    assert_eq!((res.status, res.param()), (404, Some("x-profile-id")));
    let res = get_scoped(other.secret_key.clone(), other.profile_id.clone()).await;
    assert_eq!(res.status, 200, "{:?}", res.body);
    let res = get_scoped(m.secret_key.clone(), other.profile_id.clone()).await;
    assert_eq!((res.status, res.param()), (404, Some("x-profile-id")));
    let res = get_scoped(m.secret_key.clone(), "prof_garbage".into()).await;
    assert_eq!((res.status, res.param()), (404, Some("x-profile-id")));

    // A key bound to shop 2.
    let bound = app
        .post(
            "/account/api-keys",
            &m.secret_key,
            json!({"kind": "secret", "profile_id": shop2}),
        )
        .await;
    assert_eq!(bound.status, 201, "{:?}", bound.body);
    assert_eq!(bound.body["profile_id"], shop2);
    let bound_key = bound.body["key"].as_str().unwrap().to_owned();
    let res = app.get("/account", &bound_key).await;
    assert_eq!(
        res.body["profile_id"], shop2,
        "the bound shop is selected by default"
    );
    let res = get_scoped(bound_key.clone(), m.profile_id.clone()).await;
    assert_eq!((res.status, res.code()), (403, "profile_mismatch"));
    let res = app
        .post("/account/shops", &bound_key, json!({"name": "Third"}))
        .await;
    assert_eq!((res.status, res.code()), (403, "shop_bound_key"));
    let res = app.get("/account/shops", &bound_key).await;
    assert_eq!(res.body["data"].as_array().unwrap().len(), 1);
    let res = app
        .post(
            "/account/api-keys",
            &bound_key,
            json!({"kind": "publishable", "profile_id": m.profile_id}),
        )
        .await;
    assert_eq!((res.status, res.code()), (403, "profile_mismatch"));
    let res = app
        .post(
            "/account/api-keys",
            &bound_key,
            json!({"kind": "publishable"}),
        )
        .await;
    assert_eq!(
        res.body["profile_id"], shop2,
        "a bound key mints keys bound to its shop"
    );
    // Keys of another merchant's shop cannot be made.
    let res = app
        .post(
            "/account/api-keys",
            &m.secret_key,
            json!({"kind": "secret", "profile_id": other.profile_id}),
        )
        .await;
    assert_eq!((res.status, res.param()), (404, Some("profile_id")));
}

/// A production-mode instance, and the admin route's answer for a merchant with live keys.
async fn production_with_live_merchant() -> (common::TestApp, common::Answer) {
    let db = Arc::new(TestDb::new().await);
    let app = spawn_with(db, common::PRODUCTION).await;
    let live = app
        .post(
            "/admin/merchants",
            ADMIN_KEY,
            json!({"name": "Acme", "mode": "production"}),
        )
        .await;
    assert_eq!(live.status, 201, "{:?}", live.body);
    (app, live)
}

#[actix_web::test]
async fn live_and_test_keys_never_see_each_other() {
    let (app, live) = production_with_live_merchant().await;
    let live_key = live.body["secret_key"].as_str().unwrap().to_owned();
    assert!(live_key.starts_with("prd_"));
    assert!(live.body["publishable_key"]
        .as_str()
        .unwrap()
        .starts_with("pk_prd_"));
    assert_eq!(live.body["test_mode"], false);

    let res = app.get("/account", &live_key).await;
    assert_eq!(res.body["test_mode"], false);

    // The live key makes a sandbox key for the same merchant.
    let test = app
        .post(
            "/account/api-keys",
            &live_key,
            json!({"kind": "secret", "test_mode": true}),
        )
        .await;
    assert_eq!(test.status, 201, "{:?}", test.body);
    let test_key = test.body["key"].as_str().unwrap().to_owned();
    assert!(test_key.starts_with("snd_"));
    let res = app.get("/account", &test_key).await;
    assert_eq!(res.body["merchant_id"], live.body["merchant_id"]);
    assert_eq!(res.body["test_mode"], true);

    // Each mode lists only its own keys and cannot touch the other's.
    let modes = |res: &common::Answer| -> Vec<bool> {
        res.body["data"]
            .as_array()
            .unwrap()
            .iter()
            .map(|k| k["test_mode"].as_bool().unwrap())
            .collect()
    };
    let live_list = app.get("/account/api-keys", &live_key).await;
    assert_eq!(modes(&live_list), vec![false, false]);
    let test_list = app.get("/account/api-keys", &test_key).await;
    assert_eq!(modes(&test_list), vec![true]);
    let live_key_id = live_list.body["data"][0]["key_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let res = app
        .delete(&format!("/account/api-keys/{live_key_id}"), &test_key)
        .await;
    assert_eq!(res.status, 404);
    let res = app
        .post(
            "/account/api-keys",
            &test_key,
            json!({"kind": "secret", "test_mode": false}),
        )
        .await;
    assert_eq!((res.status, res.code()), (403, "live_key_from_test_key"));
}

/// Live payments never reach the sandbox: no implicit sandbox processor, no sandbox account
/// for a live key, and a sandbox account a test key added is not used for live payments.
#[actix_web::test]
async fn live_payments_never_reach_the_sandbox() {
    let (app, live) = production_with_live_merchant().await;
    let m = common::Merchant {
        merchant_id: live.body["merchant_id"].as_str().unwrap().to_owned(),
        profile_id: live.body["profile_id"].as_str().unwrap().to_owned(),
        secret_key: live.body["secret_key"].as_str().unwrap().to_owned(),
        publishable_key: live.body["publishable_key"].as_str().unwrap().to_owned(),
    };
    let processors = format!("/account/shops/{}/processors", m.profile_id);
    for body in [
        json!({"name": "sb", "kind": "sandbox"}),
        json!({"name": "sb"}),
    ] {
        let r = app
            .call(&m, actix_web::http::Method::POST, &processors, Some(body))
            .await;
        assert_eq!((r.status, r.param()), (400, Some("kind")), "{:?}", r.body);
    }
    // A test key of the same merchant adds a sandbox account to the shop: test payments only.
    let test = app
        .post(
            "/account/api-keys",
            &m.secret_key,
            json!({"kind": "secret", "test_mode": true}),
        )
        .await;
    let test_m = common::Merchant {
        secret_key: test.body["key"].as_str().unwrap().to_owned(),
        ..m.clone()
    };
    let r = app
        .call(
            &test_m,
            actix_web::http::Method::POST,
            &processors,
            Some(json!({"name": "sb", "kind": "sandbox"})),
        )
        .await;
    assert_eq!(r.status, 201, "{:?}", r.body);
    let pay = json!({"amount": 500, "currency": "EUR", "confirm": true,
        "payment_method_data": common::card("4242424242424242")});
    let p = app.create_payment(&m, pay.clone()).await;
    assert_eq!(p.status, 201, "{:?}", p.body);
    assert_eq!(p.body["test_mode"], false);
    assert_eq!(p.body["status"], "failed", "{:?}", p.body);
    assert_eq!(p.body["last_error"]["code"], "no_processor");
    let t = app.create_payment(&test_m, pay).await;
    assert_eq!(
        (t.body["status"].as_str(), t.body["test_mode"].as_bool()),
        (Some("succeeded"), Some(true))
    );
}

#[actix_web::test]
async fn keys_and_shops_are_bounded_per_merchant() {
    let db = Arc::new(TestDb::new().await);
    let app = spawn_with(
        db,
        &[
            ("PAYD_LIMITS__MAX_API_KEYS_PER_MERCHANT", "3"),
            ("PAYD_LIMITS__MAX_SHOPS_PER_MERCHANT", "2"),
        ],
    )
    .await;
    let m = app.create_merchant("Acme").await;
    let other = app.create_merchant("Other").await;
    // The merchant starts with two keys (secret and publishable) and one shop.
    let third = app
        .post(
            "/account/api-keys",
            &m.secret_key,
            json!({"kind": "secret"}),
        )
        .await;
    assert_eq!(third.status, 201);
    let fourth = app
        .post(
            "/account/api-keys",
            &m.secret_key,
            json!({"kind": "secret"}),
        )
        .await;
    assert_eq!((fourth.status, fourth.code()), (409, "limit_reached"));
    let message = fourth.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("limits.max_api_keys_per_merchant"),
        "{message}"
    );
    // A revoked key no longer counts.
    let revoked = app
        .delete(
            &format!(
                "/account/api-keys/{}",
                third.body["key_id"].as_str().unwrap()
            ),
            &m.secret_key,
        )
        .await;
    assert_eq!(revoked.status, 200, "{}", revoked.body);
    let again = app
        .post(
            "/account/api-keys",
            &m.secret_key,
            json!({"kind": "secret"}),
        )
        .await;
    assert_eq!(again.status, 201);

    let shop = app
        .post("/account/shops", &m.secret_key, json!({"name": "Paris"}))
        .await;
    assert_eq!(shop.status, 201);
    let too_many = app
        .post("/account/shops", &m.secret_key, json!({"name": "Rome"}))
        .await;
    assert_eq!((too_many.status, too_many.code()), (409, "limit_reached"));
    let message = too_many.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("limits.max_shops_per_merchant"),
        "{message}"
    );

    // Another merchant's bounds are its own.
    let theirs = app
        .post("/account/shops", &other.secret_key, json!({"name": "Oslo"}))
        .await;
    assert_eq!(theirs.status, 201);
}

/// Each security action of an account is in its audit log, with the key that acted, newest
/// first, never with a secret; another merchant's log shows none of it; a shop-bound key may
/// not read the account-wide log.
#[actix_web::test]
async fn the_audit_log_records_each_security_action_for_its_merchant_only() {
    use actix_web::http::Method;
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let other = app.create_merchant("Other").await;
    let me = app.get("/account/api-keys", &m.secret_key).await.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|k| k["kind"] == "secret")
        .map(|k| k["key_id"].as_str().unwrap().to_owned())
        .unwrap();
    let created = app
        .post(
            "/account/api-keys",
            &m.secret_key,
            json!({"kind": "secret"}),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let new_key = created.body["key_id"].as_str().unwrap().to_owned();
    let path = format!("/account/api-keys/{new_key}");
    for _ in 0..2 {
        let revoked = app.call(&m, Method::DELETE, &path, None).await;
        assert_eq!(revoked.status, 200, "{}", revoked.body);
    }
    let webhook = format!("/account/shops/{}/webhook", m.profile_id);
    for url in ["https://hooks.example.com/a", "https://hooks.example.com/b"] {
        let r = app
            .call(&m, Method::PUT, &webhook, Some(json!({"url": url})))
            .await;
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let paused = app
        .call(
            &m,
            Method::PUT,
            &webhook,
            Some(json!({"url": "https://hooks.example.com/b", "enabled": false})),
        )
        .await;
    assert_eq!(paused.status, 200);
    let rotated = app
        .call(&m, Method::POST, &format!("{webhook}/rotate"), None)
        .await;
    assert_eq!(rotated.status, 200, "{}", rotated.body);
    let processors = format!("/account/shops/{}/processors", m.profile_id);
    for _ in 0..2 {
        app.call(
            &m,
            Method::POST,
            &processors,
            Some(json!({"name": "backup"})),
        )
        .await;
    }
    app.post(
        "/account/api-keys",
        &other.secret_key,
        json!({"kind": "secret"}),
    )
    .await;

    let log = app.get("/account/audit-log", &m.secret_key).await;
    assert_eq!(log.status, 200, "{}", log.body);
    let entries = log.body["data"].as_array().unwrap();
    let actions: Vec<&str> = entries
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(
        actions,
        [
            "processor_account.added",
            "webhook_endpoint.secret_rotated",
            "webhook_endpoint.url_changed",
            "webhook_endpoint.url_changed",
            "api_key.revoked",
            "api_key.created",
        ],
        "{}",
        log.body
    );
    assert!(entries.iter().all(|e| e["actor_key_id"] == me.as_str()));
    assert_eq!(entries[4]["target_id"], new_key.as_str());
    assert_eq!(entries[2]["details"]["url"], "https://hooks.example.com/b");
    assert_eq!(entries[3]["details"]["url"], "https://hooks.example.com/a");
    let raw = String::from_utf8_lossy(&log.raw);
    assert!(!raw.contains("whsec_") && !raw.contains("snd_"), "{raw}");

    let theirs = app.get("/account/audit-log", &other.secret_key).await;
    let actions: Vec<&str> = theirs.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["action"].as_str().unwrap())
        .collect();
    assert_eq!(actions, ["api_key.created"]);

    let bound = app
        .post(
            "/account/api-keys",
            &m.secret_key,
            json!({"kind": "secret", "profile_id": m.profile_id}),
        )
        .await;
    let bound_key = bound.body["key"].as_str().unwrap();
    let refused = app.get("/account/audit-log", bound_key).await;
    assert_eq!(
        (refused.status, refused.body["error"]["code"].as_str()),
        (403, Some("unbound_key_required"))
    );
}

/// Every per-merchant bound holds under concurrency, on both databases: three times the room
/// left is sent at once, and exactly the room is taken (the count is made inside the commit
/// that adds the row, under a lock on the merchant's or the shop's row).
#[actix_web::test]
async fn bounds_hold_when_three_times_the_room_arrives_at_once() {
    use actix_web::http::Method;
    use futures_util::future::join_all;
    let app = spawn_with(
        Arc::new(TestDb::new().await),
        &[
            ("PAYD_LIMITS__MAX_API_KEYS_PER_MERCHANT", "6"),
            ("PAYD_LIMITS__MAX_SHOPS_PER_MERCHANT", "5"),
            ("PAYD_LIMITS__MAX_FILES_PER_MERCHANT", "4"),
            ("PAYD_LIMITS__MAX_FILE_BYTES_PER_MERCHANT", "1000"),
            ("PAYD_LIMITS__MAX_PRODUCTS_PER_SHOP", "3"),
        ],
    )
    .await;
    let tally = |answers: Vec<common::Answer>, bound: &str| {
        let mut made = 0;
        for a in &answers {
            match a.status {
                201 => made += 1,
                409 => {
                    assert_eq!(a.code(), "limit_reached", "{}", a.body);
                    assert!(
                        a.body["error"]["message"].as_str().unwrap().contains(bound),
                        "{}",
                        a.body
                    );
                }
                other => panic!("{bound}: {other} {}", a.body),
            }
        }
        made
    };

    // Keys: two exist, room for four; twelve asked.
    let m = app.create_merchant("Keys").await;
    let asks = (0..12).map(|_| {
        app.post(
            "/account/api-keys",
            &m.secret_key,
            json!({"kind": "secret"}),
        )
    });
    assert_eq!(
        tally(join_all(asks).await, "limits.max_api_keys_per_merchant"),
        4
    );

    // Shops: one exists, room for four; twelve asked.
    let asks = (0..12).map(|i| {
        app.post(
            "/account/shops",
            &m.secret_key,
            json!({"name": format!("Shop {i}")}),
        )
    });
    assert_eq!(
        tally(join_all(asks).await, "limits.max_shops_per_merchant"),
        4
    );

    // Files: room for four; twelve sent.
    let m = app.create_merchant("Files").await;
    let names: Vec<String> = (0..12).map(|i| format!("f{i}.txt")).collect();
    let asks = names.iter().map(|name| app.upload(&m, name, b"hello"));
    assert_eq!(
        tally(join_all(asks).await, "limits.max_files_per_merchant"),
        4
    );

    // Bytes: room for three files of 300 bytes in 1 000; nine sent.
    let m = app.create_merchant("Bytes").await;
    let bytes = [b'a'; 300];
    let names: Vec<String> = (0..9).map(|i| format!("b{i}.txt")).collect();
    let asks = names.iter().map(|name| app.upload(&m, name, &bytes));
    assert_eq!(
        tally(join_all(asks).await, "limits.max_file_bytes_per_merchant"),
        3
    );

    // Products of one shop: room for three; nine asked.
    let asks = (0..9).map(|i| {
        app.call(
            &m,
            Method::POST,
            "/products",
            Some(json!({"name": format!("Mug {i}"),
            "prices": [{"unit_amount": 500, "currency": "EUR"}]})),
        )
    });
    assert_eq!(
        tally(join_all(asks).await, "limits.max_products_per_shop"),
        3
    );
}

const PNG: &[u8] =
    b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89";

/// A shop's branding: set, checked field by field, audited, and shown to buyers on the hosted
/// checkout (the name they see, the logo served for the page, the accent colour).
#[actix_web::test]
async fn a_shop_is_branded_for_its_buyers() {
    use actix_web::http::Method;

    let app = spawn_app().await;
    let m = app.create_merchant("Acme Holding GmbH").await;
    let shop = format!("/account/shops/{}", m.profile_id);
    let logo = app.upload(&m, "logo.png", PNG).await;
    assert_eq!(logo.status, 201, "{}", logo.body);
    let logo_id = logo.body["file_id"].as_str().expect("file_id").to_owned();
    let pdf = app.upload(&m, "terms.pdf", b"%PDF-1.4\nterms\n").await;
    let pdf_id = pdf.body["file_id"].as_str().expect("file_id").to_owned();
    let other = app.create_merchant("Someone else").await;
    let theirs = app.upload(&other, "logo.png", PNG).await.body["file_id"].clone();
    let put = |body: serde_json::Value| {
        let (app, m, shop) = (&app, &m, shop.clone());
        async move { app.call(m, Method::PUT, &shop, Some(body)).await }
    };

    let refused = [
        (
            json!({"branding": {"accent_color": "#ffcc00"}}),
            400,
            "branding.accent_color",
        ),
        (
            json!({"branding": {"accent_color": "blue"}}),
            400,
            "branding.accent_color",
        ),
        (
            json!({"branding": {"display_name": "  "}}),
            400,
            "branding.display_name",
        ),
        (
            json!({"branding": {"logo_file_id": pdf_id}}),
            400,
            "branding.logo_file_id",
        ),
        (
            json!({"branding": {"logo_file_id": theirs}}),
            404,
            "branding.logo_file_id",
        ),
        (
            json!({"branding": {"logo_file_id": "pay_1"}}),
            400,
            "branding.logo_file_id",
        ),
        (
            json!({"branding": {"colour": "#000000"}}),
            400,
            "branding.colour",
        ),
        (json!({"name": ""}), 400, "name"),
    ];
    for (body, status, param) in refused {
        let res = put(body.clone()).await;
        assert_eq!(
            (res.status, res.param()),
            (status, Some(param)),
            "{body}: {}",
            res.body
        );
    }

    let res = put(
        json!({"branding": {"display_name": "Acme Coffee", "logo_file_id": logo_id,
                                      "accent_color": "#7A1F5C"}}),
    )
    .await;
    assert_eq!(res.status, 200, "{}", res.body);
    assert_eq!(res.body["name"], "Default shop", "the name is kept");
    assert_eq!(
        res.body["branding"],
        json!({"display_name": "Acme Coffee", "logo_file_id": logo_id, "accent_color": "#7a1f5c"})
    );
    let shown = app.call(&m, Method::GET, &shop, None).await;
    assert_eq!(shown.body["branding"], res.body["branding"]);
    let audit = app.call(&m, Method::GET, "/account/audit-log", None).await;
    assert!(
        audit.body["data"]
            .as_array()
            .expect("entries")
            .iter()
            .any(|e| e["action"] == "shop.updated" && e["target_id"] == m.profile_id.as_str()),
        "{}",
        audit.body
    );

    let p = app
        .create_payment(
            &m,
            json!({"amount": 500, "currency": "EUR", "hosted_checkout": true}),
        )
        .await;
    let page_path = app
        .path_of(p.body["checkout_url"].as_str().expect("checkout_url"))
        .expect("a URL of this app")
        .to_owned();
    let page = app.send(Method::GET, &page_path, None, None, &[]).await;
    let html = String::from_utf8(page.raw.to_vec()).expect("UTF-8");
    assert!(
        html.contains("<span id=\"shop-name\">Acme Coffee</span>"),
        "{html}"
    );
    assert!(html.contains("alt=\"Acme Coffee\""), "{html}");
    assert!(
        html.contains(r##""accent":{"color":"#7a1f5c","text":"#ffffff"}"##),
        "{html}"
    );
    let (id, secret) = (
        p.body["payment_id"].as_str().expect("id"),
        p.body["client_secret"].as_str().expect("secret"),
    );
    let image = app
        .send(
            Method::GET,
            &format!("/checkout/{id}/logo?client_secret={secret}"),
            None,
            None,
            &[],
        )
        .await;
    assert_eq!(image.status, 200);
    assert_eq!(image.header("content-type"), Some("image/png"));
    assert_eq!(&image.raw[..], PNG);
    let wrong = app
        .send(
            Method::GET,
            &format!("/checkout/{id}/logo?client_secret=nope"),
            None,
            None,
            &[],
        )
        .await;
    assert_eq!(wrong.status, 404);

    // `{}` clears the branding: the shop's own name again, no logo.
    let cleared = put(json!({"branding": {}, "name": "Acme"})).await;
    assert_eq!(cleared.status, 200, "{}", cleared.body);
    let page = app.send(Method::GET, &page_path, None, None, &[]).await;
    let html = String::from_utf8(page.raw.to_vec()).expect("UTF-8");
    assert!(
        html.contains("<span id=\"shop-name\">Acme</span>"),
        "{html}"
    );
    assert!(!html.contains("id=\"logo\""), "{html}");
    let gone = app
        .send(
            Method::GET,
            &format!("/checkout/{id}/logo?client_secret={secret}"),
            None,
            None,
            &[],
        )
        .await;
    assert_eq!(gone.status, 404);
    app.stop().await;
}

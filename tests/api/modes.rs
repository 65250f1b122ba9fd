//! Test and live are two worlds (issue 58): a shop's processor accounts, routing rules,
//! webhook endpoint, invoice settings and tax rules each belong to one mode; a key reads and
//! changes only its own mode's, a payment is served only by its own mode's accounts (in rules
//! and in fallback alike), an event reaches only its own mode's endpoint, and a processor's
//! events act only on what that account served.

use crate::common;

use actix_web::http::Method;
use common::{
    card,
    receiver::Receiver,
    sim::{remote_account, start_sim},
    Merchant, TestApp, ADMIN_KEY,
};
use serde_json::{json, Value};

/// A production instance that lets processors and webhooks reach loopback (the simulator and
/// the receivers), with operator approval on; a merchant's live and sandbox keys.
async fn production() -> (TestApp, Merchant, Merchant) {
    common::production_merchant(&[
        ("PAYD_PROCESSORS__ALLOW_PRIVATE_URLS", "true"),
        ("PAYD_WEBHOOKS__ALLOW_PRIVATE_URLS", "true"),
    ])
    .await
}

/// Adds a processor account to the merchant's shop with its key; the answer.
async fn add(app: &TestApp, m: &Merchant, body: Value) -> common::Answer {
    let path = format!("/account/shops/{}/processors", m.profile_id);
    app.call(m, Method::POST, &path, Some(body)).await
}

/// The accounts a payment's attempts were made at, in order.
async fn tried(app: &TestApp, m: &Merchant, payment: &Value) -> Vec<String> {
    let id = payment["payment_id"].as_str().unwrap();
    let r = app
        .call(m, Method::GET, &format!("/payments/{id}/attempts"), None)
        .await;
    r.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["processor"].as_str().unwrap().to_owned())
        .collect()
}

fn pay_body(number: &str) -> Value {
    json!({"amount": 500, "currency": "EUR", "confirm": true,
        "payment_method_data": card(number)})
}

/// Each shop-configuration route, with two different bodies and how to read back what was
/// put: a key of one mode puts its body, the other mode's key must neither see it nor
/// overwrite it.
#[actix_web::test]
async fn each_key_reads_and_changes_only_its_own_modes_configuration() {
    let (app, live, test) = production().await;
    let shop = live.profile_id.clone();
    let (a, b) = (Receiver::start().await, Receiver::start().await);
    type Read = fn(&Value) -> Value;
    let routes: Vec<(String, Value, Value, Read)> = vec![
        (
            format!("/account/shops/{shop}/webhook"),
            json!({"url": a.url}),
            json!({"url": b.url}),
            |v| v["url"].clone(),
        ),
        (
            "/invoice-settings".into(),
            json!({"footer": "first"}),
            json!({"footer": "second"}),
            |v| v["settings"]["footer"].clone(),
        ),
        (
            format!("/invoice-settings/profiles/{shop}"),
            json!({"number_prefix": "AAA"}),
            json!({"number_prefix": "BBB"}),
            |v| v["settings"]["number_prefix"].clone(),
        ),
        (
            "/invoice-settings/tax-rules".into(),
            json!({"rules": [{"rate_bps": 1900, "country": "DE"}]}),
            json!({"rules": [{"rate_bps": 700, "country": "DE"}]}),
            |v| v["rules"][0]["rate_bps"].clone(),
        ),
        (
            format!("/invoice-settings/profiles/{shop}/tax-rules"),
            json!({"rules": [{"rate_bps": 2000, "country": "FR"}]}),
            json!({"rules": [{"rate_bps": 550, "country": "FR"}]}),
            |v| v["rules"][0]["rate_bps"].clone(),
        ),
    ];
    // The sandbox key puts first, then the live key: each direction is checked once.
    let (first, second) = (&test, &live);
    for (path, one, two, read) in &routes {
        let r = app.call(first, Method::PUT, path, Some(one.clone())).await;
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        let put_first = read(&r.body);
        assert!(!put_first.is_null(), "{path}: {}", r.body);
        // The other mode has its own: unset until its key puts it.
        let other = app.call(second, Method::GET, path, None).await;
        assert!(
            other.status == 404 || read(&other.body) != put_first,
            "{path}: the live key reads what the sandbox key put: {}",
            other.body
        );
        let r = app.call(second, Method::PUT, path, Some(two.clone())).await;
        assert_eq!(r.status, 200, "{path}: {}", r.body);
        let put_second = read(&r.body);
        assert_ne!(put_first, put_second, "{path}");
        let mine = app.call(first, Method::GET, path, None).await;
        assert_eq!(
            read(&mine.body),
            put_first,
            "{path}: the live key changed it"
        );
        let theirs = app.call(second, Method::GET, path, None).await;
        assert_eq!(read(&theirs.body), put_second, "{path}");
    }
    // Rotating one mode's webhook secret leaves the other's endpoint as it was.
    let path = format!("/account/shops/{shop}/webhook");
    let before = app.call(&live, Method::GET, &path, None).await.body;
    let r = app
        .call(&test, Method::POST, &format!("{path}/rotate"), None)
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_ne!(r.body["endpoint_id"], before["endpoint_id"]);
    let after = app.call(&live, Method::GET, &path, None).await.body;
    assert_eq!(before, after, "a sandbox key rotated the live endpoint");
    // Deleting one mode's shop tax rules leaves the other's.
    let path = format!("/invoice-settings/profiles/{shop}/tax-rules");
    let r = app.call(&test, Method::DELETE, &path, None).await;
    assert_eq!(
        (r.status, &r.body["rules"]),
        (200, &json!([])),
        "{}",
        r.body
    );
    let r = app.call(&live, Method::GET, &path, None).await;
    assert_eq!(r.body["rules"][0]["rate_bps"], 550, "{}", r.body);
    a.stop().await;
    b.stop().await;
}

/// Processor accounts and routing rules: each key sees and routes among its own mode's
/// accounts; a rule naming the other mode's account is 400; `sandbox` is reserved.
#[actix_web::test]
async fn processor_accounts_and_routing_rules_belong_to_one_mode() {
    let (app, live, test) = production().await;
    let (_sim, url) = start_sim().await;
    let r = add(&app, &test, json!({"name": "test-sb", "kind": "sandbox"})).await;
    assert_eq!(
        (r.status, r.body["test_mode"].as_bool()),
        (201, Some(true)),
        "{}",
        r.body
    );
    let r = add(&app, &live, remote_account(&url, 2000)).await;
    assert_eq!(
        (r.status, r.body["test_mode"].as_bool()),
        (201, Some(false)),
        "{}",
        r.body
    );
    let path = format!("/account/shops/{}/processors", live.profile_id);
    let names = |m: &Merchant| {
        let (app, path) = (&app, &path);
        let m = m.clone();
        async move {
            let r = app.call(&m, Method::GET, path, None).await;
            r.body["data"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a["name"].as_str().unwrap().to_owned())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(names(&live).await, ["acme-pay"]);
    assert_eq!(names(&test).await, ["test-sb"]);
    for m in [&live, &test] {
        for name in ["sandbox", "Sandbox"] {
            let r = add(&app, m, json!({"name": name, "kind": "sandbox"})).await;
            assert_eq!((r.status, r.param()), (400, Some("name")), "{}", r.body);
        }
    }
    let routing = format!("/account/shops/{}/routing", live.profile_id);
    let rule = |processor: &str| json!({"rules": [{"name": "all", "processors": [{"processor": processor}]}]});
    for (m, foreign) in [(&test, "acme-pay"), (&live, "test-sb")] {
        let r = app
            .call(m, Method::PUT, &routing, Some(rule(foreign)))
            .await;
        assert_eq!(
            (r.status, r.param()),
            (400, Some("rules[0].processors[0].processor")),
            "{}",
            r.body
        );
    }
    let r = app
        .call(&test, Method::PUT, &routing, Some(rule("test-sb")))
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = app.call(&live, Method::GET, &routing, None).await;
    assert_eq!(
        r.body["rules"],
        json!([]),
        "the live rules are the live key's"
    );
}

/// A live payment is served only by live accounts and a test payment only by test ones, when
/// the other mode's account comes first, and in fallback after a retryable decline. Both
/// accounts are remote (the kind that may serve live payments): only their modes differ.
#[actix_web::test]
async fn payments_route_and_fall_back_only_within_their_mode() {
    let (app, live, test) = production().await;
    let (test_sim, test_url) = start_sim().await;
    let (live_sim, live_url) = start_sim().await;
    // The test account first, then the live one; each pending until the operator approves it.
    let mut test_account = remote_account(&test_url, 2000);
    test_account["name"] = json!("test-pay");
    for (m, body) in [
        (&test, test_account),
        (&live, remote_account(&live_url, 2000)),
    ] {
        let r = add(&app, m, body).await;
        assert_eq!(r.body["approval"], "pending", "{}", r.body);
        app.approve_processor(r.body["processor_account_id"].as_str().unwrap())
            .await;
    }
    let authorized = |sim: &payd::processors::sim::Sim| {
        sim.authorizations.load(std::sync::atomic::Ordering::SeqCst)
    };

    let p = app
        .create_payment(&live, pay_body("4242424242424242"))
        .await;
    assert_eq!(
        (p.body["status"].as_str(), p.body["test_mode"].as_bool()),
        (Some("succeeded"), Some(false)),
        "{}",
        p.body
    );
    assert_eq!(tried(&app, &live, &p.body).await, ["acme-pay"]);
    // A retryable decline at the live account does not fall back to the test one.
    let p = app
        .create_payment(&live, pay_body("4000000000000002"))
        .await;
    assert_eq!(p.body["status"], "declined", "{}", p.body);
    assert_eq!(tried(&app, &live, &p.body).await, ["acme-pay"]);
    assert_eq!(
        authorized(&test_sim),
        0,
        "a live payment reached the test account"
    );

    // And the reverse: a test payment never reaches the live account, first or in fallback.
    let before = authorized(&live_sim);
    let t = app
        .create_payment(&test, pay_body("4242424242424242"))
        .await;
    assert_eq!(t.body["status"], "succeeded", "{}", t.body);
    assert_eq!(tried(&app, &test, &t.body).await, ["test-pay"]);
    let t = app
        .create_payment(&test, pay_body("4000000000000002"))
        .await;
    assert_eq!(t.body["status"], "declined", "{}", t.body);
    assert_eq!(tried(&app, &test, &t.body).await, ["test-pay"]);
    assert_eq!(
        authorized(&live_sim),
        before,
        "a test payment reached the live account"
    );

    // Rules in force: each mode's rules route its own payments only. The sandbox key's rule
    // sends every test payment to its account, and no live payment anywhere but the live one.
    let routing = format!("/account/shops/{}/routing", live.profile_id);
    for (m, name) in [(&test, "test-pay"), (&live, "acme-pay")] {
        let rule = json!({"rules": [{"name": "all", "processors": [{"processor": name}]}]});
        let r = app.call(m, Method::PUT, &routing, Some(rule)).await;
        assert_eq!(r.status, 200, "{}", r.body);
    }
    let (test_before, live_before) = (authorized(&test_sim), authorized(&live_sim));
    let p = app
        .create_payment(&live, pay_body("4000000000000002"))
        .await;
    assert_eq!(tried(&app, &live, &p.body).await, ["acme-pay"]);
    let t = app
        .create_payment(&test, pay_body("4000000000000002"))
        .await;
    assert_eq!(tried(&app, &test, &t.body).await, ["test-pay"]);
    assert_eq!(
        (authorized(&test_sim), authorized(&live_sim)),
        (test_before + 1, live_before + 1)
    );
}

/// A shop whose only account is live: a test payment is the implicit sandbox's, never the
/// live account's (no real money on a test payment).
#[actix_web::test]
async fn a_test_payment_never_reaches_a_live_account() {
    let (app, live, test) = production().await;
    let (sim, url) = start_sim().await;
    let r = add(&app, &live, remote_account(&url, 2000)).await;
    app.approve_processor(r.body["processor_account_id"].as_str().unwrap())
        .await;
    let t = app
        .create_payment(&test, pay_body("4242424242424242"))
        .await;
    assert_eq!(t.body["status"], "succeeded", "{}", t.body);
    assert_eq!(tried(&app, &test, &t.body).await, ["sandbox"]);
    assert_eq!(
        sim.authorizations.load(std::sync::atomic::Ordering::SeqCst),
        0
    );
}

/// Each mode's endpoint receives only its own mode's events.
#[actix_web::test]
async fn each_modes_endpoint_receives_only_its_own_events() {
    let (app, live, test) = production().await;
    let (_sim, url) = start_sim().await;
    let r = add(&app, &live, remote_account(&url, 2000)).await;
    app.approve_processor(r.body["processor_account_id"].as_str().unwrap())
        .await;
    let (live_rx, test_rx) = (Receiver::start().await, Receiver::start().await);
    app.set_webhook(&live, &live_rx.url).await;
    app.set_webhook(&test, &test_rx.url).await;
    let p = app
        .create_payment(&live, pay_body("4242424242424242"))
        .await;
    let t = app
        .create_payment(&test, pay_body("4242424242424242"))
        .await;
    let payment_of = |r: &common::receiver::Received| -> (String, bool) {
        let body: Value = serde_json::from_slice(&r.body).unwrap();
        let object = &body["content"]["object"];
        (
            object["payment_id"].as_str().unwrap_or_default().to_owned(),
            object["test_mode"].as_bool().unwrap_or_default(),
        )
    };
    let id = |a: &common::Answer| a.body["payment_id"].as_str().unwrap().to_owned();
    for (m, rx, payment, test_mode) in [(&live, &live_rx, &p, false), (&test, &test_rx, &t, true)] {
        // As many deliveries as the mode has events: before, each endpoint got both modes'.
        let events = app.event_types(m, &id(payment)).await.len();
        assert!(events > 0);
        let got: Vec<_> = rx.wait_for(events).await.iter().map(payment_of).collect();
        assert!(
            got.iter()
                .all(|(pay, mode)| *pay == id(payment) && *mode == test_mode),
            "{got:?}"
        );
    }
    live_rx.stop().await;
    test_rx.stop().await;
}

/// A Stripe account's event, signed with its webhook secret now, as Stripe posts it.
async fn post_signed(app: &TestApp, account: &str, secret: &str, event: &Value) -> (u16, Value) {
    let body = serde_json::to_vec(event).unwrap();
    let now = chrono::Utc::now().timestamp();
    let signature = payd::processors::stripe::sign(secret, now, &body);
    common::stripe::post_event(app, account, event, &signature).await
}

/// The operator sees where an account points and which key it holds (never the key), and
/// approves or rejects it; until it is approved its events are not heard. Stripe's forms: a
/// key of the caller's mode, a webhook secret `whsec_` and at least 24 characters.
#[actix_web::test]
async fn the_operator_sees_what_it_approves_and_an_unapproved_account_is_not_heard() {
    let (app, live, test) = production().await;
    const WHSEC: &str = "whsec_modes00000000000000000000000001";
    const KEY: &str = "sk_test_modes0000000000000000000004321";
    let stripe = |key: &str, whsec: &str| {
        json!({"name": "stripe-t", "kind": "stripe", "secret_key": key,
            "webhook_secret": whsec, "api_base": "http://127.0.0.1:9"})
    };
    let r = add(&app, &live, stripe(KEY, WHSEC)).await;
    assert_eq!(
        (r.status, r.param()),
        (400, Some("secret_key")),
        "{}",
        r.body
    );
    for bad in [
        "whsec_short",
        "whsec_0123456789012345678901234_!",
        "0123456789012345678901234567890123",
    ] {
        let r = add(&app, &test, stripe(KEY, bad)).await;
        assert_eq!(
            (r.status, r.param()),
            (400, Some("webhook_secret")),
            "{bad}: {}",
            r.body
        );
    }
    let r = add(&app, &test, stripe(KEY, WHSEC)).await;
    assert_eq!(
        (r.status, r.body["approval"].as_str()),
        (201, Some("pending")),
        "{}",
        r.body
    );
    let id = r.body["processor_account_id"].as_str().unwrap().to_owned();

    let event = json!({"id": "evt_m1", "type": "charge.dispute.closed",
        "created": chrono::Utc::now().timestamp(),
        "data": {"object": {"id": "dp_m1", "payment_intent": "pi_m1", "status": "lost"}}});
    let (status, body) = post_signed(&app, &id, WHSEC, &event).await;
    assert_eq!(status, 404, "a pending account's event was heard: {body}");

    let seen = app.get(&format!("/admin/processors/{id}"), ADMIN_KEY).await;
    assert_eq!(seen.status, 200, "{}", seen.body);
    assert_eq!(
        (
            seen.body["connection"]["destination"].as_str(),
            seen.body["connection"]["credential_mode"].as_str(),
            seen.body["connection"]["credential_last4"].as_str(),
            seen.body["test_mode"].as_bool(),
        ),
        (
            Some("http://127.0.0.1:9"),
            Some("test"),
            Some("4321"),
            Some(true)
        ),
        "{}",
        seen.body
    );
    let listed = app.get("/admin/processors", ADMIN_KEY).await;
    assert_eq!(listed.body["data"][0], seen.body);
    for raw in [seen.body.to_string(), listed.body.to_string()] {
        assert!(!raw.contains(KEY) && !raw.contains(WHSEC), "{raw}");
    }
    let r = app.get("/admin/processors?approval=maybe", ADMIN_KEY).await;
    assert_eq!((r.status, r.param()), (400, Some("approval")));

    let r = app
        .post(
            &format!("/admin/processors/{id}/reject"),
            ADMIN_KEY,
            json!({}),
        )
        .await;
    assert_eq!(r.body["approval"], "rejected", "{}", r.body);
    let (status, body) = post_signed(&app, &id, WHSEC, &event).await;
    assert_eq!(status, 404, "a rejected account's event was heard: {body}");
    let rejected = app
        .get("/admin/processors?approval=rejected", ADMIN_KEY)
        .await;
    assert_eq!(
        rejected.body["data"][0]["processor_account_id"],
        id.as_str()
    );

    app.approve_processor(&id).await;
    let (status, body) = post_signed(&app, &id, WHSEC, &event).await;
    assert_eq!(
        (status, body["outcome"].as_str()),
        (200, Some("ignored")),
        "{body}"
    );
}

/// Only the merchant sets `return_url`, and the buyer's side reads `last_error` as a buyer's
/// sentence, never the processor's words.
#[actix_web::test]
async fn the_buyer_side_cannot_set_return_url_nor_read_the_processors_words() {
    let (app, _live, test) = production().await;
    let p = app
        .create_payment(
            &test,
            json!({"amount": 500, "currency": "EUR", "return_url": "https://shop.example/done"}),
        )
        .await;
    assert_eq!(p.status, 201, "{}", p.body);
    let id = p.body["payment_id"].as_str().unwrap().to_owned();
    let secret = p.body["client_secret"].as_str().unwrap().to_owned();
    let confirm = |return_url: Option<&str>, number: &str| {
        let mut body = json!({"client_secret": secret, "payment_method_data": card(number)});
        if let Some(url) = return_url {
            body["return_url"] = json!(url);
        }
        let (app, id, key) = (&app, &id, test.publishable_key.clone());
        async move {
            app.post(&format!("/payments/{id}/confirm"), &key, body)
                .await
        }
    };
    let r = confirm(Some("https://attacker.example/"), "4000000000000002").await;
    assert_eq!(
        (r.status, r.param()),
        (400, Some("return_url")),
        "{}",
        r.body
    );
    let r = confirm(None, "4000000000000002").await;
    assert_eq!(r.body["status"], "declined", "{}", r.body);
    assert_eq!(r.body["return_url"], "https://shop.example/done");
    let merchant = app
        .call(&test, Method::GET, &format!("/payments/{id}"), None)
        .await;
    let processor_words = merchant.body["last_error"]["message"].clone();
    let buyer_words = json!("The card was declined.");
    assert_eq!(r.body["last_error"]["code"], "card_declined");
    assert_eq!(r.body["last_error"]["message"], buyer_words, "{}", r.body);
    assert_ne!(processor_words, buyer_words, "{}", merchant.body);
    let path = format!("/payments/{id}?client_secret={secret}");
    let r = app.get(&path, &test.publishable_key).await;
    assert_eq!(r.body["last_error"]["message"], buyer_words, "{}", r.body);
    let path = format!("/checkout/{id}/status?client_secret={secret}");
    let r = app.send_bytes(Method::GET, &path, None, None, &[]).await;
    assert_eq!(r.body["last_error"]["message"], buyer_words, "{}", r.body);
}

//! Shops kept apart: the effective shop of a request (the key's bound shop, else
//! `x-profile-id`, else every shop) scopes every read, action and list of shop-owned objects;
//! another shop's object reads as missing, exactly like another merchant's.

use crate::common;

use actix_web::http::Method;
use common::{card, spawn_app, Merchant, TestApp};
use serde_json::{json, Value};

/// A second shop of the merchant, and a secret key bound to its first shop.
async fn two_shops(app: &TestApp, m: &Merchant) -> (String, String) {
    let b = app
        .post("/account/shops", &m.secret_key, json!({"name": "Shop B"}))
        .await;
    assert_eq!(b.status, 201, "{}", b.body);
    let bound = app
        .post(
            "/account/api-keys",
            &m.secret_key,
            json!({"kind": "secret", "profile_id": m.profile_id}),
        )
        .await;
    assert_eq!(bound.status, 201, "{}", bound.body);
    (
        b.body["profile_id"].as_str().unwrap().to_owned(),
        bound.body["key"].as_str().unwrap().to_owned(),
    )
}

/// A captured payment of `shop`, made with the merchant-wide key.
async fn paid_in(app: &TestApp, m: &Merchant, shop: &str, capture: &str) -> Value {
    pay_in(app, m, shop, "4242424242424242", capture).await
}

/// A confirmed payment of `shop` with this card, made with the merchant-wide key.
async fn pay_in(app: &TestApp, m: &Merchant, shop: &str, number: &str, capture: &str) -> Value {
    let body = json!({"amount": 1000, "currency": "EUR", "confirm": true, "capture_method": capture,
        "payment_method_data": card(number)});
    let r = app.create_payment_in(m, shop, &body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body
}

fn ids(list: &Value) -> Vec<String> {
    list["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["payment_id"].as_str().unwrap_or_default().to_owned())
        .collect()
}

#[actix_web::test]
async fn a_key_bound_to_one_shop_cannot_touch_another_shops_money() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let (shop_b, bound_a) = two_shops(&app, &m).await;
    let in_a = paid_in(&app, &m, &m.profile_id, "automatic").await;
    let held_b = paid_in(&app, &m, &shop_b, "manual").await;
    let paid_b = paid_in(&app, &m, &shop_b, "automatic").await;
    let held_b_id = held_b["payment_id"].as_str().unwrap();
    let paid_b_id = paid_b["payment_id"].as_str().unwrap();

    let as_bound = |method: Method, path: String, body: Option<Value>| {
        let key = bound_a.clone();
        let app = &app;
        async move {
            app.send(method, &path, Some(&key), body.as_ref(), &[])
                .await
        }
    };
    for (method, path, body) in [
        (Method::GET, format!("/payments/{held_b_id}"), None),
        (
            Method::POST,
            format!("/payments/{held_b_id}/capture"),
            Some(json!({})),
        ),
        (
            Method::POST,
            format!("/payments/{held_b_id}/cancel"),
            Some(json!({})),
        ),
        (Method::GET, format!("/payments/{held_b_id}/attempts"), None),
        (
            Method::POST,
            "/refunds".to_owned(),
            Some(json!({"payment_id": paid_b_id, "amount": 100})),
        ),
    ] {
        let r = as_bound(method.clone(), path.clone(), body).await;
        assert_eq!(r.status, 404, "{method} {path}: {}", r.body);
    }
    // Nothing moved.
    let held = app
        .get(&format!("/payments/{held_b_id}"), &m.secret_key)
        .await;
    assert_eq!(held.body["status"], "requires_capture");
    let paid = app
        .get(&format!("/payments/{paid_b_id}"), &m.secret_key)
        .await;
    assert_eq!(paid.body["amount_refunded"], 0);

    // Its lists hold its shop only; asking for another shop is refused.
    let listed = as_bound(Method::POST, "/payments/list".into(), Some(json!({}))).await;
    assert_eq!(ids(&listed.body), [in_a["payment_id"].as_str().unwrap()]);
    let other = as_bound(
        Method::POST,
        "/payments/list".into(),
        Some(json!({"profile_id": shop_b})),
    )
    .await;
    assert_eq!((other.status, other.code()), (403, "profile_mismatch"));
    // A page cannot start at another shop's payment either.
    let cursor = as_bound(
        Method::POST,
        "/payments/list".into(),
        Some(json!({"starting_after": held_b_id})),
    )
    .await;
    assert_eq!(
        (cursor.status, cursor.code(), cursor.param()),
        (400, "resource_missing", Some("starting_after"))
    );

    // A refund of shop B is missing for it too.
    let refund = app
        .send(
            Method::POST,
            "/refunds",
            Some(&m.secret_key),
            Some(&json!({"payment_id": paid_b_id, "amount": 100})),
            &[],
        )
        .await;
    assert_eq!(refund.status, 201, "{}", refund.body);
    let refund_id = refund.body["refund_id"].as_str().unwrap();
    let r = as_bound(Method::GET, format!("/refunds/{refund_id}"), None).await;
    assert_eq!(r.status, 404);
    let r = as_bound(Method::POST, "/refunds/list".into(), Some(json!({}))).await;
    assert_eq!(r.body["data"], json!([]), "{}", r.body);
}

#[actix_web::test]
async fn the_shop_header_scopes_a_merchant_wide_key_and_lists_filter_by_shop() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let (shop_b, _) = two_shops(&app, &m).await;
    let in_a = paid_in(&app, &m, &m.profile_id, "automatic").await;
    let in_b = paid_in(&app, &m, &shop_b, "automatic").await;
    let (a_id, b_id) = (
        in_a["payment_id"].as_str().unwrap(),
        in_b["payment_id"].as_str().unwrap(),
    );
    let with_a = [("x-profile-id", m.profile_id.as_str())];
    let r = app
        .send(
            Method::GET,
            &format!("/payments/{b_id}"),
            Some(&m.secret_key),
            None,
            &with_a,
        )
        .await;
    assert_eq!(r.status, 404, "{}", r.body);
    let r = app
        .send(
            Method::POST,
            "/payments/list",
            Some(&m.secret_key),
            Some(&json!({})),
            &with_a,
        )
        .await;
    assert_eq!(ids(&r.body), [a_id]);

    // Without a header: every shop, and a filter by shop.
    let all = app.post("/payments/list", &m.secret_key, json!({})).await;
    assert_eq!(ids(&all.body).len(), 2);
    let only_b = app
        .post(
            "/payments/list",
            &m.secret_key,
            json!({"profile_id": shop_b}),
        )
        .await;
    assert_eq!(ids(&only_b.body), [b_id]);
    assert_eq!(
        app.get(&format!("/payments/{b_id}"), &m.secret_key)
            .await
            .status,
        200
    );
}

/// Polls (bounded) until the merchant-wide key lists a dispute; returns it.
async fn first_dispute(app: &TestApp, m: &Merchant) -> Value {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let r = app.get("/disputes/list", &m.secret_key).await;
        if let Some(d) = r.body["data"].get(0) {
            return d.clone();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no dispute: {}",
            r.body
        );
        actix_web::rt::time::sleep(std::time::Duration::from_millis(20)).await;
    }
}

#[actix_web::test]
async fn disputes_and_events_of_another_shop_are_missing() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let (shop_b, bound_a) = two_shops(&app, &m).await;
    // Card …0259: its buyer disputes the captured payment.
    pay_in(&app, &m, &shop_b, "4000000000000259", "automatic").await;
    app.clock.advance(chrono::Duration::seconds(6));
    let dispute = first_dispute(&app, &m).await;
    let dispute_id = dispute["dispute_id"].as_str().unwrap();
    for (method, path) in [
        (Method::GET, format!("/disputes/{dispute_id}")),
        (Method::POST, format!("/disputes/accept/{dispute_id}")),
        (Method::GET, format!("/disputes/evidence/{dispute_id}")),
    ] {
        let r = app
            .send(method.clone(), &path, Some(&bound_a), None, &[])
            .await;
        assert_eq!(r.status, 404, "{method} {path}: {}", r.body);
    }
    let listed = app.get("/disputes/list", &bound_a).await;
    assert_eq!(listed.body["data"], json!([]), "{}", listed.body);
    let still = app
        .get(&format!("/disputes/{dispute_id}"), &m.secret_key)
        .await;
    assert_eq!(still.body["status"], "opened", "accepting it was refused");

    // The payment's events: missing for the key of shop A, listed for the merchant-wide key.
    let events = format!("/events/{}", m.merchant_id);
    let all = app.post(&events, &m.secret_key, json!({})).await;
    let event_id = all.body["data"][0]["event_id"].as_str().unwrap().to_owned();
    let mine = app.post(&events, &bound_a, json!({})).await;
    assert_eq!(mine.body["data"], json!([]), "{}", mine.body);
    for (method, path) in [
        (Method::GET, format!("{events}/{event_id}/attempts")),
        (Method::POST, format!("{events}/{event_id}/retry")),
    ] {
        let r = app
            .send(method.clone(), &path, Some(&bound_a), None, &[])
            .await;
        assert_eq!(r.status, 404, "{method} {path}: {}", r.body);
    }
    let only_b = app
        .post(&events, &m.secret_key, json!({"profile_id": shop_b}))
        .await;
    assert_eq!(
        only_b.body["data"].as_array().unwrap().len(),
        all.body["data"].as_array().unwrap().len()
    );
}

/// Objects of every kind in shop B of merchant `m`, by the path parameter naming them.
async fn objects_in_shop_b(
    app: &TestApp,
    m: &Merchant,
    shop_b: &str,
) -> Vec<(&'static str, String)> {
    let in_b = [("x-profile-id", shop_b)];
    let post = |path: &'static str, body: Value| {
        let key = m.secret_key.clone();
        async move {
            let r = app
                .send(Method::POST, path, Some(&key), Some(&body), &in_b)
                .await;
            assert!(r.status < 300, "{path}: {}", r.body);
            r.body
        }
    };
    let customer = post("/customers", json!({"name": "Ana"})).await;
    let customer_id = customer["customer_id"].as_str().unwrap().to_owned();
    let saved = post(
        "/payments",
        json!({"amount": 500, "currency": "EUR", "confirm": true,
        "customer_id": customer_id, "setup_future_usage": "off_session",
        "payment_method_data": card("4242424242424242")}),
    )
    .await;
    let mandate_id = saved["mandate_id"].as_str().unwrap().to_owned();
    let methods = app
        .get(
            &format!("/customers/{customer_id}/payment-methods"),
            &m.secret_key,
        )
        .await;
    let method_id = methods.body["data"][0]["payment_method_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let refund = post(
        "/refunds",
        json!({"payment_id": saved["payment_id"], "amount": 100}),
    )
    .await;
    let product = post(
        "/products",
        json!({"name": "Tea", "prices": [{"unit_amount": 500, "currency": "EUR"}, {"unit_amount": 900, "currency": "EUR"}]}),
    )
    .await;
    let product_id = product["product_id"].as_str().unwrap().to_owned();
    let side = post(
        "/products",
        json!({"name": "Honey", "prices": [{"unit_amount": 100, "currency": "EUR"}]}),
    )
    .await;
    let group = app
        .send(
            Method::POST,
            &format!("/products/{product_id}/addon-groups"),
            Some(&m.secret_key),
            Some(
                &json!({"name": "Extras", "min_selections": 0, "max_selections": 1,
                "products": [side["product_id"]]}),
            ),
            &in_b,
        )
        .await;
    assert_eq!(group.status, 201, "{}", group.body);
    let plan = post(
        "/products",
        json!({"name": "Plan", "prices": [{"unit_amount": 300, "currency": "EUR", "recurring": {"interval": "month"}}]}),
    )
    .await;
    let subscription = post(
        "/subscriptions",
        json!({"customer_id": customer_id, "mandate_id": mandate_id,
            "items": [{"price_id": plan["prices"][0]["price_id"]}]}),
    )
    .await;
    let case = post(
        "/sandbox/wallet/cases",
        json!({"payment_id": saved["payment_id"], "case_type": "INQUIRY", "reason": "not received"}),
    )
    .await;
    post(
        "/payments",
        json!({"amount": 1000, "currency": "EUR", "confirm": true,
        "payment_method_data": card("4000000000000259")}),
    )
    .await;
    app.clock.advance(chrono::Duration::seconds(6));
    let dispute = first_dispute(app, m).await;
    let held = post(
        "/payments",
        json!({"amount": 700, "currency": "EUR", "confirm": true,
        "capture_method": "manual", "payment_method_data": card("4242424242424242")}),
    )
    .await;
    let hook = app
        .send(
            Method::PUT,
            &format!("/account/shops/{shop_b}/webhook"),
            Some(&m.secret_key),
            Some(&json!({"url": "https://shop-b.example/hooks"})),
            &[],
        )
        .await;
    assert_eq!(hook.status, 200, "{}", hook.body);
    let key = app
        .post(
            "/account/api-keys",
            &m.secret_key,
            json!({"kind": "secret", "profile_id": shop_b}),
        )
        .await;
    let events = app
        .post(
            &format!("/events/{}", m.merchant_id),
            &m.secret_key,
            json!({"profile_id": shop_b}),
        )
        .await;
    let file = app.upload(m, "receipt.txt", b"a receipt").await.body;
    // A subscription of the billing processor, adopted, and a renewal the processor collects
    // (the merchant's test clock moves a month; every job it passes has run when it answers).
    let at_processor = post(
        "/sandbox/billing/subscriptions",
        json!({"customer_name": "Ana", "plan_id": "plan_pro_monthly"}),
    )
    .await;
    let bsub = at_processor["processor_subscription_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let adopted = post(
        "/subscriptions/adopt",
        json!({"processor_subscription_id": bsub}),
    )
    .await;
    post("/sandbox/clock/advance", json!({"seconds": 32 * 86_400})).await;
    let cycles = app
        .send(
            Method::GET,
            &format!(
                "/subscriptions/{}/invoices",
                adopted["subscription_id"].as_str().unwrap()
            ),
            Some(&m.secret_key),
            None,
            &in_b,
        )
        .await;
    let invoice = cycles.body["data"][0]["processor_invoice_id"]
        .as_str()
        .unwrap_or_else(|| panic!("a collected cycle: {}", cycles.body))
        .to_owned();
    // An invoice of shop B, finalized and shared, and shop B's invoice settings and tax rules.
    let draft = post(
        "/invoices",
        json!({"currency": "EUR", "lines": [{"name": "Tea", "unit_amount": 500}]}),
    )
    .await;
    let invoice_id = draft["invoice_id"].as_str().unwrap().to_owned();
    let mut link = Value::Null;
    for step in ["finalize", "share-link"] {
        let path = format!("/invoices/{invoice_id}/{step}");
        let r = app
            .send(
                Method::POST,
                &path,
                Some(&m.secret_key),
                Some(&json!({})),
                &in_b,
            )
            .await;
        assert!(r.status < 300, "{path}: {}", r.body);
        link = r.body;
    }
    let link_id = link["link_id"].as_str().unwrap().to_owned();
    let processor = app
        .post(
            &format!("/account/shops/{shop_b}/processors"),
            &m.secret_key,
            json!({"name": "b-sandbox"}),
        )
        .await;
    assert_eq!(processor.status, 201, "{}", processor.body);
    let payout = post(
        "/payouts/create",
        json!({"amount": 100, "currency": "EUR", "destination": {"bank_account":
            {"account_number": "000123456789", "holder_name": "Ana"}}}),
    )
    .await;
    for (path, body) in [
        (
            format!("/invoice-settings/profiles/{shop_b}"),
            json!({"number_prefix": "B-"}),
        ),
        (
            format!("/invoice-settings/profiles/{shop_b}/tax-rules"),
            json!({"rules": [{"rate_bps": 700, "country": "DE"}]}),
        ),
    ] {
        let r = app
            .send(Method::PUT, &path, Some(&m.secret_key), Some(&body), &[])
            .await;
        assert_eq!(r.status, 200, "{path}: {}", r.body);
    }
    vec![
        ("processor_subscription_id", bsub),
        ("processor_invoice_id", invoice),
        ("invoice_id", invoice_id),
        ("link_id", link_id),
        (
            "processor_account_id",
            processor.body["processor_account_id"]
                .as_str()
                .unwrap()
                .to_owned(),
        ),
        (
            "payout_id",
            payout["payout_id"].as_str().unwrap().to_owned(),
        ),
        (
            "payment_id",
            held["payment_id"].as_str().unwrap().to_owned(),
        ),
        (
            "refund_id",
            refund["refund_id"].as_str().unwrap().to_owned(),
        ),
        (
            "dispute_id",
            dispute["dispute_id"].as_str().unwrap().to_owned(),
        ),
        (
            "event_id",
            events.body["data"][0]["event_id"]
                .as_str()
                .unwrap()
                .to_owned(),
        ),
        ("merchant_id", m.merchant_id.clone()),
        ("profile_id", shop_b.to_owned()),
        ("key_id", key.body["key_id"].as_str().unwrap().to_owned()),
        ("customer_id", customer_id),
        ("payment_method_id", method_id),
        ("mandate_id", mandate_id),
        ("file_id", file["file_id"].as_str().unwrap().to_owned()),
        ("case_id", case["case_id"].as_str().unwrap().to_owned()),
        ("product_id", product_id),
        (
            "price_id",
            product["prices"][1]["price_id"]
                .as_str()
                .unwrap()
                .to_owned(),
        ),
        (
            "group_id",
            group.body["group_id"].as_str().unwrap().to_owned(),
        ),
        (
            "subscription_id",
            subscription["subscription_id"].as_str().unwrap().to_owned(),
        ),
    ]
}

/// Customers, their saved methods and mandates, and files belong to the merchant, not to a
/// shop.
const MERCHANT_WIDE: [&str; 4] = ["customer_id", "payment_method_id", "mandate_id", "file_id"];

/// A body that passes the operation's own checks, so that only the scope can refuse it.
fn body_for(method: &str, template: &str) -> Option<Value> {
    match (method, template) {
        ("post", "/account/shops/{profile_id}/processors") => Some(json!({"name": "probe"})),
        ("put", "/account/shops/{profile_id}/routing") => Some(json!({"rules": []})),
        ("put", "/account/shops/{profile_id}/webhook") => {
            Some(json!({"url": "https://elsewhere.example/hooks"}))
        }
        ("post", "/disputes/wallet/cases/{case_id}/actions") => {
            Some(json!({"action": "send_message", "message": "hello"}))
        }
        ("post", "/products/{product_id}/prices") => {
            Some(json!({"unit_amount": 100, "currency": "EUR"}))
        }
        ("post", "/products/{product_id}/addon-groups")
        | ("post", "/products/{product_id}/addon-groups/{group_id}") => {
            Some(json!({"name": "x", "min_selections": 0, "max_selections": 1, "products": []}))
        }
        ("post", "/products/{product_id}/bundle") => Some(json!({"components": []})),
        ("put", "/subscriptions/{subscription_id}/update") => Some(json!({"items": []})),
        ("post", "/subscriptions/{subscription_id}/confirm") => {
            Some(json!({"mandate_id": "man_00000000000000000000000000000000"}))
        }
        ("post", "/invoices/{invoice_id}/credit-note") => {
            Some(json!({"amount": 1, "reason": "probe"}))
        }
        ("put", "/invoice-settings/profiles/{profile_id}/tax-rules") => Some(json!({"rules": []})),
        ("post", "/events/{merchant_id}/replay") => Some(json!({"since": "2020-01-01T00:00:00Z"})),
        ("patch", "/account/shops/{profile_id}/processors/{processor_account_id}") => {
            Some(json!({"enabled": false}))
        }
        ("post" | "put" | "patch", _) => Some(json!({})),
        _ => None,
    }
}

/// What the merchant-wide key reads of every object, to see that nothing changed.
async fn snapshot(app: &TestApp, m: &Merchant, objects: &[(&str, String)]) -> Vec<Value> {
    let get = |path: String| {
        let key = m.secret_key.clone();
        async move { app.get(&path, &key).await.body }
    };
    let id = |name: &str| objects.iter().find(|(n, _)| *n == name).unwrap().1.clone();
    vec![
        get(format!("/payments/{}", id("payment_id"))).await,
        get(format!("/refunds/{}", id("refund_id"))).await,
        get(format!("/disputes/{}", id("dispute_id"))).await,
        get(format!("/account/shops/{}/webhook", id("profile_id"))).await,
        get(format!("/account/shops/{}/processors", id("profile_id"))).await,
        get(format!("/account/shops/{}/routing", id("profile_id"))).await,
        get(format!("/customers/{}", id("customer_id"))).await,
        get(format!("/mandates/{}", id("mandate_id"))).await,
        get(format!("/files/{}", id("file_id"))).await,
        get(format!("/disputes/wallet/cases/{}", id("case_id"))).await,
        get(format!("/disputes/wallet/cases/{}/history", id("case_id"))).await,
        get(format!("/products/{}", id("product_id"))).await,
        get(format!("/subscriptions/{}", id("subscription_id"))).await,
        get(format!("/invoices/{}", id("invoice_id"))).await,
        get(format!("/payouts/{}", id("payout_id"))).await,
        get(format!("/account/shops/{}/balance", id("profile_id"))).await,
        get(format!("/account/shops/{}/risk", id("profile_id"))).await,
        get(format!("/invoice-settings/profiles/{}", id("profile_id"))).await,
        get(format!(
            "/invoice-settings/profiles/{}/tax-rules",
            id("profile_id")
        ))
        .await,
        get("/account/api-keys?limit=100".to_owned()).await,
    ]
}

/// Every operation of the OpenAPI document that names an object in its path, called with a
/// key bound to another shop and with another merchant's key, answers 404 and changes
/// nothing. A route added without the scope check fails here.
#[actix_web::test]
async fn every_operation_with_an_object_id_keeps_shops_and_merchants_apart() {
    // No webhooks are sent: shop B's endpoint leads nowhere, and its failing deliveries would
    // change its health between the two snapshots.
    let db = std::sync::Arc::new(common::TestDb::new().await);
    let app = common::spawn_with(db, &[("PAYD_WEBHOOKS__DISPATCH", "false")]).await;
    let m = app.create_merchant("Acme").await;
    let other = app.create_merchant("Other").await;
    let (shop_b, bound_a) = two_shops(&app, &m).await;
    let objects = objects_in_shop_b(&app, &m, &shop_b).await;
    let before = snapshot(&app, &m, &objects).await;

    let doc = app
        .send(Method::GET, "/openapi.json", None, None, &[])
        .await
        .body;
    let mut checked = 0;
    let mut wrong = vec![];
    for (template, ops) in doc["paths"].as_object().unwrap() {
        // Product images are served without a key (storefronts embed them); a processor's
        // events carry no key either (its signature authenticates them, tests/api/stripe.rs); the
        // hosted pages' script and stylesheet are the same for everyone.
        if !template.contains('{')
            || template.starts_with("/assets/")
            || template.starts_with("/admin/")
            || template.starts_with("/checkout/")
            || template.starts_with("/processor-webhooks/")
            || template.starts_with("/invoice-links/")
            || template == "/products/images/{image_id}"
        {
            continue;
        }
        let params: Vec<&str> = template
            .split('/')
            .filter_map(|s| s.strip_prefix('{').and_then(|s| s.strip_suffix('}')))
            .collect();
        let mut path = template.clone();
        for p in &params {
            let (_, id) = objects
                .iter()
                .find(|(n, _)| n == p)
                .unwrap_or_else(|| panic!("no object for {{{p}}} in {template}: add one"));
            path = path.replace(&format!("{{{p}}}"), id);
        }
        let shop_owned = params
            .iter()
            .any(|p| *p != "merchant_id" && !MERCHANT_WIDE.contains(p));
        for method in ops.as_object().unwrap().keys() {
            let verb = Method::from_bytes(method.to_uppercase().as_bytes()).unwrap();
            let body = body_for(method, template);
            let mut callers = vec![("another merchant's key", other.secret_key.as_str())];
            if shop_owned {
                callers.push(("a key bound to another shop", bound_a.as_str()));
            }
            for (who, key) in callers {
                let r = app
                    .send(verb.clone(), &path, Some(key), body.as_ref(), &[])
                    .await;
                checked += 1;
                if r.status != 404 {
                    wrong.push(format!(
                        "{method} {template} with {who}: {} {}",
                        r.status, r.body
                    ));
                }
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {checked} calls were not 404:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    assert!(checked > 40, "{checked}");
    assert_eq!(
        snapshot(&app, &m, &objects).await,
        before,
        "something changed"
    );
}

/// A shop named in the path and another chosen with `x-profile-id` contradict each other: 403
/// `profile_mismatch`, as for lists, on every `/account/shops/{profile_id}/…` route; nothing
/// of either shop is read or changed.
#[actix_web::test]
async fn a_path_shop_and_another_header_shop_are_a_mismatch() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let (shop_b, _) = two_shops(&app, &m).await;
    let a = m.profile_id.clone();
    let header = [("x-profile-id", shop_b.as_str())];
    let put_hook = json!({"url": "https://shop-a.example/hooks"});
    let rules = json!({"rules": []});
    let settings = json!({"number_prefix": "B-"});
    for (method, path, body) in [
        (Method::GET, format!("/account/shops/{a}/balance"), None),
        (
            Method::GET,
            format!("/account/shops/{a}/balance-transactions"),
            None,
        ),
        (
            Method::PUT,
            format!("/account/shops/{a}/webhook"),
            Some(&put_hook),
        ),
        (Method::GET, format!("/account/shops/{a}/webhook"), None),
        (Method::GET, format!("/account/shops/{a}/processors"), None),
        (Method::GET, format!("/account/shops/{a}/risk"), None),
        (Method::GET, format!("/invoice-settings/profiles/{a}"), None),
        (
            Method::PUT,
            format!("/invoice-settings/profiles/{a}"),
            Some(&settings),
        ),
        (
            Method::PUT,
            format!("/invoice-settings/profiles/{a}/tax-rules"),
            Some(&rules),
        ),
    ] {
        let r = app
            .send(method.clone(), &path, Some(&m.secret_key), body, &header)
            .await;
        assert_eq!(
            (r.status, r.code(), r.param()),
            (403, "profile_mismatch", Some("x-profile-id")),
            "{method} {path}: {}",
            r.body
        );
        // The same shop in both places, or no header, is answered as before.
        let same = [("x-profile-id", a.as_str())];
        let r = app
            .send(method.clone(), &path, Some(&m.secret_key), body, &same)
            .await;
        assert!(
            r.status < 300,
            "{method} {path} with its own shop: {} {}",
            r.status,
            r.body
        );
    }
    let hook = app
        .send(
            Method::GET,
            &format!("/account/shops/{a}/webhook"),
            Some(&m.secret_key),
            None,
            &[],
        )
        .await;
    assert_eq!(
        hook.body["url"], "https://shop-a.example/hooks",
        "{}",
        hook.body
    );
}

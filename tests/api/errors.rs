//! Every refusal in the one error shape, with a request id, and never a 500.

use crate::common;

use actix_web::http::Method;
use common::{card, spawn_app};
use serde_json::{json, Value};

/// Method, path, key, body, headers, expected status and code.
type Case<'a> = (
    Method,
    &'a str,
    Option<&'a str>,
    Option<&'a str>,
    &'a [(&'a str, &'a str)],
    u16,
    &'a str,
);

#[actix_web::test]
async fn every_error_has_the_one_shape_and_the_request_id() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let key = Some(m.secret_key.as_str());
    let json_ct = [("content-type", "application/json")];
    let cases: Vec<Case> = vec![
        (
            Method::GET,
            "/account",
            None,
            None,
            &[],
            401,
            "missing_api_key",
        ),
        (
            Method::POST,
            "/account/shops",
            key,
            Some("{\"name\":"),
            &json_ct,
            400,
            "invalid_json",
        ),
        (
            Method::POST,
            "/account/shops",
            key,
            Some("{\"name\": 5}"),
            &json_ct,
            400,
            "parameter_invalid",
        ),
        (
            Method::POST,
            "/account/shops",
            key,
            Some("{\"nme\": \"x\"}"),
            &json_ct,
            400,
            "parameter_unknown",
        ),
        (
            Method::POST,
            "/account/api-keys",
            key,
            Some("{}"),
            &json_ct,
            400,
            "parameter_missing",
        ),
        (
            Method::POST,
            "/account/api-keys",
            key,
            Some("{\"kind\": \"root\"}"),
            &json_ct,
            400,
            "parameter_invalid",
        ),
        (
            Method::POST,
            "/account/shops",
            key,
            Some("name=x"),
            &[("content-type", "application/x-www-form-urlencoded")],
            415,
            "unsupported_media_type",
        ),
        (
            Method::GET,
            "/no/such/route",
            key,
            None,
            &[],
            404,
            "route_not_found",
        ),
        (
            Method::PUT,
            "/account/shops",
            key,
            None,
            &[],
            405,
            "method_not_allowed",
        ),
        (
            Method::GET,
            "/account/shops?limit=1000",
            key,
            None,
            &[],
            400,
            "parameter_invalid",
        ),
    ];
    for (method, path, key, body, headers, status, code) in cases {
        let mut req = common::client().request(method.clone(), format!("{}{path}", app.base));
        if let Some(key) = key {
            req = req.insert_header(("api-key", key));
        }
        for h in headers {
            req = req.insert_header(*h);
        }
        let mut res = match body {
            Some(b) => req.send_body(b.to_owned()).await,
            None => req.send().await,
        }
        .unwrap();
        let bytes = res.body().await.unwrap();
        let what = format!("{method} {path} {body:?}");
        assert_eq!(res.status().as_u16(), status, "{what}: {bytes:?}");
        let body: serde_json::Value =
            serde_json::from_slice(&bytes).unwrap_or_else(|_| panic!("{what}: not JSON"));
        let err = &body["error"];
        assert_eq!(err["code"], code, "{what}: {body}");
        assert!(
            err["type"].is_string() && err["message"].is_string(),
            "{what}"
        );
        let request_id = res.headers().get("x-request-id").unwrap().to_str().unwrap();
        assert_eq!(err["request_id"], request_id, "{what}");
    }
}

#[actix_web::test]
async fn a_405_names_the_allowed_methods() {
    let app = spawn_app().await;
    let res = app
        .send(Method::PUT, "/account/shops", None, None, &[])
        .await;
    assert_eq!((res.status, res.code()), (405, "method_not_allowed"));
    assert_eq!(res.header("content-type"), Some("application/json"));
    let allow = res.header("allow").expect("an Allow header");
    let mut methods: Vec<&str> = allow.split(',').map(str::trim).collect();
    methods.sort_unstable();
    assert_eq!(methods, ["GET", "POST"], "{allow}");
}

#[actix_web::test]
async fn fields_are_named_in_errors() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let res = app
        .post("/account/api-keys", &m.secret_key, json!({}))
        .await;
    assert_eq!(res.param(), Some("kind"));
    let res = app
        .post(
            "/account/api-keys",
            &m.secret_key,
            json!({"kind": "secret", "name": 7}),
        )
        .await;
    assert_eq!(res.param(), Some("name"));
    let res = app
        .post(
            "/account/shops",
            &m.secret_key,
            json!({"name": "x", "colour": "red"}),
        )
        .await;
    assert_eq!(res.param(), Some("colour"));
}

#[actix_web::test]
async fn a_ten_megabyte_body_is_refused_and_the_server_stays_healthy() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let big = format!("{{\"name\":\"{}\"}}", "a".repeat(10 * 1024 * 1024));
    let res = common::client()
        .post(format!("{}/account/shops", app.base))
        .insert_header(("api-key", m.secret_key.as_str()))
        .insert_header(("content-type", "application/json"))
        .send_body(big)
        .await;
    // The server may close the connection before reading the whole body; when the client
    // still gets the answer it must be the 413 error body.
    if let Ok(mut res) = res {
        assert_eq!(res.status().as_u16(), 413);
        let body: serde_json::Value = serde_json::from_slice(&res.body().await.unwrap()).unwrap();
        assert_eq!(body["error"]["type"], "payload_too_large");
    }
    // The same through the idempotency middleware, which reads the body first.
    let big = format!("{{\"name\":\"{}\"}}", "a".repeat(2 * 1024 * 1024));
    if let Ok(mut res) = common::client()
        .post(format!("{}/account/shops", app.base))
        .insert_header(("api-key", m.secret_key.as_str()))
        .insert_header(("idempotency-key", "big-one"))
        .insert_header(("content-type", "application/json"))
        .send_body(big)
        .await
    {
        assert_eq!(res.status().as_u16(), 413);
        let _ = res.body().await;
    }
    let health = app
        .send(Method::GET, "/health/ready", None, None, &[])
        .await;
    assert_eq!(health.status, 200);
    let shops = app.get("/account/shops", &m.secret_key).await;
    assert_eq!(
        shops.body["data"].as_array().unwrap().len(),
        1,
        "nothing was created"
    );
}

#[actix_web::test]
async fn a_sane_incoming_request_id_is_kept() {
    let app = spawn_app().await;
    let res = app
        .send(
            Method::GET,
            "/account",
            None,
            None,
            &[("x-request-id", "trace-123")],
        )
        .await;
    assert_eq!(res.header("x-request-id"), Some("trace-123"));
    assert_eq!(res.body["error"]["request_id"], "trace-123");
    let res = app
        .send(
            Method::GET,
            "/health/live",
            None,
            None,
            &[("x-request-id", "bad id with spaces")],
        )
        .await;
    assert!(res.header("x-request-id").unwrap().starts_with("req_"));
}

#[actix_web::test]
async fn each_key_is_rate_limited_on_its_own() {
    let db = std::sync::Arc::new(common::TestDb::new().await);
    let app = common::spawn_one(
        db,
        &[
            ("PAYD_LIMITS__REQUESTS_PER_SECOND", "1"),
            ("PAYD_LIMITS__BURST", "3"),
        ],
    )
    .await;
    let m = app.create_merchant("Acme").await;
    let other = app.create_merchant("Other").await;
    let mut answers = vec![];
    for _ in 0..5 {
        answers.push(app.get("/account", &m.secret_key).await);
    }
    assert_eq!(
        answers.iter().filter(|a| a.status == 200).count(),
        3,
        "the burst"
    );
    let limited = answers.last().unwrap();
    assert_eq!((limited.status, limited.code()), (429, "rate_limited"));
    assert_eq!(limited.body["error"]["type"], "rate_limited");
    assert!(
        limited
            .header("retry-after")
            .unwrap()
            .parse::<u32>()
            .unwrap()
            >= 1
    );
    assert_eq!(
        app.get("/account", &other.secret_key).await.status,
        200,
        "another key is not limited"
    );
}

/// One instance (the buckets are per instance) with small buckets that takes the client
/// address from `x-real-ip`.
async fn limited_app(merchant_rate: &str) -> common::TestApp {
    let db = std::sync::Arc::new(common::TestDb::new().await);
    common::spawn_one(
        db,
        &[
            ("PAYD_LIMITS__REQUESTS_PER_SECOND", "1"),
            ("PAYD_LIMITS__BURST", "3"),
            ("PAYD_LIMITS__MERCHANT_REQUESTS_PER_SECOND", merchant_rate),
            ("PAYD_LIMITS__MERCHANT_BURST", merchant_rate),
            ("PAYD_LIMITS__CLIENT_ADDRESS_HEADER", "x-real-ip"),
        ],
    )
    .await
}

#[actix_web::test]
async fn flooding_with_the_publishable_key_blocks_no_other_buyer() {
    let app = limited_app("1000").await;
    let m = app.create_merchant("Acme").await;
    let mut payments = vec![];
    for _ in 0..2 {
        let p = app
            .create_payment(&m, json!({"amount": 1000, "currency": "EUR"}))
            .await;
        assert_eq!(p.status, 201, "{:?}", p.body);
        payments.push(p.body);
    }
    let read = |p: &Value, secret: &str, ip: &str| {
        let path = format!(
            "/payments/{}?client_secret={secret}",
            p["payment_id"].as_str().unwrap()
        );
        let (key, ip) = (m.publishable_key.clone(), ip.to_owned());
        let app = &app;
        async move {
            app.send(Method::GET, &path, Some(&key), None, &[("x-real-ip", &ip)])
                .await
        }
    };
    let secret = |p: &Value| p["client_secret"].as_str().unwrap().to_owned();

    // One address floods a payment with guessed secrets, and /account: its own bucket empties.
    let mut flood = vec![];
    for _ in 0..4 {
        flood.push(
            read(&payments[0], "pay_guess_secret_x", "203.0.113.66")
                .await
                .status,
        );
    }
    let account = app
        .send(
            Method::GET,
            "/account",
            Some(&m.publishable_key),
            None,
            &[("x-real-ip", "203.0.113.66")],
        )
        .await;
    assert_eq!(flood.last(), Some(&429), "{flood:?}");
    assert_eq!((account.status, account.code()), (429, "rate_limited"));
    assert!(account.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("client address"));

    // The buyers of both payments, at their own addresses, read theirs.
    assert_eq!(
        read(&payments[0], &secret(&payments[0]), "198.51.100.1")
            .await
            .status,
        200
    );
    assert_eq!(
        read(&payments[1], &secret(&payments[1]), "198.51.100.2")
            .await
            .status,
        200
    );

    // Many addresses flooding one payment with its real secret block that payment only.
    let mut one_payment = vec![];
    for i in 10..15 {
        one_payment.push(read(&payments[0], &secret(&payments[0]), &format!("192.0.2.{i}")).await);
    }
    let last = one_payment.last().unwrap();
    assert_eq!(last.status, 429);
    assert!(last.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("this payment"));
    assert_eq!(
        read(&payments[1], &secret(&payments[1]), "198.51.100.2")
            .await
            .status,
        200
    );

    // None of it cost the merchant's server.
    assert_eq!(
        app.call(&m, Method::GET, "/account", None).await.status,
        200
    );
}

#[actix_web::test]
async fn keys_that_are_not_valid_cost_their_sender() {
    let app = limited_app("1000").await;
    let m = app.create_merchant("Acme").await;
    let mut answers = vec![];
    for i in 0..5 {
        let made_up = format!("snd_{:0>40}", i);
        answers.push(
            app.send(
                Method::GET,
                "/account",
                Some(&made_up),
                None,
                &[("x-real-ip", "203.0.113.9")],
            )
            .await
            .status,
        );
    }
    assert_eq!(answers, [401, 401, 401, 429, 429]);
    assert_eq!(app.get("/account", &m.secret_key).await.status, 200);
}

#[actix_web::test]
async fn a_merchant_limit_sits_above_its_keys() {
    let app = limited_app("4").await;
    let m = app.create_merchant("Acme").await;
    let other = app.create_merchant("Other").await;
    // Minting the second key spends one of the merchant's four.
    let second = app
        .post(
            "/account/api-keys",
            &m.secret_key,
            json!({"kind": "secret"}),
        )
        .await;
    assert_eq!(second.status, 201);
    let second = second.body["key"].as_str().unwrap().to_owned();
    let mut answers = vec![];
    for _ in 0..2 {
        answers.push(app.get("/account", &m.secret_key).await.status);
    }
    for _ in 0..2 {
        answers.push(app.get("/account", &second).await.status);
    }
    assert_eq!(
        answers,
        [200, 200, 200, 429],
        "the fifth request of the merchant"
    );
    let limited = app.get("/account", &second).await;
    assert!(limited.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("this merchant"));
    assert_eq!(app.get("/account", &other.secret_key).await.status, 200);
}

#[actix_web::test]
async fn a_request_that_outlives_its_deadline_gets_a_503() {
    let db = std::sync::Arc::new(common::TestDb::new().await);
    let app = common::spawn_with(db, &[("PAYD_HTTP__REQUEST_TIMEOUT_SECS", "1")]).await;
    // The shop's only processor answers in 4 s: a confirm outlives the 1 s deadline.
    let secret = "a-shared-secret-for-the-sim";
    let sim = payd::processors::sim::Sim::new(secret);
    let (port, _handle, server) = payd::processors::sim::serve("127.0.0.1:0", sim).unwrap();
    actix_web::rt::spawn(server);
    let sim_url = format!("http://127.0.0.1:{port}");
    let m = app.create_merchant("Acme").await;
    let add = json!({"name": "slow-pay", "kind": "remote", "url": sim_url, "secret": secret, "timeout_ms": 8000});
    let path = format!("/account/shops/{}/processors", m.profile_id);
    assert_eq!(
        app.call(&m, Method::POST, &path, Some(add)).await.status,
        201
    );
    let fault = json!({"kind": "slow", "delay_ms": 4000});
    let set = common::client()
        .post(format!("{sim_url}/_control/fault"))
        .send_json(&fault)
        .await
        .unwrap();
    assert_eq!(set.status().as_u16(), 204);
    let body = json!({"amount": 5, "currency": "USD", "confirm": true,
        "payment_method_data": common::card("4242424242424242")});
    let r = app.create_payment(&m, body).await;
    assert_eq!((r.status, r.code()), (503, "request_timeout"));
    assert_eq!(
        r.header("x-request-id"),
        r.body["error"]["request_id"].as_str()
    );
    assert_eq!(
        app.get("/account", &m.secret_key).await.status,
        200,
        "the server goes on"
    );
}

/// A body that is not a JSON object is refused as such, and no error names a Rust type.
#[actix_web::test]
async fn a_body_must_be_an_object_and_errors_name_no_rust_type() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let key = Some(m.secret_key.as_str());
    for body in [json!([]), json!("x"), json!(12)] {
        let r = app
            .send(Method::POST, "/customers", key, Some(&body), &[])
            .await;
        assert_eq!(
            (r.status, r.code()),
            (400, "invalid_json"),
            "{body}: {:?}",
            r.body
        );
        assert_eq!(
            app.get("/customers/list", &m.secret_key).await.body["data"],
            json!([])
        );
    }
    let r = app
        .create_payment(
            &m,
            json!({"amount": 500, "currency": "USD", "lines": ["one line"]}),
        )
        .await;
    let message = r.body["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert_eq!(r.status, 400, "{:?}", r.body);
    assert!(
        r.param().is_some_and(|p| p.starts_with("lines")),
        "{:?}",
        r.body
    );
    assert!(
        !message.contains("struct") && !message.contains("LineInput"),
        "{message}"
    );
    assert!(message.contains("an object"), "{message}");
    // A JSON body without a Content-Type is read as JSON (a form type is 415, above).
    let mut res = common::client()
        .post(format!("{}/customers", app.base))
        .insert_header(("api-key", m.secret_key.as_str()))
        .send_body(r#"{"name": "Ada"}"#)
        .await
        .unwrap();
    let body: serde_json::Value = res.json().await.unwrap();
    assert_eq!(
        (res.status().as_u16(), &body["name"]),
        (201, &json!("Ada")),
        "{body}"
    );
    // Numbers are named as a client would: not i64 or u32.
    for (body, expected) in [
        (
            json!({"amount": "500", "currency": "USD"}),
            "expected an integer",
        ),
        (
            json!({"amount": 500, "currency": "USD", "payment_method_data": {"card": {"number": "4242424242424242", "exp_month": -1, "exp_year": 2035, "cvc": "123"}}}),
            "expected a non-negative integer",
        ),
    ] {
        let r = app.create_payment(&m, body).await;
        let message = r.body["error"]["message"].as_str().unwrap_or_default();
        assert_eq!(r.status, 400, "{}", r.body);
        assert!(message.contains(expected), "{message}");
    }
    let r = app
        .send(Method::POST, "/payments", key, Some(&json!([])), &[])
        .await;
    let message = r.body["error"]["message"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    assert!(!message.contains("CreatePaymentRequest"), "{message}");
    app.stop().await;
}

/// No answer may be sniffed into another type; the buyer's pages cannot be framed.
#[actix_web::test]
async fn answers_are_not_sniffed_and_checkout_pages_are_not_framed() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    for path in ["/health/live", "/account", "/no/such/route"] {
        let r = app.send(Method::GET, path, None, None, &[]).await;
        assert_eq!(
            r.header("x-content-type-options"),
            Some("nosniff"),
            "{path}"
        );
    }
    let p = app
        .create_payment(
            &m,
            json!({"amount": 500, "currency": "USD", "hosted_checkout": true}),
        )
        .await;
    let (id, secret) = (
        p.body["payment_id"].as_str().unwrap_or_default().to_owned(),
        p.body["client_secret"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    );
    let page = app
        .send(
            Method::GET,
            &format!("/checkout/{id}?client_secret={secret}"),
            None,
            None,
            &[],
        )
        .await;
    assert_eq!(page.status, 200);
    assert_eq!(page.header("x-frame-options"), Some("DENY"));
    let csp = page.header("content-security-policy").unwrap_or_default();
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    app.stop().await;
}

/// A list refuses what it does not understand instead of answering something else.
#[actix_web::test]
async fn lists_refuse_what_they_do_not_understand() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let typo = app.get("/customers/list?limt=5", &m.secret_key).await;
    assert_eq!(
        (typo.status, typo.code(), typo.param()),
        (400, "parameter_unknown", Some("limt")),
        "{}",
        typo.body
    );
    let garbage = app
        .post(
            "/payments/list",
            &m.secret_key,
            json!({"starting_after": "pay_garbage"}),
        )
        .await;
    assert_eq!(
        (garbage.status, garbage.code(), garbage.param()),
        (400, "parameter_invalid", Some("starting_after")),
        "{}",
        garbage.body
    );
    let other_kind = app
        .get(
            &format!("/disputes/list?ending_before=pay_{}", "0a".repeat(16)),
            &m.secret_key,
        )
        .await;
    assert_eq!(
        (other_kind.status, other_kind.param()),
        (400, Some("ending_before"))
    );

    // A well-formed id the caller has no object for: 400, not an empty page.
    let mine = app
        .create_payment(
            &m,
            json!({"amount": 500, "currency": "USD", "confirm": true, "payment_method_data": card("4242424242424242")}),
        )
        .await;
    let other = app.create_merchant("Other").await;
    let theirs = app
        .create_payment(
            &other,
            json!({"amount": 500, "currency": "USD", "confirm": true, "payment_method_data": card("4242424242424242")}),
        )
        .await;
    let unknown = format!("pay_{}", "0a".repeat(16));
    for (param, id) in [
        ("starting_after", unknown.as_str()),
        ("ending_before", theirs.body["payment_id"].as_str().unwrap()),
    ] {
        let r = app
            .post("/payments/list", &m.secret_key, json!({param: id}))
            .await;
        assert_eq!(
            (r.status, r.code(), r.param()),
            (400, "resource_missing", Some(param)),
            "{}",
            r.body
        );
    }
    // A cursor the list's filters no longer match still pages on.
    let r = app
        .post(
            "/payments/list",
            &m.secret_key,
            json!({"status": "failed", "starting_after": mine.body["payment_id"]}),
        )
        .await;
    assert_eq!(
        (r.status, r.body["data"].as_array().map(Vec::len)),
        (200, Some(0)),
        "{}",
        r.body
    );

    // Email filters ignore case, as mail systems do.
    let made = app
        .call(
            &m,
            Method::POST,
            "/customers",
            Some(json!({"email": "Ana@Example.com"})),
        )
        .await;
    assert_eq!(made.status, 201, "{}", made.body);
    let found = app
        .get("/customers/list?email=ana@example.COM", &m.secret_key)
        .await;
    assert_eq!(
        found.body["data"].as_array().unwrap().len(),
        1,
        "{}",
        found.body
    );
}

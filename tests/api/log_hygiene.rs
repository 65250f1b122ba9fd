//! Nothing secret reaches the logs: the real `payd` binary, logging JSON at `debug`, serves a
//! realistic session (merchants, API keys, a webhook endpoint and its secrets, payments with
//! full card numbers and CVCs, checkout, refunds, webhook deliveries, and requests that fail
//! with bad keys and bad bodies); then every line it wrote on stdout and stderr is searched
//! for every card number, CVC, API key, admin key, webhook secret and client secret used.
//! The demo merchant, whose keys are printed once on purpose, is turned off.

use crate::common;

use std::{
    io::{BufRead, BufReader, Read},
    process::{Child, Command, Stdio},
    sync::{Arc, Mutex},
    thread::JoinHandle,
    time::{Duration, Instant},
};

use actix_web::http::Method;
use common::{receiver::Receiver, receiver::Reply, TestDb};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_payd");
const ADMIN_KEY: &str = "admin-Qh7Vw2Lp9Zr4Tx8N";
const WRONG_ADMIN_KEY: &str = "admin-Wb3Jm6Yc1Ks5Gd0F";

/// Everything the process wrote, line by line, on both streams.
type Lines = Arc<Mutex<Vec<String>>>;

fn collect(stream: impl Read + Send + 'static, lines: Lines) -> JoinHandle<()> {
    std::thread::spawn(move || {
        for line in BufReader::new(stream).lines().map_while(Result::ok) {
            lines.lock().unwrap().push(line);
        }
    })
}

struct Payd {
    child: Child,
    port: u16,
    lines: Lines,
    readers: Vec<JoinHandle<()>>,
}

impl Payd {
    // The child is waited for by `stop` or `Drop`.
    #[allow(clippy::zombie_processes)]
    fn start(db: &TestDb, data_dir: &std::path::Path) -> Payd {
        let mut child = Command::new(BIN)
            .arg("serve")
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("PAYD_DATABASE_URL", &db.url)
            .env("PAYD_LISTEN", "127.0.0.1:0")
            .env("PAYD_ADMIN_KEY", ADMIN_KEY)
            .env("PAYD_LOG__FORMAT", "json")
            .env("PAYD_LOG__FILTER", "debug")
            .env("PAYD_SANDBOX__DEMO_MERCHANT", "false")
            .env("PAYD_SANDBOX__DATA_DIR", data_dir)
            .env("PAYD_SANDBOX__ASYNC_DELAY_SECS", "1")
            .env("PAYD_LIMITS__REQUESTS_PER_SECOND", "0")
            .env("PAYD_WEBHOOKS__TRANSIENT_RETRY_SCHEDULE", "1,1,1,1,1")
            .env("PAYD_WEBHOOKS__POLL_INTERVAL_MS", "100")
            .env("PAYD_SCHEDULER__POLL_INTERVAL_MS", "100")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("payd starts");
        let lines = Lines::default();
        let readers = vec![
            collect(child.stdout.take().unwrap(), lines.clone()),
            collect(child.stderr.take().unwrap(), lines.clone()),
        ];
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let port = lines.lock().unwrap().iter().find_map(|line| {
                let v: Value = serde_json::from_str(line).ok()?;
                (v["message"] == "payd listening").then(|| v["port"].as_u64())?
            });
            if let Some(port) = port {
                return Payd {
                    child,
                    port: port as u16,
                    lines,
                    readers,
                };
            }
            if let Ok(Some(status)) = child.try_wait() {
                panic!("payd exited with {status}: {:?}", lines.lock().unwrap());
            }
            assert!(Instant::now() < deadline, "payd did not announce its port");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// SIGTERM, a bounded wait for the exit, then everything it wrote.
    fn stop(mut self) -> Vec<String> {
        Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        while self.child.try_wait().unwrap().is_none() {
            assert!(Instant::now() < deadline, "payd did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
        // The pipes are closed now: the readers have read everything.
        for reader in std::mem::take(&mut self.readers) {
            reader.join().unwrap();
        }
        std::mem::take(&mut *self.lines.lock().unwrap())
    }
}

impl Drop for Payd {
    /// A failed test leaves no server behind.
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One request; `body` is sent as JSON, or as raw bytes when it is a string.
async fn call(
    port: u16,
    method: Method,
    path: &str,
    key: &str,
    shop: Option<&str>,
    body: Option<Value>,
) -> (u16, Value) {
    let mut req = common::client()
        .request(method, format!("http://127.0.0.1:{port}{path}"))
        .insert_header(("api-key", key));
    if let Some(shop) = shop {
        req = req.insert_header(("x-profile-id", shop));
    }
    let mut res = match body {
        Some(Value::String(raw)) => {
            req.insert_header(("content-type", "application/json"))
                .send_body(raw)
                .await
        }
        Some(body) => req.send_json(&body).await,
        None => req.send().await,
    }
    .expect("request sent");
    let bytes = res.body().await.expect("body read");
    (
        res.status().as_u16(),
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn card(number: &str, cvc: &str) -> Value {
    json!({"card": {"number": number, "exp_month": 11, "exp_year": 2034, "cvc": cvc, "holder_name": "Ada Lovelace"}})
}

fn text(v: &Value, field: &str) -> String {
    v[field]
        .as_str()
        .unwrap_or_else(|| panic!("{field} in {v}"))
        .to_owned()
}

/// Whether `cvc` appears in `line` as a number of its own (not inside a longer run of
/// digits or letters, as in ids and timestamps).
fn contains_cvc(line: &str, cvc: &str) -> bool {
    line.match_indices(cvc).any(|(at, _)| {
        let before = line[..at].chars().next_back();
        let after = line[at + cvc.len()..].chars().next();
        !before.is_some_and(|c| c.is_ascii_alphanumeric())
            && !after.is_some_and(|c| c.is_ascii_alphanumeric())
    })
}

#[actix_web::test]
async fn no_card_number_cvc_key_or_secret_is_logged() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let receiver = Receiver::start().await;
    let payd = Payd::start(&db, dir.path());
    let port = payd.port;
    // What must never be logged, with a name for the failure message.
    let mut secrets: Vec<(&str, String)> = vec![
        ("admin key", ADMIN_KEY.into()),
        ("wrong admin key", WRONG_ADMIN_KEY.into()),
    ];
    let mut cvcs: Vec<&str> = Vec::new();
    let mut pay_with = |number: &'static str, cvc: &'static str| {
        secrets.push(("card number", number.to_owned()));
        cvcs.push(cvc);
        card(number, cvc)
    };
    let visa = pay_with("4242424242424242", "739");
    let mastercard = pay_with("5555555555554444", "826");
    let declined = pay_with("4000000000000002", "917");
    let challenge = pay_with("4000000000003220", "648");
    let asynchronous = pay_with("4000000000000119", "953");
    let at_checkout = pay_with("4000000000000259", "846");
    let amex = pay_with("378282246310005", "4816");
    let not_luhn = pay_with("4242424242424241", "357");
    let bad_cvc_card = pay_with("4111111111111111", "3a7");

    // The merchant, more keys, and a shop-bound one.
    let (status, m) = call(
        port,
        Method::POST,
        "/admin/merchants",
        ADMIN_KEY,
        None,
        Some(json!({"name": "Hygiene"})),
    )
    .await;
    assert_eq!(status, 201, "{m}");
    let (key, shop_id) = (text(&m, "secret_key"), text(&m, "profile_id"));
    let publishable = text(&m, "publishable_key");
    secrets.push(("secret key", key.clone()));
    secrets.push(("publishable key", publishable.clone()));
    let key = key.as_str();
    let shop = Some(shop_id.as_str());
    for body in [
        json!({"kind": "secret", "name": "backend"}),
        json!({"kind": "publishable"}),
        json!({"kind": "secret", "profile_id": shop}),
    ] {
        let (status, k) = call(
            port,
            Method::POST,
            "/account/api-keys",
            key,
            None,
            Some(body),
        )
        .await;
        assert_eq!(status, 201, "{k}");
        secrets.push(("created key", text(&k, "key")));
    }
    let (_, k) = call(
        port,
        Method::POST,
        "/account/api-keys",
        key,
        None,
        Some(json!({"kind": "secret", "name": "to revoke"})),
    )
    .await;
    let revoked = text(&k, "key");
    secrets.push(("revoked key", revoked.clone()));
    let (status, _) = call(
        port,
        Method::DELETE,
        &format!("/account/api-keys/{}", text(&k, "key_id")),
        key,
        None,
        None,
    )
    .await;
    assert_eq!(status, 200);

    // The webhook endpoint: its secret, then a rotated one. The first delivery fails once.
    receiver.script([Reply::status(500)]);
    let hook = format!("/account/shops/{shop_id}/webhook");
    let (status, e) = call(
        port,
        Method::PUT,
        &hook,
        key,
        None,
        Some(json!({"url": receiver.url})),
    )
    .await;
    assert_eq!(status, 200, "{e}");
    secrets.push(("webhook secret", text(&e, "secret")));
    let (status, e) = call(
        port,
        Method::POST,
        &format!("{hook}/rotate"),
        key,
        None,
        None,
    )
    .await;
    assert_eq!(status, 200, "{e}");
    secrets.push(("rotated webhook secret", text(&e, "secret")));

    // Payments: approved, declined, captured by hand, challenged, asynchronous, at checkout.
    let pay = |body: Value| call(port, Method::POST, "/payments", key, shop, Some(body));
    let (status, approved) = pay(
        json!({"amount": 1200, "currency": "USD", "confirm": true, "payment_method_data": visa}),
    )
    .await;
    assert_eq!(
        (status, approved["status"].as_str()),
        (201, Some("succeeded")),
        "{approved}"
    );
    let (status, p) = pay(json!({"amount": 900, "currency": "EUR", "confirm": true,
        "payment_method_data": declined}))
    .await;
    assert_eq!(status, 201, "{p}");
    let (_, manual) = pay(json!({"amount": 5000, "currency": "USD", "confirm": true,
        "capture_method": "manual", "payment_method_data": mastercard}))
    .await;
    let manual_id = text(&manual, "payment_id");
    let (status, p) = call(
        port,
        Method::POST,
        &format!("/payments/{manual_id}/capture"),
        key,
        shop,
        Some(json!({"amount": 3000})),
    )
    .await;
    assert_eq!(status, 200, "{p}");
    let (_, challenged) = pay(json!({"amount": 700, "currency": "USD", "confirm": true,
        "payment_method_data": challenge}))
    .await;
    assert_eq!(
        challenged["status"], "requires_customer_action",
        "{challenged}"
    );
    let (status, p) = call(
        port,
        Method::POST,
        &format!("/checkout/{}/challenge", text(&challenged, "payment_id")),
        &publishable,
        None,
        Some(json!({"client_secret": text(&challenged, "client_secret"), "result": "approve"})),
    )
    .await;
    assert_eq!(status, 200, "{p}");
    // A browser confirms with the publishable key and the client_secret.
    let (_, open) = pay(json!({"amount": 2500, "currency": "USD"})).await;
    let (open_id, open_secret) = (text(&open, "payment_id"), text(&open, "client_secret"));
    let (status, p) = call(
        port,
        Method::POST,
        &format!("/payments/{open_id}/confirm"),
        &publishable,
        None,
        Some(json!({"client_secret": open_secret, "payment_method_data": asynchronous})),
    )
    .await;
    assert_eq!(status, 200, "{p}");
    // The hosted checkout page, then its confirm.
    let (_, hosted) =
        pay(json!({"amount": 4100, "currency": "USD", "hosted_checkout": true})).await;
    let (hosted_id, hosted_secret) = (text(&hosted, "payment_id"), text(&hosted, "client_secret"));
    let (status, _) = call(
        port,
        Method::GET,
        &format!("/checkout/{hosted_id}?client_secret={hosted_secret}"),
        &publishable,
        None,
        None,
    )
    .await;
    assert_eq!(status, 200);
    let mut checkout_card = at_checkout["card"].clone();
    checkout_card["holder_name"] = json!("Grace Hopper");
    let (status, p) = call(
        port,
        Method::POST,
        &format!("/checkout/{hosted_id}/confirm"),
        &publishable,
        None,
        Some(json!({"client_secret": hosted_secret, "card": checkout_card})),
    )
    .await;
    assert_eq!(status, 200, "{p}");
    for secret in [&approved, &manual, &challenged, &open, &hosted] {
        secrets.push(("client secret", text(secret, "client_secret")));
    }
    // A saved card and a mandate, then an off-session charge of it.
    let (_, customer) = call(
        port,
        Method::POST,
        "/customers",
        key,
        None,
        Some(json!({"name": "Ada", "email": "ada@example.com"})),
    )
    .await;
    let customer_id = text(&customer, "customer_id");
    let (status, saved) = pay(json!({"amount": 1000, "currency": "USD", "confirm": true,
        "customer_id": customer_id, "setup_future_usage": "off_session",
        "payment_method_data": amex}))
    .await;
    assert_eq!(status, 201, "{saved}");
    let (status, p) = pay(json!({"amount": 800, "currency": "USD", "confirm": true,
        "customer_id": customer_id, "off_session": true, "mandate_id": text(&saved, "mandate_id")}))
    .await;
    assert_eq!(status, 201, "{p}");
    // Settle the asynchronous one.
    let (status, _) = call(
        port,
        Method::GET,
        &format!("/payments/{open_id}?force_sync=true"),
        key,
        None,
        None,
    )
    .await;
    assert_eq!(status, 200);

    // Refunds: a full one and a partial one.
    for (payment, amount) in [(&approved, None), (&manual, Some(1000))] {
        let mut body = json!({"payment_id": text(payment, "payment_id"), "reason": "requested"});
        if let Some(amount) = amount {
            body["amount"] = json!(amount);
        }
        let (status, r) = call(port, Method::POST, "/refunds", key, None, Some(body)).await;
        assert_eq!(status, 201, "{r}");
    }

    // Failures: keys that are unknown, revoked or garbled, and bodies that are refused.
    let unknown = format!("snd_{}", "Zx9Kq2Wm4Rt7Yp3Lv8Nc5Bd1Hf6Js0GaUe2Ik4Oo");
    secrets.push(("unknown key", unknown.clone()));
    for bad in [
        unknown.as_str(),
        revoked.as_str(),
        "snd_short",
        "Bearer 4242",
    ] {
        let (status, _) = call(port, Method::GET, "/account", bad, None, None).await;
        assert_eq!(status, 401, "{bad}");
    }
    let (status, _) = call(
        port,
        Method::POST,
        "/admin/merchants",
        WRONG_ADMIN_KEY,
        None,
        Some(json!({"name": "Nope"})),
    )
    .await;
    assert_eq!(status, 401);
    let mut expired = visa.clone();
    expired["card"]["exp_year"] = json!(2001);
    let mut bad_month = amex.clone();
    bad_month["card"]["exp_month"] = json!(13);
    for (body, code) in [
        (
            json!({"amount": 100, "currency": "USD", "confirm": true, "payment_method_data": not_luhn}),
            "invalid_card_number",
        ),
        (
            json!({"amount": 100, "currency": "USD", "confirm": true, "payment_method_data": bad_cvc_card}),
            "invalid_cvc",
        ),
        (
            json!({"amount": 100, "currency": "USD", "confirm": true, "payment_method_data": expired}),
            "invalid_expiry_year",
        ),
        (
            json!({"amount": 100, "currency": "USD", "confirm": true, "payment_method_data": bad_month}),
            "invalid_expiry_month",
        ),
        (
            json!({"amount": 100, "currency": "USD", "card_number": "4242424242424242", "cvc": "739"}),
            "parameter_unknown",
        ),
        (
            json!({"amount": "lots", "currency": "USD", "payment_method_data": visa}),
            "parameter_invalid",
        ),
        (
            json!(
                r#"{"amount": 100, "payment_method_data": {"card": {"number": "5555555555554444", "cvc": "826""#
            ),
            "invalid_json",
        ),
    ] {
        let (status, e) = pay(body).await;
        assert_eq!(
            (status, e["error"]["code"].as_str()),
            (400, Some(code)),
            "{e}"
        );
    }
    let (status, _) = call(
        port,
        Method::POST,
        &format!("/checkout/{hosted_id}/confirm"),
        &publishable,
        None,
        Some(json!({"client_secret": "pay_nope_secret_x", "card": visa["card"]})),
    )
    .await;
    assert_eq!(status, 404);

    // A share link's token is the credential of a public route: its requests are logged with
    // the token redacted, found or not (this one is made up, as a guess would be), and when
    // they fail: with the share links' table gone, each is a 5xx, logged at WARN or ERROR
    // with the request's path.
    let token = "isl_Zr4Tx8NQh7Vw2Lp9Kd3Mb6Yc1Gs5Fj0W";
    secrets.push(("share-link token", token.to_owned()));
    let paths = [
        format!("/invoice-links/{token}"),
        format!("/invoice-links/{token}/pdf"),
    ];
    for path in &paths {
        let (status, _) = call(port, Method::GET, path, "", None, None).await;
        assert_eq!(status, 404, "{path}");
    }
    let conn = sea_orm::Database::connect(&db.url).await.unwrap();
    sea_orm::ConnectionTrait::execute_unprepared(
        &conn,
        "ALTER TABLE invoice_share_links RENAME TO invoice_share_links_gone",
    )
    .await
    .unwrap();
    for path in &paths {
        let (status, e) = call(port, Method::GET, path, "", None, None).await;
        assert!(status >= 500, "{path}: {status} {e}");
    }

    // Every route that takes a credential in its path has it redacted from the logs.
    let (status, doc) = call(port, Method::GET, "/openapi.json", "", None, None).await;
    assert_eq!(status, 200);
    for template in doc["paths"].as_object().unwrap().keys() {
        let segments: Vec<&str> = template.split('/').collect();
        for (i, s) in segments.iter().enumerate() {
            let credential = s.starts_with('{') && (s.contains("token") || s.contains("secret"));
            if credential {
                assert!(
                    payd::http::CREDENTIAL_SEGMENTS.contains(&segments[i - 1]),
                    "{template}: add its segment to http::CREDENTIAL_SEGMENTS"
                );
            }
        }
    }

    // The webhook deliveries (one failed once and was retried) have happened.
    let got = receiver.wait_for(8).await;
    assert!(got
        .iter()
        .any(|r| !r.header("webhook-signature").is_empty()));

    let lines = payd.stop();
    assert!(
        lines.iter().any(|l| l.contains(r#""level":"DEBUG""#)),
        "the logs are at debug level: {lines:?}"
    );
    // The access log: a line per request with its route pattern, never its raw path.
    let access: Vec<Value> = lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["message"] == "request" && v["route"].is_string())
        .collect();
    let merchant = text(&m, "merchant_id");
    assert!(
        access.iter().any(|v| v["method"] == "POST"
            && v["route"] == "/payments"
            && v["status"] == 201
            && v["merchant_id"] == merchant.as_str()
            && v["latency_ms"].as_f64().is_some_and(|ms| ms > 0.0)
            && v["span"]["request_id"]
                .as_str()
                .is_some_and(|id| id.starts_with("req_"))),
        "an access line for a created payment: {access:?}"
    );
    assert!(
        access
            .iter()
            .any(|v| v["route"] == "/admin/merchants" && v["merchant_id"] == ""),
        "the operator's request, before any merchant: {access:?}"
    );
    for v in &access {
        let route = v["route"].as_str().unwrap();
        assert!(
            !route.contains("pay_") && !route.contains("mer_"),
            "a raw path: {v}"
        );
    }
    let mut leaks = Vec::new();
    for line in &lines {
        for (what, secret) in &secrets {
            // The random part of a key or secret, without its well-known prefix, counts too.
            let body = secret.rsplit('_').next().unwrap_or(secret);
            if line.contains(secret.as_str()) || (body.len() >= 16 && line.contains(body)) {
                leaks.push(format!("{what} {secret} in: {line}"));
            }
        }
        for cvc in &cvcs {
            if contains_cvc(line, cvc) {
                leaks.push(format!("CVC {cvc} in: {line}"));
            }
        }
    }
    assert!(
        leaks.is_empty(),
        "{} of {} log lines carry a secret:\n{}",
        leaks.len(),
        lines.len(),
        leaks.join("\n")
    );
}

#[test]
fn a_cvc_is_found_only_as_a_number_of_its_own() {
    assert!(contains_cvc(r#"{"cvc":"7391"}"#, "7391"));
    assert!(contains_cvc(r#"cvc: \"7391\""#, "7391"));
    assert!(contains_cvc("7391", "7391"));
    assert!(!contains_cvc("req_01a2017391bc", "7391"));
    assert!(!contains_cvc("2026-11-22T04:37:39.173912Z", "7391"));
    assert!(!contains_cvc(r#""port":47391"#, "7391"));
}

/// A connection string's password reaches neither the error payd exits with nor any log line,
/// whether the string cannot be parsed or its server cannot be reached.
#[test]
fn a_bad_database_url_never_prints_its_password() {
    let password = "s3cretPassw0rdQh7V";
    for url in [
        format!("postgres://payd:{password}@127.0.0.1:notaport/payd"),
        format!("postgres://payd:{password}@127.0.0.1:1/payd"),
    ] {
        let out = Command::new(BIN)
            .arg("migrate")
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("PAYD_DATABASE_URL", &url)
            .env("PAYD_DATABASE__ACQUIRE_TIMEOUT_MS", "1000")
            .env("PAYD_LOG__FORMAT", "json")
            .env("PAYD_LOG__FILTER", "debug")
            .output()
            .expect("payd runs");
        assert!(!out.status.success(), "{url}: payd cannot connect");
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            !text.contains(password),
            "{url}: the password is printed: {text}"
        );
        assert!(
            text.contains("payd:"),
            "{url}: the error is printed: {text}"
        );
    }
}

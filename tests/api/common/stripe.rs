//! localstripe (PyPI: a fake but stateful Stripe server written by others) for the Stripe
//! processor's tests: each test starts its own on a free loopback port and reads its state
//! through Stripe's API.
//!
//! The server is found at `$LOCALSTRIPE`, else as `localstripe` on the `PATH`. `.ci/run`
//! installs it and sets `PAYD_REQUIRE_LOCALSTRIPE=1`, which makes a missing one fail the
//! test; elsewhere (a fresh machine running `cargo test`) a missing one skips the Stripe
//! tests with a notice.

#![allow(dead_code)]

use std::{
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use actix_web::http::Method;
use serde_json::Value;

use super::{client, Merchant, TestApp};

pub const SECRET_KEY: &str = "sk_test_payd0000000000000000000001";
pub const WEBHOOK_SECRET: &str = "whsec_payd0localstripe000000000001";
pub const PUBLISHABLE_KEY: &str = "pk_test_payd0000000000000000000001";

pub struct LocalStripe {
    pub base: String,
    child: Child,
}

impl Drop for LocalStripe {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn program() -> Option<String> {
    if let Ok(p) = std::env::var("LOCALSTRIPE") {
        return Some(p);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join("localstripe"))
        .find(|p| p.is_file())
        .map(|p| p.display().to_string())
}

impl LocalStripe {
    /// A fresh localstripe, or `None` (with a notice) when none is installed and CI does not
    /// require one.
    pub async fn start() -> Option<Self> {
        let Some(program) = program() else {
            assert!(
                std::env::var_os("PAYD_REQUIRE_LOCALSTRIPE").is_none(),
                "PAYD_REQUIRE_LOCALSTRIPE is set but no localstripe was found ($LOCALSTRIPE or PATH)"
            );
            eprintln!("skipped: localstripe is not installed (pip install localstripe)");
            return None;
        };
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            let child = Command::new(&program)
                .args(["--port", &port.to_string(), "--from-scratch"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("localstripe starts");
            let ls = LocalStripe {
                base: format!("http://127.0.0.1:{port}"),
                child,
            };
            if ls.ready().await {
                return Some(ls);
            }
        }
        panic!("localstripe did not start");
    }

    async fn ready(&self) -> bool {
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            let answered = client()
                .get(format!("{}/v1/customers", self.base))
                .bearer_auth(SECRET_KEY)
                .send()
                .await
                .is_ok_and(|r| r.status().is_success());
            if answered {
                return true;
            }
            actix_web::rt::time::sleep(Duration::from_millis(100)).await;
        }
        false
    }

    /// GET a path of Stripe's API (`/v1/…`).
    pub async fn get(&self, path: &str) -> Value {
        let mut res = client()
            .get(format!("{}{path}", self.base))
            .bearer_auth(SECRET_KEY)
            .send()
            .await
            .expect("localstripe answers");
        res.json().limit(1 << 22).await.expect("JSON")
    }

    /// POST a form to a path of Stripe's API.
    pub async fn post(&self, path: &str, form: &[(&str, &str)]) -> (u16, Value) {
        let mut res = client()
            .post(format!("{}{path}", self.base))
            .bearer_auth(SECRET_KEY)
            .send_form(&form)
            .await
            .expect("localstripe answers");
        let status = res.status().as_u16();
        (
            status,
            res.json().limit(1 << 22).await.unwrap_or(Value::Null),
        )
    }

    /// Makes localstripe post its events to payd's endpoint for the account, signed with the
    /// account's webhook secret.
    pub async fn send_events_to(&self, url: &str) {
        let res = client()
            .post(format!("{}/_config/webhooks/payd", self.base))
            .send_form(&[("url", url), ("secret", WEBHOOK_SECRET)])
            .await
            .expect("localstripe answers");
        assert!(res.status().is_success(), "{:?}", res.status());
    }
}

/// Adds a Stripe account on localstripe to the merchant's shop and has localstripe send its
/// events to payd; the account's id.
pub async fn connect(app: &TestApp, m: &Merchant, ls: &LocalStripe) -> String {
    connect_via(app, m, ls, &ls.base, serde_json::json!({})).await
}

/// Adds a Stripe account reached at `api_base` (localstripe, or a layer in front of it) with
/// the `extra` fields of the request, and has localstripe send its events to payd.
pub async fn connect_via(
    app: &TestApp,
    m: &Merchant,
    ls: &LocalStripe,
    api_base: &str,
    extra: Value,
) -> String {
    // Raw card data on, as for an account Stripe approved for it (the strict layer's default):
    // most tests type card numbers in. `extra` may turn it off.
    let mut body = serde_json::json!({"name": "stripe", "kind": "stripe", "secret_key": SECRET_KEY,
        "webhook_secret": WEBHOOK_SECRET, "api_base": api_base, "raw_card_data": true,
        "publishable_key": PUBLISHABLE_KEY});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().cloned().unwrap_or_default());
    let r = app
        .post(
            &format!("/account/shops/{}/processors", m.profile_id),
            &m.secret_key,
            body,
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.body["processor_account_id"].as_str().unwrap().to_owned();
    ls.send_events_to(&format!("{}/processor-webhooks/{id}", app.base))
        .await;
    id
}

/// The `Stripe-Signature` header Stripe would send for `body` now.
pub fn signature(body: &[u8]) -> String {
    payd::processors::stripe::sign(WEBHOOK_SECRET, chrono::Utc::now().timestamp(), body)
}

/// Posts `event` to payd's endpoint for a Stripe account, with this `Stripe-Signature`; the
/// answer's status and body.
/// Posts `event` signed with the account's webhook secret, and asserts payd handled it.
pub async fn deliver_event(app: &TestApp, account: &str, event: &Value) {
    let body = serde_json::to_vec(event).unwrap();
    let (status, answer) = post_event(app, account, event, &signature(&body)).await;
    assert_eq!(
        (status, answer["outcome"].as_str()),
        (200, Some("handled")),
        "{answer}"
    );
}

pub async fn post_event(
    app: &TestApp,
    account: &str,
    event: &Value,
    signature: &str,
) -> (u16, Value) {
    let body = serde_json::to_vec(event).unwrap();
    let res = app
        .send_bytes(
            Method::POST,
            &format!("/processor-webhooks/{account}"),
            None,
            Some(("application/json", body)),
            &[("stripe-signature", signature)],
        )
        .await;
    (res.status, res.body)
}

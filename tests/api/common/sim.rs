//! The reference processor simulator in-process, on 127.0.0.1:0, and a shop's remote account
//! pointing at it.

use std::sync::Arc;

use actix_web::http::Method;
use payd::processors::sim::{serve, Sim};
use serde_json::{json, Value};

use super::{Merchant, TestApp};

pub const SECRET: &str = "a-shared-secret-for-the-sim";

/// Starts a simulator; returns it and its base URL.
pub async fn start_sim() -> (Arc<Sim>, String) {
    let sim = Sim::new(SECRET);
    let (port, _handle, server) = serve("127.0.0.1:0", sim.clone()).unwrap();
    actix_web::rt::spawn(server);
    (sim, format!("http://127.0.0.1:{port}"))
}

/// Tells the simulator how to answer its next requests.
pub async fn fault(url: &str, body: Value) {
    let res = super::client()
        .post(format!("{url}/_control/fault"))
        .send_json(&body)
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 204);
}

/// The body of `POST /account/shops/{profile_id}/processors` that adds the simulator at `url`
/// as the remote account `acme-pay`, with this timeout.
pub fn remote_account(url: &str, timeout_ms: u64) -> Value {
    json!({"name": "acme-pay", "kind": "remote", "url": url, "secret": SECRET, "timeout_ms": timeout_ms})
}

/// Adds the simulator at `url` as the shop's remote account `acme-pay`, with this timeout.
pub async fn add_remote(app: &TestApp, m: &Merchant, url: &str, timeout_ms: u64) {
    let add = remote_account(url, timeout_ms);
    let r = app
        .call(
            m,
            Method::POST,
            &format!("/account/shops/{}/processors", m.profile_id),
            Some(add),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(r.body["kind"], "remote");
}

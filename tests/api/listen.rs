//! `payd listen --forward-to URL` against a running server and a local receiver: each new
//! event arrives once, oldest first, signed so that the Standard Webhooks library verifies it
//! with the secret printed on the first line.

use crate::common;

use std::{
    io::{BufRead, BufReader},
    process::{Child, Command, Stdio},
    sync::mpsc,
    time::Duration,
};

use actix_web::http::Method;
use common::{card, receiver::Receiver, spawn_app};
use serde_json::{json, Value};
use standardwebhooks::Webhook;

/// The child, killed when the test ends however it ends.
struct Listener(Child);

impl Drop for Listener {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[actix_web::test]
async fn listen_forwards_each_new_event_once_signed_with_its_printed_secret() {
    let app = spawn_app().await;
    let receiver = Receiver::start().await;
    let m = app.create_merchant("Acme").await;
    // An event from before it starts is not forwarded.
    let before = app
        .create_payment(
            &m,
            json!({"amount": 100, "currency": "EUR", "confirm": true, "payment_method_data": card("4242424242424242")}),
        )
        .await;
    assert_eq!(before.status, 201, "{}", before.body);

    let mut child = Command::new(env!("CARGO_BIN_EXE_payd"))
        .args([
            "listen",
            "--forward-to",
            &receiver.url,
            "--interval-ms",
            "50",
        ])
        .env("PAYD_API_KEY", &m.secret_key)
        .env("PAYD_BASE_URL", &app.base)
        .env("PAYD_LOG__FILTER", "warn")
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("payd listen starts");
    let stdout = child.stdout.take().unwrap();
    let _listener = Listener(child);
    let (tx, lines) = mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let first = next_line(&lines, Duration::from_secs(20))
        .await
        .expect("the first line within 20 s");
    let secret = first
        .split_whitespace()
        .find(|w| w.starts_with("whsec_"))
        .unwrap_or_else(|| panic!("no secret on the first line: {first}"))
        .to_owned();

    let mut ids = Vec::new();
    for amount in [200, 300, 400] {
        let r = app
            .create_payment(
                &m,
                json!({"amount": amount, "currency": "EUR", "confirm": true, "payment_method_data": card("4242424242424242")}),
            )
            .await;
        assert_eq!(r.status, 201, "{}", r.body);
        ids.push(r.body["payment_id"].as_str().unwrap().to_owned());
    }
    receiver.wait_for(3).await;
    // A marker after them: the listener forwards oldest first behind its cursor, so a second
    // copy of an event, or one from before the start, would arrive before the marker does.
    let marker = app
        .create_payment(
            &m,
            json!({"amount": 500, "currency": "EUR", "confirm": true, "payment_method_data": card("4242424242424242")}),
        )
        .await;
    assert_eq!(marker.status, 201, "{}", marker.body);
    let mut got = receiver.wait_for(4).await;
    assert_eq!(got.len(), 4, "each event once, none from before the start");
    let last: Value = serde_json::from_slice(&got.pop().unwrap().body).unwrap();
    assert_eq!(
        last["content"]["object"]["payment_id"], marker.body["payment_id"],
        "the marker came last"
    );
    let hook = Webhook::new(&secret).unwrap();
    let mut objects = Vec::new();
    for req in &got {
        hook.verify(&req.body, &req.headers)
            .expect("signed with the printed secret");
        let envelope: Value = serde_json::from_slice(&req.body).unwrap();
        assert_eq!(envelope["event_id"], req.header("webhook-id"));
        assert_eq!(envelope["event_type"], "payment_succeeded");
        objects.push(
            envelope["content"]["object"]["payment_id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    assert_eq!(objects, ids, "oldest first");

    // The envelope is the one the events route holds, byte for byte.
    let listed = app
        .call(
            &m,
            Method::POST,
            &format!("/events/{}", m.merchant_id),
            Some(json!({"object_id": ids[0]})),
        )
        .await;
    let envelope = &listed.body["data"][0]["envelope"];
    assert_eq!(
        &serde_json::from_slice::<Value>(&got[0].body).unwrap(),
        envelope
    );

    // One line per event, with the receiver's answer.
    let mut printed = Vec::new();
    while printed.len() < 3 {
        let line = next_line(&lines, Duration::from_secs(10))
            .await
            .expect("a line per event");
        printed.push(line);
    }
    assert!(
        printed
            .iter()
            .all(|l| l.contains("payment_succeeded") && l.contains("[200]")),
        "{printed:?}"
    );
}

/// The child's next line, waiting without blocking the server that runs on this thread.
async fn next_line(lines: &mpsc::Receiver<String>, within: Duration) -> Option<String> {
    let deadline = std::time::Instant::now() + within;
    loop {
        match lines.try_recv() {
            Ok(line) => return Some(line),
            Err(mpsc::TryRecvError::Disconnected) => return None,
            Err(mpsc::TryRecvError::Empty) if std::time::Instant::now() >= deadline => return None,
            Err(mpsc::TryRecvError::Empty) => {
                actix_web::rt::time::sleep(Duration::from_millis(20)).await
            }
        }
    }
}

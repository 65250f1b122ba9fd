//! `payd listen --forward-to URL`: for development, follows a merchant's new events through
//! the events routes and posts each to a local URL, signed exactly as a real delivery
//! (Standard Webhooks headers) with a secret of its own, printed on its first line.
//!
//! It polls `POST /events/{merchant_id}` with `ending_before` set to the newest event it has
//! seen, so each event is forwarded once, oldest first. Events recorded before it started are
//! not forwarded (replay them with `POST /events/{merchant_id}/replay`).

use std::time::Duration;

use anyhow::{anyhow, bail, Context};
use serde::Deserialize;
use serde_json::{json, value::RawValue};

use crate::{
    outbound::{self, Policy},
    webhooks::signer,
};

/// What `payd listen` is told.
#[derive(Debug, Clone)]
pub struct Listen {
    pub base_url: String,
    pub api_key: String,
    pub forward_to: String,
    pub interval: Duration,
}

#[derive(Deserialize)]
struct Account {
    merchant_id: String,
}

#[derive(Deserialize)]
struct Page {
    data: Vec<Event>,
    has_more: bool,
}

#[derive(Deserialize)]
struct Event {
    event_id: String,
    event_type: String,
    envelope: Box<RawValue>,
}

/// Runs until the process is stopped; returns only on an error of the service (a bad key,
/// an unreachable base URL at start).
pub async fn run(listen: Listen) -> anyhow::Result<()> {
    // A developer's tool: the service and the receiver are usually on this machine.
    let everywhere = std::sync::Arc::new(Policy {
        allow_private: true,
        ..Policy::default()
    });
    let client = outbound::client(&everywhere)
        .timeout(Duration::from_secs(30))
        .disable_redirects()
        .finish();
    let base = listen.base_url.trim_end_matches('/').to_owned();
    let account: Account = get_json(
        client
            .get(format!("{base}/account"))
            .insert_header(("api-key", listen.api_key.as_str()))
            .send()
            .await
            .map_err(|e| anyhow!("{base}/account: {e}"))?,
    )
    .await
    .context("reading the key's account")?;
    let secret = signer::new_secret();
    println!(
        "Ready! The webhook signing secret is {secret} (forwarding {}'s events to {}; ^C to quit)",
        account.merchant_id, listen.forward_to
    );
    let events_url = format!("{base}/events/{}", account.merchant_id);
    let list = |body: serde_json::Value| {
        let (client, url, key) = (&client, &events_url, listen.api_key.as_str());
        async move {
            let res = client
                .post(url)
                .insert_header(("api-key", key))
                .send_json(&body)
                .await
                .map_err(|e| anyhow!("{url}: {e}"))?;
            get_json::<Page, _>(res).await
        }
    };
    // Start after the newest event there is.
    let mut cursor = list(json!({"limit": 1}))
        .await?
        .data
        .first()
        .map(|e| e.event_id.clone());
    loop {
        let mut query = json!({"limit": 100});
        if let Some(c) = &cursor {
            query["ending_before"] = json!(c);
        }
        let page = match list(query).await {
            Ok(page) => page,
            Err(e) => {
                eprintln!("payd listen: {e:#}");
                actix_web::rt::time::sleep(listen.interval).await;
                continue;
            }
        };
        // Newest first: forwarded oldest first.
        for event in page.data.iter().rev() {
            forward(&client, &listen.forward_to, &secret, event).await;
            cursor = Some(event.event_id.clone());
        }
        if !page.has_more {
            actix_web::rt::time::sleep(listen.interval).await;
        }
    }
}

/// Posts one event as a delivery would, and prints one line: its type, id and the answer.
async fn forward(client: &awc::Client, url: &str, secret: &str, event: &Event) {
    let body = event.envelope.get().as_bytes().to_vec();
    let timestamp = crate::clock::wall_now().timestamp();
    let headers = signer::request_headers(
        [secret],
        &event.event_id,
        timestamp,
        &body,
        concat!("payd-listen/", env!("CARGO_PKG_VERSION")),
    );
    let mut req = client.post(url);
    for (name, value) in &headers {
        req = req.insert_header((name.as_str(), value.as_str()));
    }
    let answer = req.send_body(body).await;
    let outcome = match answer {
        Ok(res) => format!("[{}]", res.status().as_u16()),
        Err(e) => format!("[error: {e}]"),
    };
    println!(
        "{}  --> {} [{}]  <-- {outcome} POST {url}",
        crate::clock::wall_now().format("%Y-%m-%d %H:%M:%S"),
        event.event_type,
        event.event_id,
    );
}

async fn get_json<T, S>(mut res: awc::ClientResponse<S>) -> anyhow::Result<T>
where
    T: serde::de::DeserializeOwned,
    S: futures_util::Stream<Item = Result<actix_web::web::Bytes, awc::error::PayloadError>> + Unpin,
{
    let body = res.body().limit(16 << 20).await?;
    if !res.status().is_success() {
        bail!(
            "{}: {}",
            res.status(),
            String::from_utf8_lossy(&body[..body.len().min(300)])
        );
    }
    Ok(serde_json::from_slice(&body)?)
}

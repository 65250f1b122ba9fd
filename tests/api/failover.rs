//! PostgreSQL's primary lost under load, with real failover tooling: a pg_auto_failover
//! formation on loopback (a monitor, a primary and a synchronous standby; see
//! `common::formation`), two payd instances on the formation's own URI
//! (`postgres://h1,h2/payd?target_session_attrs=read-write`), keyed create+confirm load over
//! both and a webhook receiver. The primary's whole node (keeper and postmaster) is SIGKILLed.
//!
//! It holds that: every acknowledged payment is on the new primary with the status it was
//! acknowledged with; no key made two payments; every error answered was 503
//! `database_unavailable` with `Retry-After` (or, for a retry whose first try still held its
//! key, 409 `idempotency_key_in_use` with `Retry-After`); each instance's readiness turned 503
//! within 2 s of the loss and 200 within 2 s of the new primary taking writes; every
//! acknowledged payment was announced; and both instances, never restarted, take payments
//! again. The figures it prints are the ones docs/deployment.md quotes.

use crate::common;

use std::{
    sync::Arc,
    time::{Duration, Instant},
};

use common::{
    card,
    formation::Formation,
    keyed_load::{self, KeyedLoad},
    receiver::Receiver,
    spawn_instances, TestDb,
};
use serde_json::json;

/// How long after `since` the instance at `base` answers readiness with `status` (polled
/// every 100 ms, at most `within` plus a second, so a miss shows by how much).
async fn readiness_turns(base: &str, status: u16, since: Instant, within: Duration) -> Duration {
    let client = common::client();
    loop {
        let answer = client
            .get(format!("{base}/health/ready"))
            .timeout(Duration::from_secs(2))
            .send()
            .await
            .map(|r| r.status().as_u16());
        if answer.as_ref().is_ok_and(|s| *s == status) {
            return since.elapsed();
        }
        assert!(
            since.elapsed() < within + Duration::from_secs(1),
            "{base}: readiness still {answer:?}, not {status}, {:?} after",
            since.elapsed()
        );
        actix_web::rt::time::sleep(Duration::from_millis(100)).await;
    }
}

#[actix_web::test]
async fn the_primary_lost_under_load_fails_over_without_losing_or_doubling_a_payment() {
    let Some(mut formation) = Formation::start_if_asked().await else {
        return;
    };
    let primary = formation.primary().await;
    let standby = 1 - primary;
    let synchronous = formation.synchronous_standbys(primary).await;
    assert!(
        !synchronous.is_empty(),
        "the documented setup replicates synchronously"
    );
    let url = formation.url();
    assert!(url.contains("target_session_attrs=read-write"), "{url}");

    let app = spawn_instances(
        Arc::new(TestDb::at(url)),
        &[("PAYD_DATABASE__ACQUIRE_TIMEOUT_MS", "500")],
        2,
    )
    .await;
    let m = app.create_merchant("Acme").await;
    let receiver = Receiver::start().await;
    app.set_webhook(&m, &receiver.url).await;
    let ticker = keyed_load::tick_with_wall_clock(&app);

    // Steady load over both instances, then the primary's node is killed.
    let load = KeyedLoad::start(app.bases(), &m, 4, Duration::from_millis(20));
    actix_web::rt::time::sleep(Duration::from_secs(3)).await;
    formation.kill(primary).await;
    let lost = Instant::now();
    for base in app.bases() {
        let turned = readiness_turns(base, 503, lost, Duration::from_secs(2)).await;
        eprintln!("{base}: readiness 503 {turned:?} after the primary was lost");
        assert!(turned <= Duration::from_secs(2), "{base}: {turned:?}");
    }
    // The standby is promoted by the monitor; writes return when it commits one.
    let writes_back = loop {
        if formation.takes_writes(standby).await {
            break Instant::now();
        }
        assert!(
            lost.elapsed() < Duration::from_secs(60),
            "the standby never took writes"
        );
        actix_web::rt::time::sleep(Duration::from_millis(100)).await;
    };
    eprintln!(
        "the promoted standby took writes {:?} after the loss",
        writes_back - lost
    );
    for base in app.bases() {
        let turned = readiness_turns(base, 200, writes_back, Duration::from_secs(2)).await;
        eprintln!("{base}: readiness 200 {turned:?} after writes returned");
        assert!(turned <= Duration::from_secs(2), "{base}: {turned:?}");
    }
    actix_web::rt::time::sleep(Duration::from_secs(3)).await;
    let tries = load.finish().await;
    ticker.abort();

    let acked = keyed_load::acknowledged(&tries);
    let unanswered = tries
        .iter()
        .filter(|t| t.status == 201 && t.at >= lost)
        .map(|t| t.at)
        .fold((lost, Duration::ZERO), |(last, gap), at| {
            (at, gap.max(at.saturating_duration_since(last)))
        })
        .1;
    eprintln!(
        "{} payments acknowledged, errors {:?}, longest time without an acknowledgement after \
         the loss {unanswered:?}",
        acked.len(),
        keyed_load::errors(&tries)
    );
    keyed_load::assert_only_retryable_errors(&tries);
    keyed_load::assert_kept_and_made_once(&app, &m, &acked).await;
    keyed_load::assert_all_announced(&app, &receiver, &acked).await;

    // Both instances, the same processes all along, take payments on the new primary.
    let client = common::client();
    for base in app.bases() {
        let res = client
            .post(format!("{base}/payments"))
            .insert_header(("api-key", m.secret_key.as_str()))
            .insert_header(("x-profile-id", m.profile_id.as_str()))
            .send_json(&json!({"amount": 700, "currency": "USD", "confirm": true,
                "payment_method_data": card("4242424242424242")}))
            .await
            .expect("answered");
        assert_eq!(res.status().as_u16(), 201, "{base}");
    }
    assert_eq!(formation.primary().await, standby);
}

//! The remote processor over HTTP against the reference simulator: the happy path, and each
//! fault mapped to its state (timeout → processing, 5xx → fallback, open circuit → skipped,
//! contradiction → conflicted, lost capture answer → retried once, never doubled).

use crate::common;

use std::sync::{atomic::Ordering, Arc};

use actix_web::http::Method;
use common::{
    card,
    sim::{add_remote, fault, start_sim},
    spawn_with, Merchant, TestApp, TestDb,
};
use payd::processors::sim::Sim;
use serde_json::{json, Value};

async fn setup(extra: &[(&str, &str)]) -> (TestApp, Merchant, Arc<Sim>, String) {
    let db = Arc::new(TestDb::new().await);
    let app = spawn_with(db, extra).await;
    let m = app.create_merchant("Acme").await;
    let (sim, url) = start_sim().await;
    add_remote(&app, &m, &url, 400).await;
    (app, m, sim, url)
}

async fn pay(app: &TestApp, m: &Merchant, extra: Value) -> Value {
    let mut body = json!({"amount": 500, "currency": "USD", "confirm": true, "payment_method_data": card("4242424242424242")});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let r = app.create_payment(m, body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body
}

async fn decisions(app: &TestApp, m: &Merchant, id: &str) -> Vec<Value> {
    app.call(
        m,
        Method::GET,
        &format!("/payments/{id}/routing-decisions"),
        None,
    )
    .await
    .body["data"]
        .as_array()
        .unwrap()
        .clone()
}

#[actix_web::test]
async fn payments_capture_and_refund_through_the_remote_processor() {
    let (app, m, sim, _) = setup(&[]).await;
    let p = pay(&app, &m, json!({"capture_method": "manual"})).await;
    assert_eq!(p["status"], "requires_capture");
    let id = p["payment_id"].as_str().unwrap();
    assert_eq!(decisions(&app, &m, id).await[0]["chosen"], "acme-pay");
    let r = app
        .call(
            &m,
            Method::POST,
            &format!("/payments/{id}/capture"),
            Some(json!({})),
        )
        .await;
    assert_eq!(r.body["status"], "succeeded", "{}", r.body);
    let r = app
        .call(
            &m,
            Method::POST,
            "/refunds",
            Some(json!({"payment_id": id, "amount": 100})),
        )
        .await;
    assert_eq!(r.body["status"], "succeeded", "{}", r.body);
    let r = app
        .call(
            &m,
            Method::GET,
            &format!("/payments/{id}?force_sync=true"),
            None,
        )
        .await;
    assert_eq!(r.body["status"], "succeeded", "the processor agrees");
    assert_eq!(
        (
            sim.authorizations.load(Ordering::SeqCst),
            sim.captures.load(Ordering::SeqCst),
            sim.refunds_done.load(Ordering::SeqCst)
        ),
        (1, 1, 1)
    );
    let declined = pay(
        &app,
        &m,
        json!({"payment_method_data": card("4000000000000002")}),
    )
    .await;
    assert_eq!(
        (
            declined["status"].as_str(),
            declined["last_error"]["code"].as_str()
        ),
        (Some("declined"), Some("card_declined"))
    );
}

#[actix_web::test]
async fn a_timeout_on_confirm_leaves_the_payment_processing_until_a_sync() {
    let (app, m, _, url) = setup(&[]).await;
    fault(&url, json!({"kind": "timeout", "delay_ms": 1200})).await;
    let p = pay(&app, &m, json!({})).await;
    assert_eq!(p["status"], "processing", "never failed on a guess");
    let id = p["payment_id"].as_str().unwrap();
    let r = app
        .call(
            &m,
            Method::GET,
            &format!("/payments/{id}?force_sync=true"),
            None,
        )
        .await;
    assert_eq!(r.body["status"], "succeeded", "{}", r.body);
}

#[actix_web::test]
async fn a_5xx_falls_back_and_repeated_failures_open_the_circuit() {
    let (app, m, _, url) = setup(&[
        ("PAYD_PROCESSORS__CIRCUIT_FAILURE_THRESHOLD", "2"),
        ("PAYD_PROCESSORS__CIRCUIT_COOLDOWN_SECS", "600"),
    ])
    .await;
    let r = app
        .call(
            &m,
            Method::POST,
            &format!("/account/shops/{}/processors", m.profile_id),
            Some(json!({"name": "backup"})),
        )
        .await;
    assert_eq!(r.status, 201);
    fault(&url, json!({"kind": "error", "count": 2})).await;
    for _ in 0..2 {
        let p = pay(&app, &m, json!({})).await;
        assert_eq!(p["status"], "succeeded", "the backup took it: {p}");
        let d = decisions(&app, &m, p["payment_id"].as_str().unwrap()).await;
        let tried: Vec<&str> = d.iter().map(|x| x["chosen"].as_str().unwrap()).collect();
        assert_eq!(tried, ["acme-pay", "backup"]);
        assert_eq!(d[0]["outcome"], "declined");
        assert_eq!(d[1]["algorithm"], "fallback");
    }
    // Two failures in a row: the circuit is open and routing skips the processor.
    let p = pay(&app, &m, json!({})).await;
    let d = decisions(&app, &m, p["payment_id"].as_str().unwrap()).await;
    assert_eq!(d.len(), 1);
    assert_eq!(d[0]["chosen"], "backup");
    assert_eq!(d[0]["candidates"], json!(["backup"]));
    let metrics = app.send(Method::GET, "/metrics", None, None, &[]).await;
    let text = String::from_utf8_lossy(&metrics.raw);
    assert!(text.contains("payd_processor_circuits_open"));
    // Each account's attempts by outcome: the operator sees which account fails.
    let accounts = app
        .call(
            &m,
            Method::GET,
            &format!("/account/shops/{}/processors", m.profile_id),
            None,
        )
        .await;
    let id = |name: &str| {
        accounts.body["data"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["name"] == name)
            .and_then(|a| a["processor_account_id"].as_str())
            .unwrap()
            .to_owned()
    };
    for (account, outcome, count) in [
        (id("acme-pay"), "unavailable", 2),
        (id("backup"), "approved", 3),
    ] {
        let series = format!(
            "payd_processor_outcomes_total{{account=\"{account}\",outcome=\"{outcome}\"}} {count}"
        );
        assert!(text.lines().any(|l| l == series), "{series} in:\n{text}");
    }
}

#[actix_web::test]
async fn a_processor_that_contradicts_us_makes_the_payment_conflicted() {
    let (app, m, _, url) = setup(&[]).await;
    fault(&url, json!({"kind": "mismatch"})).await;
    let p = pay(&app, &m, json!({"capture_method": "manual"})).await;
    assert_eq!(p["status"], "requires_capture");
    let r = app
        .call(
            &m,
            Method::GET,
            &format!(
                "/payments/{}?force_sync=true",
                p["payment_id"].as_str().unwrap()
            ),
            None,
        )
        .await;
    assert_eq!(r.body["status"], "conflicted", "{}", r.body);
}

#[actix_web::test]
async fn a_capture_whose_answer_was_lost_is_retried_and_never_doubles() {
    let (app, m, sim, url) = setup(&[]).await;
    let p = pay(&app, &m, json!({"capture_method": "manual"})).await;
    let id = p["payment_id"].as_str().unwrap();
    fault(&url, json!({"kind": "timeout", "delay_ms": 1200})).await;
    let r = app
        .call(
            &m,
            Method::POST,
            &format!("/payments/{id}/capture"),
            Some(json!({"amount": 200, "final_capture": false})),
        )
        .await;
    assert_eq!(
        (r.status, r.body["amount_captured"].as_i64()),
        (200, Some(200)),
        "{}",
        r.body
    );
    assert_eq!(
        sim.captures.load(Ordering::SeqCst),
        1,
        "the retry reused the key"
    );
}

#[actix_web::test]
async fn a_refund_whose_answer_was_lost_is_retried_and_never_doubles() {
    let (app, m, sim, url) = setup(&[]).await;
    let p = pay(&app, &m, json!({})).await;
    fault(&url, json!({"kind": "timeout", "delay_ms": 1200})).await;
    let body = json!({"payment_id": p["payment_id"], "amount": 150});
    let r = app.call(&m, Method::POST, "/refunds", Some(body)).await;
    assert_eq!(
        (r.status, r.body["status"].as_str()),
        (201, Some("succeeded")),
        "{}",
        r.body
    );
    assert_eq!(
        sim.refunds_done.load(Ordering::SeqCst),
        1,
        "the retry reused the key"
    );
}

#[actix_web::test]
async fn card_fingerprints_are_keyed_per_merchant() {
    let (app, m, sim, url) = setup(&[]).await;
    let other = app.create_merchant("Other").await;
    add_remote(&app, &other, &url, 400).await;
    for merchant in [&m, &m, &other] {
        assert_eq!(pay(&app, merchant, json!({})).await["status"], "succeeded");
    }
    let prints = sim.fingerprints.lock().unwrap().clone();
    assert_eq!(prints.len(), 3, "{prints:?}");
    assert_eq!(
        prints[0], prints[1],
        "one merchant sees one card as one card"
    );
    assert_ne!(
        prints[0], prints[2],
        "two merchants cannot match their buyers' cards"
    );
}

#[actix_web::test]
async fn a_remote_account_whose_configuration_cannot_be_read_is_never_the_sandbox() {
    use payd_entity::processor_account;
    use sea_orm::{sea_query::Expr, ColumnTrait, EntityTrait, QueryFilter};
    let (app, m, sim, _) = setup(&[]).await;
    processor_account::Entity::update_many()
        .col_expr(processor_account::Column::Config, Expr::value("{not json"))
        .filter(processor_account::Column::Name.eq("acme-pay"))
        .exec(&app.state.db)
        .await
        .unwrap();
    // Card 4242… would be approved by the sandbox.
    let p = pay(&app, &m, json!({})).await;
    assert_eq!(p["status"], "declined", "{p}");
    assert_eq!(p["last_error"]["code"], "processor_unavailable", "{p}");
    assert_eq!(sim.authorizations.load(Ordering::SeqCst), 0);
}

#[actix_web::test]
async fn an_operator_approves_remote_processors_before_they_see_a_card() {
    let (app, m, sim, _) = setup(&[("PAYD_PROCESSORS__REQUIRE_OPERATOR_APPROVAL", "true")]).await;
    let listed = app
        .call(
            &m,
            Method::GET,
            &format!("/account/shops/{}/processors", m.profile_id),
            None,
        )
        .await;
    let account = listed.body["data"][0].clone();
    assert_eq!(account["approval"], "pending", "{account}");
    // Pending: never routed to (a test payment falls to the sandbox; no card reaches it).
    pay(&app, &m, json!({})).await;
    assert_eq!(sim.authorizations.load(Ordering::SeqCst), 0);

    let pending = app.get("/admin/processors", common::ADMIN_KEY).await;
    assert_eq!(pending.status, 200, "{}", pending.body);
    assert_eq!(
        pending.body["data"][0]["processor_account_id"],
        account["processor_account_id"]
    );
    assert_eq!(
        app.get("/admin/processors", &m.secret_key).await.status,
        401,
        "a merchant's key is not the admin key"
    );
    let approve = format!(
        "/admin/processors/{}/approve",
        account["processor_account_id"].as_str().unwrap()
    );
    let refused = app.post(&approve, &m.secret_key, json!({})).await;
    assert_eq!(refused.status, 401);
    let approved = app.post(&approve, common::ADMIN_KEY, json!({})).await;
    assert_eq!(
        (approved.status, approved.body["approval"].as_str()),
        (200, Some("approved"))
    );
    assert_eq!(
        app.post(
            "/admin/processors/proc_none/approve",
            common::ADMIN_KEY,
            json!({})
        )
        .await
        .status,
        404
    );

    let p = pay(&app, &m, json!({})).await;
    assert_eq!(p["status"], "succeeded");
    assert_eq!(sim.authorizations.load(Ordering::SeqCst), 1);
    let empty = app.get("/admin/processors", common::ADMIN_KEY).await;
    assert_eq!(empty.body["data"], json!([]));
}

/// Issue #14's second way to lose money, at the point where a crash would leave it: the
/// processor applies a refund but its answer never arrives. The refund is recorded before the
/// processor hears of it, so it stands `pending`, holding its balance; the next sync asks
/// again with the same idempotency key (the refund's id), gets the first answer and records it.
/// One refund at payd and at the processor, and one `refund_succeeded`.
#[actix_web::test]
async fn a_refund_whose_answer_is_lost_is_recorded_once_from_the_processor() {
    let (app, m, sim, url) = setup(&[]).await;
    let p = pay(&app, &m, json!({})).await;
    let id = p["payment_id"].as_str().unwrap();
    // Every try of the refund request outlives payd's 400 ms timeout; the first is applied.
    fault(
        &url,
        json!({"kind": "timeout", "delay_ms": 1000, "count": 3}),
    )
    .await;
    let r = app
        .call(
            &m,
            Method::POST,
            "/refunds",
            Some(json!({"payment_id": id, "amount": 200})),
        )
        .await;
    assert_eq!(
        (r.status, r.body["status"].as_str()),
        (201, Some("pending")),
        "{}",
        r.body
    );
    assert_eq!(
        sim.refunds_done.load(Ordering::SeqCst),
        1,
        "applied at the processor"
    );
    let payment = app.get(&format!("/payments/{id}"), &m.secret_key).await;
    assert_eq!(
        payment.body["amount_refunded"], 200,
        "the pending refund holds its balance"
    );
    let refund_id = r.body["refund_id"].as_str().unwrap();
    let synced = app
        .get(
            &format!("/refunds/{refund_id}?force_sync=true"),
            &m.secret_key,
        )
        .await;
    assert_eq!(synced.body["status"], "succeeded", "{}", synced.body);
    assert_eq!(
        sim.refunds_done.load(Ordering::SeqCst),
        1,
        "asked again, applied once"
    );
    let again = app
        .get(
            &format!("/refunds/{refund_id}?force_sync=true"),
            &m.secret_key,
        )
        .await;
    assert_eq!(again.body["status"], "succeeded");
    assert_eq!(app.event_types(&m, refund_id).await, ["refund_succeeded"]);
}

/// Asks payd to reconcile the payment (`force_sync`) until it answers 200, at most three
/// times: with two instances, each one's test fault fails its own first commit.
async fn force_sync(app: &TestApp, m: &Merchant, id: &str) -> Value {
    for _ in 0..3 {
        let r = app
            .call(
                m,
                Method::GET,
                &format!("/payments/{id}?force_sync=true"),
                None,
            )
            .await;
        if r.status == 200 {
            return r.body;
        }
        assert_eq!(r.status, 500, "{}", r.body);
    }
    panic!("the payment was never reconciled");
}

/// The processor approves an authorization and a capture, but the commit of each answer fails
/// (the test fault `sandbox.fail_outcome_commits`). The client gets no 2xx; the payment holds
/// the operation's intent, and reconciliation records what the processor did: the
/// authorization from a sync of its reference, the capture from the same request sent again
/// with the same key. payd's amounts end equal to the processor's, and each event is
/// announced once.
#[actix_web::test]
async fn an_approval_whose_commit_fails_answers_no_2xx_and_is_recorded_by_reconciliation() {
    let (app, m, sim, _) =
        setup(&[("PAYD_SANDBOX__FAIL_OUTCOME_COMMITS", "authorize,capture")]).await;
    let body = json!({"amount": 500, "currency": "USD", "capture_method": "manual",
        "payment_method_data": card("4242424242424242")});
    let created = app.create_payment(&m, body).await;
    let id = created.body["payment_id"].as_str().unwrap();
    let r = app
        .call(
            &m,
            Method::POST,
            &format!("/payments/{id}/confirm"),
            Some(json!({})),
        )
        .await;
    assert_eq!(
        r.status, 500,
        "no 2xx for an unrecorded approval: {}",
        r.body
    );
    assert_eq!(sim.authorizations.load(Ordering::SeqCst), 1);
    let p = force_sync(&app, &m, id).await;
    assert_eq!(
        (p["status"].as_str(), p["amount_authorized"].as_i64()),
        (Some("requires_capture"), Some(500)),
        "{p}"
    );
    let attempts = app
        .call(&m, Method::GET, &format!("/payments/{id}/attempts"), None)
        .await;
    assert_eq!(
        attempts.body["data"][0]["status"], "authorized",
        "{}",
        attempts.body
    );

    let r = app
        .call(
            &m,
            Method::POST,
            &format!("/payments/{id}/capture"),
            Some(json!({"amount": 300, "final_capture": false})),
        )
        .await;
    assert_eq!(
        r.status, 500,
        "no 2xx for an unrecorded capture: {}",
        r.body
    );
    let p = force_sync(&app, &m, id).await;
    assert_eq!(
        (p["status"].as_str(), p["amount_captured"].as_i64()),
        (Some("partially_captured_and_capturable"), Some(300)),
        "{p}"
    );
    assert_eq!(
        sim.captures.load(Ordering::SeqCst),
        1,
        "sent again, applied once"
    );
    assert_eq!(sim.captured_amount.load(Ordering::SeqCst), 300);
    assert_eq!(
        app.event_types(&m, id).await,
        ["payment_authorized", "payment_captured"]
    );
}

/// A request whose change was committed but whose answer was lost (here the commit of the
/// processor's answer fails: a 500, which keeps no answer under the key) is resumed by its
/// retry with the same `Idempotency-Key`: the payment, the capture and the refund it made are
/// answered as they now stand, reconciled with the processor, and none is made twice.
#[actix_web::test]
async fn a_retry_after_a_lost_answer_resumes_and_never_moves_money_twice() {
    let (app, m, sim, _) = setup(&[(
        "PAYD_SANDBOX__FAIL_OUTCOME_COMMITS",
        "authorize,capture,refund",
    )])
    .await;
    let keyed = |key: &'static str, path: String, body: Value| {
        let (app, m) = (&app, &m);
        async move {
            let headers = [
                ("x-profile-id", m.profile_id.as_str()),
                ("idempotency-key", key),
            ];
            let send = || {
                app.send(
                    Method::POST,
                    &path,
                    Some(&m.secret_key),
                    Some(&body),
                    &headers,
                )
            };
            let first = send().await;
            assert_eq!(first.status, 500, "the answer is lost: {}", first.body);
            // Each instance fails its own first commit of the answer: with two, a retry may
            // meet the fault once more.
            let mut retry = send().await;
            for _ in 1..app.instances() {
                if retry.status == 500 {
                    retry = send().await;
                }
            }
            let created = if path.ends_with("/capture") { 200 } else { 201 };
            assert_eq!(retry.status, created, "{path}: {}", retry.body);
            let replay = send().await;
            assert_eq!(replay.body, retry.body, "the resumed answer is kept");
            retry.body
        }
    };

    let body = json!({"amount": 500, "currency": "USD", "confirm": true,
        "capture_method": "manual", "payment_method_data": card("4242424242424242")});
    let p = keyed("create", "/payments".into(), body).await;
    let id = p["payment_id"].as_str().unwrap().to_owned();
    assert_eq!(
        (p["status"].as_str(), p["amount_authorized"].as_i64()),
        (Some("requires_capture"), Some(500)),
        "{p}"
    );
    let all = app
        .call(&m, Method::POST, "/payments/list", Some(json!({})))
        .await;
    assert_eq!(all.body["data"].as_array().unwrap().len(), 1, "one payment");
    assert_eq!(sim.authorizations.load(Ordering::SeqCst), 1);

    let body = json!({"amount": 200, "final_capture": false});
    let p = keyed("capture", format!("/payments/{id}/capture"), body).await;
    assert_eq!(p["amount_captured"], 200, "{p}");
    assert_eq!(sim.captured_amount.load(Ordering::SeqCst), 200);

    let body = json!({"payment_id": id, "amount": 100});
    let r = keyed("refund", "/refunds".into(), body).await;
    assert_eq!(
        (r["status"].as_str(), r["amount"].as_i64()),
        (Some("succeeded"), Some(100)),
        "{r}"
    );
    let refunds = app
        .call(
            &m,
            Method::POST,
            "/refunds/list",
            Some(json!({"payment_id": id})),
        )
        .await;
    assert_eq!(
        refunds.body["data"].as_array().unwrap().len(),
        1,
        "{}",
        refunds.body
    );
    assert_eq!(sim.refunded_amount.load(Ordering::SeqCst), 100);
    let p = app
        .call(&m, Method::GET, &format!("/payments/{id}"), None)
        .await;
    assert_eq!(
        (
            p.body["amount_captured"].as_i64(),
            p.body["amount_refunded"].as_i64()
        ),
        (Some(200), Some(100)),
        "{}",
        p.body
    );
    assert_eq!(
        app.event_types(&m, &id).await,
        ["payment_authorized", "payment_captured"]
    );
}

/// A payment with a capture of 200 of its 500 that the processor applied (the first try) but
/// never answered: `timeouts` requests from then on outlive payd's 400 ms timeout. No 2xx.
async fn unanswered_capture(app: &TestApp, m: &Merchant, url: &str, timeouts: u32) -> String {
    let p = pay(app, m, json!({"capture_method": "manual"})).await;
    let id = p["payment_id"].as_str().unwrap().to_owned();
    fault(
        url,
        json!({"kind": "timeout", "delay_ms": 1000, "count": timeouts}),
    )
    .await;
    let r = app
        .call(
            m,
            Method::POST,
            &format!("/payments/{id}/capture"),
            Some(json!({"amount": 200, "final_capture": false})),
        )
        .await;
    assert_eq!(r.status, 502, "no answer, no 2xx: {}", r.body);
    id
}

/// While the processor still does not answer an operation, a command on the payment is 409
/// `processor_operation_pending` with `Retry-After`, and that answer is not stored under its
/// `Idempotency-Key`: the same request sent again once the processor answers runs, and
/// succeeds, instead of replaying the 409.
#[actix_web::test]
async fn a_pending_operation_asks_for_a_retry_and_the_retry_runs() {
    // Six timeouts in a row would open the circuit; here the processor must only be silent.
    let (app, m, sim, url) = setup(&[("PAYD_PROCESSORS__CIRCUIT_FAILURE_THRESHOLD", "100")]).await;
    // The capture's three tries and the first reconciliation's three go unanswered.
    let id = &unanswered_capture(&app, &m, &url, 6).await;
    let path = format!("/payments/{id}/cancel");
    let body = json!({});
    let headers = [
        ("x-profile-id", m.profile_id.as_str()),
        ("idempotency-key", "cancel-1"),
    ];
    let cancel = || {
        app.send(
            Method::POST,
            &path,
            Some(&m.secret_key),
            Some(&body),
            &headers,
        )
    };
    let r = cancel().await;
    assert_eq!(
        (r.status, r.code(), r.param()),
        (409, "processor_operation_pending", Some("payment_id")),
        "{}",
        r.body
    );
    assert!(r.header("retry-after").is_some(), "{:?}", r.headers);
    // The processor answers again: the same request runs now.
    let r = cancel().await;
    assert_eq!(
        (
            r.status,
            r.body["status"].as_str(),
            r.header("idempotent-replayed")
        ),
        (200, Some("partially_captured"), None),
        "{}",
        r.body
    );
    assert_eq!(sim.captures.load(Ordering::SeqCst), 1, "captured once");
}

/// A command on a payment whose capture has no recorded outcome reconciles it first: a cancel
/// sent after a lost capture finds the capture made (once) and cancels what remains.
#[actix_web::test]
async fn the_next_command_reconciles_an_unanswered_capture_first() {
    let (app, m, sim, url) = setup(&[]).await;
    let id = &unanswered_capture(&app, &m, &url, 3).await;
    assert_eq!(sim.captures.load(Ordering::SeqCst), 1);
    let r = app
        .call(
            &m,
            Method::POST,
            &format!("/payments/{id}/cancel"),
            Some(json!({})),
        )
        .await;
    assert_eq!(
        (
            r.status,
            r.body["status"].as_str(),
            r.body["amount_captured"].as_i64()
        ),
        (200, Some("partially_captured"), Some(200)),
        "{}",
        r.body
    );
    assert_eq!(sim.captures.load(Ordering::SeqCst), 1);
    assert_eq!(
        app.event_types(&m, id).await,
        ["payment_authorized", "payment_captured", "payment_captured"]
    );
}

/// An authorization lost on its way (the processor never saw it; payd timed out): the payment
/// is `processing`, not failed on a guess. Once the request's deadline has passed, a sync that
/// finds no trace of it records the attempt as declined, and the payment can be confirmed
/// again under a new reference.
#[actix_web::test]
async fn an_authorization_the_processor_never_received_is_declined_after_its_deadline() {
    let (app, m, sim, url) = setup(&[]).await;
    fault(&url, json!({"kind": "lost", "delay_ms": 1000})).await;
    let p = pay(&app, &m, json!({})).await;
    assert_eq!(p["status"], "processing", "{p}");
    let id = p["payment_id"].as_str().unwrap();
    assert_eq!(sim.authorizations.load(Ordering::SeqCst), 0);
    let p = force_sync(&app, &m, id).await;
    assert_eq!(
        p["status"], "processing",
        "within its deadline it may still arrive: {p}"
    );
    app.clock.advance(chrono::Duration::milliseconds(401));
    let p = force_sync(&app, &m, id).await;
    assert_eq!(
        (p["status"].as_str(), p["last_error"]["code"].as_str()),
        (Some("declined"), Some("processor_unavailable")),
        "{p}"
    );
    let r = app
        .call(
            &m,
            Method::POST,
            &format!("/payments/{id}/confirm"),
            Some(json!({})),
        )
        .await;
    assert_eq!(r.body["status"], "succeeded", "{}", r.body);
    assert_eq!(sim.authorizations.load(Ordering::SeqCst), 1);
    let attempts = app
        .call(&m, Method::GET, &format!("/payments/{id}/attempts"), None)
        .await;
    let statuses: Vec<&str> = attempts.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["declined", "captured"], "{}", attempts.body);
}

/// Refunds made at the processor without payd (its dashboard) are recorded by the next sync of
/// the payment or of one of its refunds: each once, with `refund_succeeded` once, and what
/// they took is no longer refundable.
#[actix_web::test]
async fn refunds_made_at_the_processor_are_recorded_once_by_a_sync() {
    let (app, m, sim, url) = setup(&[]).await;
    let p = pay(&app, &m, json!({})).await;
    let id = p["payment_id"].as_str().unwrap();
    let outside_refund = async |amount: i64| {
        let res = common::client()
            .post(format!("{url}/_control/refund"))
            .send_json(&json!({"reference": format!("{id}.1.acme-pay"), "amount": amount}))
            .await
            .unwrap();
        assert_eq!(res.status().as_u16(), 200);
    };
    outside_refund(120).await;
    let synced = force_sync(&app, &m, id).await;
    assert_eq!(synced["amount_refunded"], 120, "{synced}");
    let again = force_sync(&app, &m, id).await;
    assert_eq!(again["amount_refunded"], 120, "recorded once: {again}");
    let list = app
        .post("/refunds/list", &m.secret_key, json!({"payment_id": id}))
        .await;
    let refunds = list.body["data"].as_array().unwrap().clone();
    assert_eq!(refunds.len(), 1, "{}", list.body);
    assert_eq!(
        (refunds[0]["status"].as_str(), refunds[0]["amount"].as_i64()),
        (Some("succeeded"), Some(120))
    );
    let first = refunds[0]["refund_id"].as_str().unwrap();
    assert_eq!(app.event_types(&m, first).await, ["refund_succeeded"]);
    let over = app
        .call(
            &m,
            Method::POST,
            "/refunds",
            Some(json!({"payment_id": id, "amount": 381})),
        )
        .await;
    assert_eq!(
        (over.status, over.body["error"]["code"].as_str()),
        (400, Some("amount_exceeds_refundable")),
        "{}",
        over.body
    );

    // A refund's force_sync finds the payment's other refunds too.
    outside_refund(30).await;
    let r = app
        .get(&format!("/refunds/{first}?force_sync=true"), &m.secret_key)
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let payment = app.get(&format!("/payments/{id}"), &m.secret_key).await;
    assert_eq!(payment.body["amount_refunded"], 150, "{}", payment.body);
    assert_eq!(sim.refunded_amount.load(Ordering::SeqCst), 150);
}

/// The buyer passes a challenge; the processor authorizes (and captures) but the commit of its
/// answer fails. The buyer gets no 2xx; reconciliation sends the same answer again with the
/// same key and records what the processor did, once.
#[actix_web::test]
async fn a_challenge_whose_answer_is_not_recorded_is_reconciled() {
    let (app, m, sim, _) = setup(&[("PAYD_SANDBOX__FAIL_OUTCOME_COMMITS", "challenge")]).await;
    let body = json!({"amount": 500, "currency": "USD", "confirm": true,
        "payment_method_data": card("4000000000003220")});
    let p = app.create_payment(&m, body).await.body;
    assert_eq!(p["status"], "requires_customer_action", "{p}");
    let (id, secret) = (
        p["payment_id"].as_str().unwrap(),
        p["client_secret"].as_str().unwrap(),
    );
    let r = app
        .send(
            Method::POST,
            &format!("/checkout/{id}/challenge"),
            None,
            Some(&json!({"client_secret": secret, "result": "approve"})),
            &[],
        )
        .await;
    assert_eq!(
        r.status, 500,
        "no 2xx for an unrecorded approval: {}",
        r.body
    );
    let p = force_sync(&app, &m, id).await;
    assert_eq!(
        (p["status"].as_str(), p["amount_captured"].as_i64()),
        (Some("succeeded"), Some(500)),
        "{p}"
    );
    assert_eq!(sim.captured_amount.load(Ordering::SeqCst), 500);
    assert_eq!(
        app.event_types(&m, id).await,
        ["action_required", "payment_succeeded"]
    );
}

/// The remote processor applied a refund whose answer payd never recorded (the commit of its
/// answer failed, as when payd is killed): the payment's `force_sync` finds it among the
/// processor's refunds and settles it, announcing `refund_succeeded` once, before its own
/// settle job would (set far off here) and without asking for it again.
#[actix_web::test]
async fn a_payments_sync_settles_its_refund_whose_answer_was_lost() {
    let (app, m, sim, _) = setup(&[
        ("PAYD_SANDBOX__FAIL_OUTCOME_COMMITS", "refund"),
        ("PAYD_SANDBOX__ASYNC_DELAY_SECS", "600"),
    ])
    .await;
    let p = pay(&app, &m, json!({})).await;
    let id = p["payment_id"].as_str().unwrap();
    let r = app
        .call(
            &m,
            Method::POST,
            "/refunds",
            Some(json!({"payment_id": id, "amount": 120})),
        )
        .await;
    assert_eq!(r.status, 500, "the answer is lost: {}", r.body);
    assert_eq!(sim.refunded_amount.load(Ordering::SeqCst), 120);
    let list = app
        .post("/refunds/list", &m.secret_key, json!({"payment_id": id}))
        .await;
    let refund = list.body["data"][0].clone();
    assert_eq!(refund["status"], "pending", "{refund}");
    let refund_id = refund["refund_id"].as_str().unwrap();

    // Each instance fails its own first commit of a refund's answer: with two, the sync may
    // meet the fault once more.
    let path = format!("/payments/{id}?force_sync=true");
    let sync = || app.call(&m, Method::GET, &path, None);
    let mut synced = sync().await;
    for _ in 1..app.instances() {
        if synced.status == 500 {
            synced = sync().await;
        }
    }
    assert_eq!(synced.body["amount_refunded"], 120, "{}", synced.body);
    let refund = app
        .get(&format!("/refunds/{refund_id}"), &m.secret_key)
        .await;
    assert_eq!(refund.body["status"], "succeeded", "{}", refund.body);
    assert_eq!(app.event_types(&m, refund_id).await, ["refund_succeeded"]);
    assert_eq!(
        sim.refunded_amount.load(Ordering::SeqCst),
        120,
        "refunded once"
    );
}

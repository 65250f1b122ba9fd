//! The Stripe processor against localstripe, a Stripe server written by others: every flow is
//! read through payd's API and through Stripe's (localstripe's) own, which must agree.

use crate::common;

use std::{sync::Arc, time::Duration};

use actix_web::http::Method;
use common::{
    card, spawn_with,
    strict_stripe::{Fault, StrictStripe},
    stripe::{
        connect_via, deliver_event, post_event, signature, LocalStripe, SECRET_KEY, WEBHOOK_SECRET,
    },
    Merchant, TestApp, TestDb,
};
use serde_json::{json, Value};

/// payd with a merchant whose Stripe account is localstripe behind the strict layer.
async fn setup() -> Option<(TestApp, Merchant, StrictStripe, String)> {
    let ls = StrictStripe::start().await?;
    let app = spawn_with(Arc::new(TestDb::new().await), &[]).await;
    let m = app.create_merchant("Acme").await;
    let account = ls.connect(&app, &m).await;
    Some((app, m, ls, account))
}

async fn pay(app: &TestApp, m: &Merchant, number: &str, extra: Value) -> Value {
    let mut body = json!({"amount": 1000, "currency": "USD", "confirm": true,
        "payment_method_data": card(number)});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let r = app.create_payment(m, body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body
}

async fn call(
    app: &TestApp,
    m: &Merchant,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Value {
    let r = app.call(m, method, path, body).await;
    assert!(r.status < 300, "{path}: {} {}", r.status, r.body);
    r.body
}

/// `GET /payments/{id}?force_sync=true`.
async fn force_sync(app: &TestApp, m: &Merchant, id: &str) -> Value {
    call(
        app,
        m,
        Method::GET,
        &format!("/payments/{id}?force_sync=true"),
        None,
    )
    .await
}

/// The PaymentIntent id of the payment's last attempt.
async fn intent_of(app: &TestApp, m: &Merchant, id: &str) -> String {
    let attempts = call(
        app,
        m,
        Method::GET,
        &format!("/payments/{id}/attempts"),
        None,
    )
    .await;
    let last = attempts["data"].as_array().unwrap().last().unwrap().clone();
    let pi = last["processor_reference"].as_str().unwrap_or_default();
    assert!(
        pi.starts_with("pi_"),
        "the attempt shows the PaymentIntent: {last}"
    );
    pi.to_owned()
}

/// Polls until `done` holds for the payment (bounded: fifteen seconds; localstripe sends its
/// events a second after the change).
async fn wait_until(app: &TestApp, m: &Merchant, id: &str, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    loop {
        let p = app
            .call(m, Method::GET, &format!("/payments/{id}"), None)
            .await
            .body;
        if done(&p) {
            return p;
        }
        assert!(std::time::Instant::now() < deadline, "never: {p}");
        actix_web::rt::time::sleep(Duration::from_millis(100)).await;
    }
}

#[actix_web::test]
async fn automatic_and_partial_manual_capture_and_cancel_agree_with_stripe() {
    let Some((app, m, ls, _)) = setup().await else {
        return;
    };
    let p = pay(&app, &m, "4242424242424242", json!({})).await;
    assert_eq!(p["status"], "succeeded", "{p}");
    let id = p["payment_id"].as_str().unwrap();
    let pi = ls
        .get(&format!(
            "/v1/payment_intents/{}",
            intent_of(&app, &m, id).await
        ))
        .await;
    assert_eq!(pi["status"], "succeeded");
    assert_eq!(pi["amount"], 1000);
    assert_eq!(pi["currency"], "usd");
    assert_eq!(pi["metadata"]["payd_payment_id"], id);

    let p = pay(
        &app,
        &m,
        "4242424242424242",
        json!({"capture_method": "manual"}),
    )
    .await;
    assert_eq!(p["status"], "requires_capture", "{p}");
    let id = p["payment_id"].as_str().unwrap();
    let intent = intent_of(&app, &m, id).await;
    assert_eq!(
        ls.get(&format!("/v1/payment_intents/{intent}")).await["status"],
        "requires_capture"
    );
    let captured = call(
        &app,
        &m,
        Method::POST,
        &format!("/payments/{id}/capture"),
        Some(json!({"amount": 600})),
    )
    .await;
    assert_eq!(captured["amount_captured"], 600, "{captured}");
    assert_eq!(captured["status"], "partially_captured");
    assert_eq!(
        ls.get(&format!("/v1/payment_intents/{intent}")).await["status"],
        "succeeded"
    );
    // localstripe records the uncaptured 400 as a refund: a sync must not book it as one.
    let synced = force_sync(&app, &m, id).await;
    assert_eq!(
        (
            synced["status"].as_str(),
            synced["amount_captured"].as_i64(),
            synced["amount_refunded"].as_i64()
        ),
        (Some("partially_captured"), Some(600), Some(0)),
        "{synced}"
    );

    let p = pay(
        &app,
        &m,
        "4242424242424242",
        json!({"capture_method": "manual"}),
    )
    .await;
    let id = p["payment_id"].as_str().unwrap();
    let intent = intent_of(&app, &m, id).await;
    let cancelled = call(
        &app,
        &m,
        Method::POST,
        &format!("/payments/{id}/cancel"),
        Some(json!({})),
    )
    .await;
    assert_eq!(cancelled["status"], "cancelled", "{cancelled}");
    assert_eq!(
        ls.get(&format!("/v1/payment_intents/{intent}")).await["status"],
        "canceled"
    );
}

#[actix_web::test]
async fn a_decline_keeps_stripes_code_and_stripe_down_is_no_5xx() {
    let Some((app, m, ls, _)) = setup().await else {
        return;
    };
    let p = pay(&app, &m, "4000000000000341", json!({})).await;
    assert_eq!(p["status"], "declined", "{p}");
    assert_eq!(p["last_error"]["code"], "card_declined");
    let pis = ls.get("/v1/payment_intents?limit=100").await;
    let declined: Vec<&Value> = pis["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|pi| pi["metadata"]["payd_payment_id"] == p["payment_id"])
        .collect();
    assert_eq!(declined.len(), 1);
    assert_eq!(declined[0]["status"], "requires_payment_method");
    assert_eq!(declined[0]["last_payment_error"]["code"], "card_declined");

    // Stripe unreachable: the attempt fails as processor_unavailable, never a 5xx.
    ls.stop().await;
    let r = app
        .create_payment(
            &m,
            json!({"amount": 1000, "currency": "USD", "confirm": true,
        "payment_method_data": card("4242424242424242")}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    assert_eq!(
        r.body["last_error"]["code"], "processor_unavailable",
        "{}",
        r.body
    );
    assert!(
        matches!(r.body["status"].as_str(), Some("declined" | "failed")),
        "{}",
        r.body
    );
}

#[actix_web::test]
async fn three_d_secure_finished_at_stripe_is_learnt_from_the_webhook_alone() {
    let Some((app, m, ls, _)) = setup().await else {
        return;
    };
    let p = pay(&app, &m, "4000000000003220", json!({})).await;
    assert_eq!(p["status"], "requires_customer_action", "{p}");
    let url = p["next_action"]["redirect_to_url"]["url"].as_str().unwrap();
    assert!(
        app.path_of(url).is_some(),
        "the buyer goes to payd's challenge page: {url}"
    );
    let id = p["payment_id"].as_str().unwrap();
    let intent = intent_of(&app, &m, id).await;
    let pi = ls.get(&format!("/v1/payment_intents/{intent}")).await;
    assert_eq!(pi["status"], "requires_action");
    assert_eq!(pi["next_action"]["type"], "use_stripe_sdk");
    // The buyer completes 3-D Secure at Stripe (Stripe.js in production).
    let (status, done) = ls
        .post(
            &format!("/v1/payment_intents/{intent}/_authenticate"),
            &[
                ("client_secret", pi["client_secret"].as_str().unwrap()),
                ("success", "true"),
            ],
        )
        .await;
    assert_eq!(
        (status, done["status"].as_str()),
        (200, Some("succeeded")),
        "{done}"
    );
    let p = wait_until(&app, &m, id, |p| p["status"] == "succeeded").await;
    assert_eq!(p["amount_captured"], 1000);
    let events = app.event_types(&m, id).await;
    assert_eq!(
        events.iter().filter(|e| *e == "payment_succeeded").count(),
        1,
        "{events:?}"
    );
}

#[actix_web::test]
async fn refunds_partial_and_full_and_a_capture_and_a_refund_made_at_stripe() {
    let Some((app, m, ls, account)) = setup().await else {
        return;
    };
    let p = pay(&app, &m, "4242424242424242", json!({})).await;
    let id = p["payment_id"].as_str().unwrap();
    let intent = intent_of(&app, &m, id).await;
    let partial = call(
        &app,
        &m,
        Method::POST,
        "/refunds",
        Some(json!({"payment_id": id, "amount": 300})),
    )
    .await;
    assert_eq!(partial["status"], "succeeded", "{partial}");
    let re = partial["processor_reference"].as_str().unwrap();
    assert!(re.starts_with("re_"), "{partial}");
    let rest = call(
        &app,
        &m,
        Method::POST,
        "/refunds",
        Some(json!({"payment_id": id})),
    )
    .await;
    assert_eq!(
        (rest["status"].as_str(), rest["amount"].as_i64()),
        (Some("succeeded"), Some(700)),
        "{rest}"
    );
    let at_stripe = ls
        .get(&format!("/v1/refunds?payment_intent={intent}&limit=100"))
        .await;
    let mut amounts: Vec<i64> = at_stripe["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["amount"].as_i64().unwrap())
        .collect();
    amounts.sort();
    assert_eq!(amounts, [300, 700]);
    let synced = force_sync(&app, &m, id).await;
    assert_eq!(
        (
            synced["status"].as_str(),
            synced["amount_refunded"].as_i64()
        ),
        (Some("succeeded"), Some(1000)),
        "{synced}"
    );
    let events = app
        .event_types(&m, partial["refund_id"].as_str().unwrap())
        .await;
    assert_eq!(events, ["refund_succeeded"]);

    // A capture made directly at Stripe (its dashboard) is seen by force_sync.
    let p = pay(
        &app,
        &m,
        "4242424242424242",
        json!({"capture_method": "manual"}),
    )
    .await;
    let id = p["payment_id"].as_str().unwrap();
    let intent = intent_of(&app, &m, id).await;
    let (status, _) = ls
        .post(&format!("/v1/payment_intents/{intent}/capture"), &[])
        .await;
    assert_eq!(status, 200);
    let synced = force_sync(&app, &m, id).await;
    assert_eq!(
        (
            synced["status"].as_str(),
            synced["amount_captured"].as_i64()
        ),
        (Some("succeeded"), Some(1000)),
        "{synced}"
    );

    // A refund made in Stripe's dashboard is recorded once, with refund_succeeded, from
    // Stripe's `charge.refunded` event (localstripe sends none: signed here as Stripe would)
    // however often it arrives, and a sync after it changes nothing. The event is answered at
    // once; the sync it prompts follows as a job.
    let (status, re) = ls
        .post(
            "/v1/refunds",
            &[("payment_intent", &intent), ("amount", "250")],
        )
        .await;
    assert_eq!(status, 200, "{re}");
    let event = json!({"id": "evt_refunded", "object": "event", "type": "charge.refunded",
        "created": chrono::Utc::now().timestamp(), "data": {"object": {"id": re["charge"], "object": "charge",
        "payment_intent": intent, "amount": 1000, "amount_refunded": 250, "refunded": false}}});
    let body = serde_json::to_vec(&event).unwrap();
    for _ in 0..2 {
        let (status, answer) = post_event(&app, &account, &event, &signature(&body)).await;
        assert_eq!(
            (status, answer["outcome"].as_str()),
            (200, Some("handled")),
            "{answer}"
        );
        let p = wait_until(&app, &m, id, |p| p["amount_refunded"] != 0).await;
        assert_eq!(p["amount_refunded"], 250, "{p}");
    }
    let synced = force_sync(&app, &m, id).await;
    assert_eq!(synced["amount_refunded"], 250, "{synced}");
    let refunds = call(
        &app,
        &m,
        Method::POST,
        "/refunds/list",
        Some(json!({"payment_id": id})),
    )
    .await;
    let refunds = refunds["data"].as_array().unwrap().clone();
    assert_eq!(refunds.len(), 1, "{refunds:?}");
    assert_eq!(refunds[0]["processor_reference"], re["id"]);
    let events = app
        .event_types(&m, refunds[0]["refund_id"].as_str().unwrap())
        .await;
    assert_eq!(events, ["refund_succeeded"]);
}

#[actix_web::test]
async fn a_saved_card_charges_off_session_on_one_stripe_customer_and_is_detached_when_deleted() {
    let Some((app, m, ls, _)) = setup().await else {
        return;
    };
    let c = call(
        &app,
        &m,
        Method::POST,
        "/customers",
        Some(json!({"name": "Ana"})),
    )
    .await;
    let cid = c["customer_id"].as_str().unwrap();
    let first = pay(
        &app,
        &m,
        "4242424242424242",
        json!({"customer_id": cid, "setup_future_usage": "off_session"}),
    )
    .await;
    assert_eq!(first["status"], "succeeded", "{first}");
    let mandate = first["mandate_id"].as_str().expect("a mandate");
    let charge = app
        .create_payment(
            &m,
            json!({"amount": 700, "currency": "USD", "confirm": true,
        "customer_id": cid, "mandate_id": mandate, "off_session": true}),
        )
        .await;
    assert_eq!(charge.status, 201, "{}", charge.body);
    assert_eq!(charge.body["status"], "succeeded", "{}", charge.body);
    let second = pay(
        &app,
        &m,
        "5555555555554444",
        json!({"customer_id": cid, "setup_future_usage": "on_session"}),
    )
    .await;
    assert_eq!(second["status"], "succeeded", "{second}");

    let intents = [
        intent_of(&app, &m, first["payment_id"].as_str().unwrap()).await,
        intent_of(&app, &m, charge.body["payment_id"].as_str().unwrap()).await,
        intent_of(&app, &m, second["payment_id"].as_str().unwrap()).await,
    ];
    let mut customers = Vec::new();
    for pi in &intents {
        customers.push(ls.get(&format!("/v1/payment_intents/{pi}")).await["customer"].clone());
    }
    assert!(
        customers[0].as_str().is_some_and(|c| c.starts_with("cus_")),
        "{customers:?}"
    );
    assert!(
        customers.iter().all(|c| *c == customers[0]),
        "one Stripe customer: {customers:?}"
    );
    let stripe_customer = customers[0].as_str().unwrap();
    let methods = ls
        .get(&format!(
            "/v1/payment_methods?customer={stripe_customer}&type=card"
        ))
        .await;
    assert_eq!(methods["data"].as_array().unwrap().len(), 2, "{methods}");

    let saved = call(
        &app,
        &m,
        Method::GET,
        &format!("/customers/{cid}/payment-methods"),
        None,
    )
    .await;
    let saved = saved["data"].as_array().unwrap().clone();
    assert_eq!(saved.len(), 2);
    for pm in &saved {
        let pm_id = pm["payment_method_id"].as_str().unwrap();
        call(
            &app,
            &m,
            Method::DELETE,
            &format!("/payment-methods/{pm_id}"),
            None,
        )
        .await;
    }
    let methods = ls
        .get(&format!(
            "/v1/payment_methods?customer={stripe_customer}&type=card"
        ))
        .await;
    assert_eq!(
        methods["data"].as_array().unwrap().len(),
        0,
        "detached: {methods}"
    );
}

fn dispute_event(id: &str, kind: &str, intent: &str, status: &str, created: i64) -> Value {
    json!({"id": id, "object": "event", "type": kind, "created": created, "api_version": "2022-11-15",
        "livemode": false, "data": {"object": {"id": "dp_payd1", "object": "dispute", "amount": 1000,
        "currency": "usd", "payment_intent": intent, "charge": "ch_payd1", "reason": "fraudulent",
        "status": status, "evidence_details": {"due_by": created + 7 * 86_400}}}})
}

#[actix_web::test]
async fn a_dispute_is_opened_and_lost_by_signed_events_sent_twice() {
    let Some((app, m, _ls, account)) = setup().await else {
        return;
    };
    let p = pay(&app, &m, "4242424242424242", json!({})).await;
    let id = p["payment_id"].as_str().unwrap();
    let intent = intent_of(&app, &m, id).await;
    let now = chrono::Utc::now().timestamp();
    let opened = dispute_event(
        "evt_dp1",
        "charge.dispute.created",
        &intent,
        "needs_response",
        now - 10,
    );
    let lost = dispute_event("evt_dp2", "charge.dispute.closed", &intent, "lost", now - 5);
    for event in [&opened, &opened, &lost, &lost, &opened] {
        deliver_event(&app, &account, event).await;
    }
    let disputes = call(
        &app,
        &m,
        Method::GET,
        &format!("/disputes/list?payment_id={id}"),
        None,
    )
    .await;
    let disputes = disputes["data"].as_array().unwrap().clone();
    assert_eq!(
        disputes.len(),
        1,
        "one Stripe dispute is one payd dispute: {disputes:?}"
    );
    assert_eq!(disputes[0]["status"], "lost", "{:?}", disputes[0]);
    let dispute_id = disputes[0]["dispute_id"].as_str().unwrap();
    let events = app.event_types(&m, dispute_id).await;
    assert_eq!(events, ["dispute_opened", "dispute_lost"]);

    // An event type payd does not follow is acknowledged and ignored.
    let other = json!({"id": "evt_x", "type": "customer.created", "created": now, "data": {"object": {"id": "cus_1"}}});
    let body = serde_json::to_vec(&other).unwrap();
    let (status, answer) = post_event(&app, &account, &other, &signature(&body)).await;
    assert_eq!((status, answer["outcome"].as_str()), (200, Some("ignored")));
}

/// Stripe's own dispute is answered at Stripe: submitting sends the explanation as its
/// evidence (docs.stripe.com/api/disputes/update), accepting closes it there
/// (docs.stripe.com/api/disputes/close), and what Stripe refuses (a dispute closed in its
/// Dashboard) changes nothing at payd. Files are not sent to Stripe: refused, naming the
/// field. A dispute's id may be `du_…` (docs.stripe.com/api/disputes/object) as well as
/// `dp_…`. Both answers were 409 `wallet_case`, pointing at a case route that answers 404.
#[actix_web::test]
async fn a_stripe_dispute_is_challenged_and_accepted_at_stripe() {
    let Some((app, m, ls, account)) = setup().await else {
        return;
    };
    let now = chrono::Utc::now().timestamp();
    let mut ids = Vec::new();
    for (n, case) in ["du_payd1", "dp_payd2", "du_payd3"].into_iter().enumerate() {
        let p = pay(&app, &m, "4242424242424242", json!({})).await;
        let id = p["payment_id"].as_str().unwrap().to_owned();
        let intent = intent_of(&app, &m, &id).await;
        let created = "charge.dispute.created";
        let mut event = dispute_event(
            &format!("evt_o{n}"),
            created,
            &intent,
            "needs_response",
            now,
        );
        event["data"]["object"]["id"] = json!(case);
        ls.hold_dispute(event["data"]["object"].clone());
        deliver_event(&app, &account, &event).await;
        let path = format!("/disputes/list?payment_id={id}");
        let list = call(&app, &m, Method::GET, &path, None).await;
        assert_eq!(list["data"][0]["case_id"], case, "{list}");
        ids.push(list["data"][0]["dispute_id"].as_str().unwrap().to_owned());
    }
    let file = format!("file_{}", "0".repeat(32));
    let attach = json!({"dispute_id": ids[0], "file_id": file, "evidence_type": "receipt"});
    let r = app
        .call(&m, Method::PUT, "/disputes/evidence", Some(attach))
        .await;
    assert_eq!(
        (r.status, r.code(), r.param()),
        (400, "processor_unsupported", Some("file_id")),
        "{}",
        r.body
    );

    let explanation = "Delivered on 3 May and signed for by the buyer.";
    let submit = json!({"dispute_id": ids[0], "explanation": explanation});
    let d = call(&app, &m, Method::POST, "/disputes/evidence", Some(submit)).await;
    assert_eq!(d["status"], "challenged", "{d}");
    let held = ls.dispute("du_payd1").unwrap();
    assert_eq!(
        (
            held["status"].as_str(),
            held["evidence"]["uncategorized_text"].as_str()
        ),
        (Some("under_review"), Some(explanation)),
        "{held}"
    );

    let accept = format!("/disputes/accept/{}", ids[1]);
    let d = call(&app, &m, Method::POST, &accept, None).await;
    assert_eq!(d["status"], "accepted", "{d}");
    assert_eq!(ls.dispute("dp_payd2").unwrap()["status"], "lost");

    // Closed in Stripe's Dashboard before payd heard of it: Stripe refuses, payd keeps it.
    let mut closed = ls.dispute("du_payd3").unwrap();
    closed["status"] = json!("lost");
    ls.hold_dispute(closed);
    let r = app
        .call(
            &m,
            Method::POST,
            &format!("/disputes/accept/{}", ids[2]),
            None,
        )
        .await;
    assert_eq!((r.status, r.code()), (502, "processor_error"), "{}", r.body);
    let d = call(
        &app,
        &m,
        Method::GET,
        &format!("/disputes/{}", ids[2]),
        None,
    )
    .await;
    assert_eq!(d["status"], "opened", "{d}");

    // Stripe's verdict follows as an event.
    let intent = ls.dispute("du_payd1").unwrap()["payment_intent"].clone();
    let mut won = dispute_event(
        "evt_w",
        "charge.dispute.closed",
        intent.as_str().unwrap(),
        "won",
        now + 1,
    );
    won["data"]["object"]["id"] = json!("du_payd1");
    deliver_event(&app, &account, &won).await;
    assert_eq!(
        app.event_types(&m, &ids[0]).await,
        ["dispute_opened", "dispute_challenged", "dispute_won"]
    );
    assert_eq!(
        app.event_types(&m, &ids[1]).await,
        ["dispute_opened", "dispute_accepted"]
    );
}

/// A dispute event acts only on the dispute of a payment its own account served: another
/// merchant's Stripe account, signing with its own secret, names the victim's case with the
/// victim's PaymentIntent, with the victim's payment in its metadata, or with a payment of its
/// own: the victim's dispute stays as it was, and no account may be named `sandbox` (the
/// implicit sandbox's payments are nobody's account's).
#[actix_web::test]
async fn a_dispute_event_never_reaches_another_merchants_dispute() {
    let Some((app, victim, ls, account)) = setup().await else {
        return;
    };
    let p = pay(&app, &victim, "4242424242424242", json!({})).await;
    let victim_payment = p["payment_id"].as_str().unwrap().to_owned();
    let victim_intent = intent_of(&app, &victim, &victim_payment).await;
    let now = chrono::Utc::now().timestamp();
    let opened = dispute_event(
        "evt_v1",
        "charge.dispute.created",
        &victim_intent,
        "needs_response",
        now - 60,
    );
    let body = serde_json::to_vec(&opened).unwrap();
    let (status, _) = post_event(&app, &account, &opened, &signature(&body)).await;
    assert_eq!(status, 200);

    let mallory = app.create_merchant("Mallory").await;
    const MALLORY_SECRET: &str = "whsec_mallory0000000000000000000000001";
    let processors = format!("/account/shops/{}/processors", mallory.profile_id);
    let stripe = |name: &str| {
        json!({"name": name, "kind": "stripe", "raw_card_data": true, "secret_key": SECRET_KEY,
            "webhook_secret": MALLORY_SECRET, "api_base": ls.base})
    };
    let r = app
        .post(&processors, &mallory.secret_key, stripe("sandbox"))
        .await;
    assert_eq!((r.status, r.param()), (400, Some("name")), "{}", r.body);
    let r = app
        .post(&processors, &mallory.secret_key, stripe("evil"))
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let evil = r.body["processor_account_id"].as_str().unwrap().to_owned();
    let own = pay(&app, &mallory, "4242424242424242", json!({})).await;
    let own_id = own["payment_id"].as_str().unwrap();
    let attempts = call(
        &app,
        &mallory,
        Method::GET,
        &format!("/payments/{own_id}/attempts"),
        None,
    )
    .await;
    assert_eq!(attempts["data"][0]["processor"], "evil", "{attempts}");
    let own_intent = intent_of(&app, &mallory, own_id).await;

    let lost_about = |intent: &str, metadata: Value| {
        let mut e = dispute_event("evt_m", "charge.dispute.closed", intent, "lost", now - 5);
        e["data"]["object"]["metadata"] = metadata;
        e
    };
    for event in [
        lost_about(&victim_intent, json!({})),
        lost_about(&victim_intent, json!({"payd_payment_id": victim_payment})),
        lost_about(&own_intent, json!({})),
    ] {
        let body = serde_json::to_vec(&event).unwrap();
        let signed = payd::processors::stripe::sign(MALLORY_SECRET, now, &body);
        let (status, answer) = post_event(&app, &evil, &event, &signed).await;
        assert_eq!(
            (status, answer["outcome"].as_str()),
            (200, Some("ignored")),
            "{answer}"
        );
    }
    let disputes = call(
        &app,
        &victim,
        Method::GET,
        &format!("/disputes/list?payment_id={victim_payment}"),
        None,
    )
    .await;
    assert_eq!(disputes["data"][0]["status"], "opened", "{disputes}");
    let theirs = call(&app, &mallory, Method::GET, "/disputes/list", None).await;
    assert_eq!(theirs["data"], json!([]), "{theirs}");
}

/// A Stripe account acts only within its own mode: a test-mode account of the same merchant
/// and shop, approved and signing with its own secret, names the live payment's
/// PaymentIntent, the live payment in its metadata, or a test payment of its own with the
/// live dispute's case: the live dispute stays as it was.
#[actix_web::test]
async fn a_test_accounts_events_never_reach_a_live_payment() {
    let Some(ls) = StrictStripe::start().await else {
        return;
    };
    let private = [("PAYD_PROCESSORS__ALLOW_PRIVATE_URLS", "true")];
    let (app, live, test) = common::production_merchant(&private).await;
    const LIVE_SECRET: &str = "whsec_live0000000000000000000000000001";
    const TEST_SECRET: &str = "whsec_test0000000000000000000000000001";
    let processors = format!("/account/shops/{}/processors", live.profile_id);
    let account = |m: &Merchant, name: &str, key: &str, secret: &str| {
        let body = json!({"name": name, "kind": "stripe", "raw_card_data": true, "secret_key": key,
            "webhook_secret": secret, "api_base": ls.base});
        let (app, processors, m) = (&app, processors.clone(), m.clone());
        async move {
            let r = app.post(&processors, &m.secret_key, body).await;
            assert_eq!(r.status, 201, "{}", r.body);
            let id = r.body["processor_account_id"].as_str().unwrap().to_owned();
            app.approve_processor(&id).await;
            id
        }
    };
    let live_account = account(
        &live,
        "live-stripe",
        "sk_live_payd000000000000000001",
        LIVE_SECRET,
    )
    .await;
    let test_account = account(&test, "test-stripe", SECRET_KEY, TEST_SECRET).await;

    let p = pay(&app, &live, "4242424242424242", json!({})).await;
    assert_eq!(p["test_mode"], false, "{p}");
    let live_payment = p["payment_id"].as_str().unwrap().to_owned();
    let live_intent = intent_of(&app, &live, &live_payment).await;
    let now = chrono::Utc::now().timestamp();
    let sign = |secret: &str, event: &Value| {
        payd::processors::stripe::sign(secret, now, &serde_json::to_vec(event).unwrap())
    };
    let opened = dispute_event(
        "evt_l1",
        "charge.dispute.created",
        &live_intent,
        "needs_response",
        now - 60,
    );
    let (status, answer) =
        post_event(&app, &live_account, &opened, &sign(LIVE_SECRET, &opened)).await;
    assert_eq!(
        (status, answer["outcome"].as_str()),
        (200, Some("handled")),
        "{answer}"
    );

    let t = pay(&app, &test, "4242424242424242", json!({})).await;
    let test_intent = intent_of(&app, &test, t["payment_id"].as_str().unwrap()).await;
    let lost_about = |intent: &str, metadata: Value| {
        let mut e = dispute_event("evt_t", "charge.dispute.closed", intent, "lost", now - 5);
        e["data"]["object"]["metadata"] = metadata;
        e
    };
    for event in [
        lost_about(&live_intent, json!({})),
        lost_about(&live_intent, json!({"payd_payment_id": live_payment})),
        lost_about(&test_intent, json!({})),
    ] {
        let (status, answer) =
            post_event(&app, &test_account, &event, &sign(TEST_SECRET, &event)).await;
        assert_eq!(
            (status, answer["outcome"].as_str()),
            (200, Some("ignored")),
            "{answer}"
        );
    }
    let path = format!("/disputes/list?payment_id={live_payment}");
    let disputes = call(&app, &live, Method::GET, &path, None).await;
    assert_eq!(disputes["data"][0]["status"], "opened", "{disputes}");
}

#[actix_web::test]
async fn bad_or_stale_signatures_are_refused_and_change_nothing() {
    let Some((app, m, _ls, account)) = setup().await else {
        return;
    };
    let p = pay(&app, &m, "4242424242424242", json!({})).await;
    let intent = intent_of(&app, &m, p["payment_id"].as_str().unwrap()).await;
    let now = chrono::Utc::now().timestamp();
    let event = dispute_event(
        "evt_bad",
        "charge.dispute.created",
        &intent,
        "needs_response",
        now,
    );
    let body = serde_json::to_vec(&event).unwrap();
    let stale = payd::processors::stripe::sign(WEBHOOK_SECRET, now - 600, &body);
    let forged = payd::processors::stripe::sign("whsec_someone_else", now, &body);
    for header in [stale.as_str(), forged.as_str(), "", "t=1,v1=zz"] {
        let (status, answer) = post_event(&app, &account, &event, header).await;
        assert_eq!(status, 400, "{header}: {answer}");
        assert_eq!(answer["error"]["param"], "Stripe-Signature");
    }
    let (status, _) = post_event(&app, "proc_unknown", &event, &signature(&body)).await;
    assert_eq!(status, 404);
    let disputes = call(&app, &m, Method::GET, "/disputes/list", None).await;
    assert_eq!(
        disputes["data"].as_array().unwrap().len(),
        0,
        "nothing changed"
    );
}

#[actix_web::test]
async fn keys_are_checked_against_the_shops_mode_and_secrets_never_leave_sealed() {
    let Some((app, m, ls, account)) = setup().await else {
        return;
    };
    let add = |body: Value| {
        let app = &app;
        let m = &m;
        async move {
            app.post(
                &format!("/account/shops/{}/processors", m.profile_id),
                &m.secret_key,
                body,
            )
            .await
        }
    };
    for (key, param) in [
        ("sk_live_0000000000000000001", "secret_key"),
        ("pk_test_1", "secret_key"),
        ("", "secret_key"),
    ] {
        let r = add(
            json!({"name": "live", "kind": "stripe", "raw_card_data": true, "secret_key": key,
            "webhook_secret": WEBHOOK_SECRET, "api_base": ls.base}),
        )
        .await;
        assert_eq!(
            (r.status, r.param()),
            (400, Some(param)),
            "{key}: {}",
            r.body
        );
    }
    // A webhook secret may come later (PATCH), but one sent is checked.
    let r = add(
        json!({"name": "nohook", "kind": "stripe", "raw_card_data": true, "secret_key": SECRET_KEY,
            "webhook_secret": "whsec_short", "api_base": ls.base}),
    )
    .await;
    assert_eq!(
        (r.status, r.param()),
        (400, Some("webhook_secret")),
        "{}",
        r.body
    );
    for base in [
        "ftp://127.0.0.1:1",
        "http://127.0.0.1:1/v1",
        "http://example.com",
    ] {
        let r = add(
            json!({"name": "base", "kind": "stripe", "raw_card_data": true, "secret_key": SECRET_KEY,
            "webhook_secret": WEBHOOK_SECRET, "api_base": base}),
        )
        .await;
        assert_eq!(
            (r.status, r.param()),
            (400, Some("api_base")),
            "{base}: {}",
            r.body
        );
    }
    let listed = app
        .get(
            &format!("/account/shops/{}/processors", m.profile_id),
            &m.secret_key,
        )
        .await;
    let text = listed.raw.iter().map(|b| *b as char).collect::<String>();
    assert!(
        text.contains(&account) && text.contains("\"stripe\""),
        "{text}"
    );
    assert!(
        !text.contains(&SECRET_KEY[8..]) && !text.contains(&WEBHOOK_SECRET[6..]),
        "{text}"
    );

    let stored = payd_entity::processor_account::Entity::find_by_id(account.as_str());
    use sea_orm::EntityTrait;
    let row = stored.one(app.state.db.conn()).await.unwrap().unwrap();
    let config = row.config.unwrap_or_default();
    assert!(config.starts_with("sealed:v1:"), "{config}");
    assert!(!config.contains(&SECRET_KEY[8..]) && !config.contains(&WEBHOOK_SECRET[6..]));
    if let Some(file) = app
        .db
        .url
        .strip_prefix("sqlite://")
        .and_then(|u| u.split('?').next())
    {
        for path in [file.to_owned(), format!("{file}-wal")] {
            let bytes = std::fs::read(&path).unwrap_or_default();
            let haystack = String::from_utf8_lossy(&bytes);
            assert!(
                !haystack.contains(&SECRET_KEY[8..]),
                "{path} holds the secret key"
            );
            assert!(
                !haystack.contains(&WEBHOOK_SECRET[6..]),
                "{path} holds the webhook secret"
            );
        }
    }
}

#[actix_web::test]
async fn a_refused_key_fails_the_attempt_naming_the_account() {
    let Some(ls) = LocalStripe::start().await else {
        return;
    };
    let app = spawn_with(Arc::new(TestDb::new().await), &[]).await;
    let m = app.create_merchant("Acme").await;
    // localstripe takes only `sk_` keys: a restricted key is refused with a 401.
    let r = app
        .post(
            &format!("/account/shops/{}/processors", m.profile_id),
            &m.secret_key,
            json!({"name": "restricted", "kind": "stripe", "raw_card_data": true, "secret_key": "rk_test_payd000000000001",
                "webhook_secret": WEBHOOK_SECRET, "api_base": ls.base}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let account = r.body["processor_account_id"].as_str().unwrap().to_owned();
    let p = pay(&app, &m, "4242424242424242", json!({})).await;
    assert_eq!(p["status"], "declined", "{p}");
    assert_eq!(p["last_error"]["code"], "processor_authentication_failed");
    assert!(
        p["last_error"]["message"]
            .as_str()
            .unwrap()
            .contains(&account),
        "{p}"
    );
}

/// The answer to the PaymentIntent's creation arrives after payd's timeout: the payment stays
/// `processing` (never a decline on a guess), and its reconciliation sends the same request
/// under the same key, which Stripe answers with its first answer: charged once.
#[actix_web::test]
async fn an_authorization_whose_answer_was_late_is_recovered_by_its_key_and_charged_once() {
    let Some(ls) = StrictStripe::start().await else {
        return;
    };
    let app = spawn_with(Arc::new(TestDb::new().await), &[]).await;
    let m = app.create_merchant("Acme").await;
    connect_via(&app, &m, &ls, &ls.base, json!({"timeout_ms": 500})).await;
    ls.inject(Fault::LateAnswer {
        path: "/v1/payment_intents".into(),
        delay: Duration::from_millis(1_500),
    });
    let p = pay(&app, &m, "4242424242424242", json!({})).await;
    assert_eq!(p["status"], "processing", "never failed on a guess: {p}");
    let id = p["payment_id"].as_str().unwrap();
    let synced = force_sync(&app, &m, id).await;
    assert_eq!(
        (
            synced["status"].as_str(),
            synced["amount_captured"].as_i64()
        ),
        (Some("succeeded"), Some(1000)),
        "{synced}"
    );
    let intent = intent_of(&app, &m, id).await;
    let pis = ls.get("/v1/payment_intents?limit=100").await;
    let ours: Vec<&Value> = pis["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|pi| pi["metadata"]["payd_payment_id"] == id)
        .collect();
    assert_eq!(ours.len(), 1, "charged once: {ours:?}");
    assert_eq!(ours[0]["id"], intent.as_str());
    // A refund through the same Stripe: every POST carried its key and the pinned version.
    let refund = call(
        &app,
        &m,
        Method::POST,
        "/refunds",
        Some(json!({"payment_id": id, "amount": 100})),
    )
    .await;
    assert_eq!(refund["status"], "succeeded", "{refund}");
    let posts: Vec<_> = ls
        .seen()
        .into_iter()
        .filter(|s| s.method == "POST")
        .collect();
    assert!(posts.len() >= 4, "{posts:?}");
    assert!(
        posts.iter().all(|p| p.key.is_some()),
        "every POST is keyed: {posts:?}"
    );
}

//! Stripe as it really behaves: each test holds payd to a rule of Stripe's documentation that
//! localstripe alone does not enforce, through the strict layer (`common::strict_stripe`) in
//! front of it. The page each rule follows is named beside it.

use crate::common;

use std::{sync::Arc, time::Duration};

use actix_web::http::Method;
use common::{
    card, spawn_with,
    strict_app::{get, intent_of, intents_of, pay, post, setup},
    strict_stripe::{Fault, StrictStripe},
    stripe::{connect_via, deliver_event, post_event, signature, WEBHOOK_SECRET},
    Merchant, TestApp, TestDb,
};
use serde_json::{json, Value};

async fn attempts(app: &TestApp, m: &Merchant, id: &str) -> Vec<Value> {
    get(app, m, &format!("/payments/{id}/attempts")).await["data"]
        .as_array()
        .unwrap()
        .clone()
}

/// docs.stripe.com/error-low-level: the result of a 500 is indeterminate; and
/// docs.stripe.com/idempotency: Stripe answers the same key with its first answer, 500
/// included. Stripe charged and answered 500: the payment stays `processing` (no decline, no
/// fallback, no second attempt), the buyer cannot confirm again, and the reconciliation finds
/// the charge: one PaymentIntent, one attempt.
#[actix_web::test]
async fn a_500_after_the_charge_is_never_a_decline_and_charges_once() {
    let Some((app, m, ls, _)) = setup().await else {
        return;
    };
    ls.inject(Fault::ServerErrorAfter {
        path: "/v1/payment_intents".into(),
    });
    let p = pay(&app, &m, json!({})).await;
    assert_eq!(p.status, 201, "{}", p.body);
    assert_eq!(
        p.body["status"], "processing",
        "never a decline: {}",
        p.body
    );
    let id = p.body["payment_id"].as_str().unwrap();
    let again = post(&app, &m, &format!("/payments/{id}/confirm"), json!({})).await;
    assert!(again.status >= 400 && again.status < 500, "{}", again.body);
    let synced = get(&app, &m, &format!("/payments/{id}?force_sync=true")).await;
    assert_eq!(
        (
            synced["status"].as_str(),
            synced["amount_captured"].as_i64()
        ),
        (Some("succeeded"), Some(1000)),
        "{synced}"
    );
    let intents = intents_of(&ls, id).await;
    assert_eq!(intents.len(), 1, "charged once: {intents:?}");
    let tried = attempts(&app, &m, id).await;
    assert_eq!(tried.len(), 1, "{tried:?}");
    assert_eq!(tried[0]["processor_reference"], intents[0]["id"]);
    // The recovery sent the same request under the same key (Stripe answered its stored 500),
    // then found the PaymentIntent by its metadata among those made since.
    let creates: Vec<_> = ls
        .seen()
        .into_iter()
        .filter(|s| s.method == "POST" && s.path == "/v1/payment_intents")
        .collect();
    assert_eq!(creates.len(), 2, "{creates:?}");
    assert_eq!(creates[0].key, creates[1].key);
    assert!(ls.seen().iter().any(|s| s.path == "/v1/payment_intents"
        && s.method == "GET"
        && s.params.iter().any(|(k, _)| k == "created[gte]")));
}

/// docs.stripe.com/rate-limits and docs.stripe.com/error-low-level ("Retries"): 429 did
/// nothing and is retried with backoff, unless `Stripe-Should-Retry: false`.
#[actix_web::test]
async fn a_429_is_retried_unless_stripe_says_not_to() {
    let Some((app, m, ls, _)) = setup().await else {
        return;
    };
    ls.inject(Fault::RateLimited {
        path: "/v1/payment_intents".into(),
        times: 2,
        should_retry: None,
    });
    let p = pay(&app, &m, json!({})).await;
    assert_eq!(p.body["status"], "succeeded", "{}", p.body);
    assert_eq!(ls.posts_to("/v1/payment_intents"), 3);

    ls.inject(Fault::RateLimited {
        path: "/v1/payment_intents".into(),
        times: 1,
        should_retry: Some(false),
    });
    let p = pay(&app, &m, json!({})).await;
    assert_eq!(
        (
            p.body["status"].as_str(),
            p.body["last_error"]["code"].as_str()
        ),
        (Some("declined"), Some("processor_unavailable")),
        "Stripe did nothing: a decline routing may pass on: {}",
        p.body
    );
    assert_eq!(ls.posts_to("/v1/payment_intents"), 4, "not sent again");
    let id = p.body["payment_id"].as_str().unwrap();
    assert!(intents_of(&ls, id).await.is_empty());
}

/// docs.stripe.com/currencies: amounts go out in Stripe's unit, which is not always ISO
/// 4217's; an amount Stripe cannot take is refused (400 naming `amount`), never rounded.
#[actix_web::test]
async fn amounts_cross_in_stripes_units_both_ways() {
    let Some((app, m, ls, _)) = setup().await else {
        return;
    };
    // ISK: zero-decimal in ISO 4217, two-decimal (`00`) at Stripe.
    let p = pay(&app, &m, json!({"amount": 5000, "currency": "ISK"})).await;
    assert_eq!(p.body["status"], "succeeded", "{}", p.body);
    let id = p.body["payment_id"].as_str().unwrap();
    let pi = &intents_of(&ls, id).await[0];
    assert_eq!(
        (pi["amount"].as_i64(), pi["currency"].as_str()),
        (Some(500_000), Some("isk"))
    );
    let synced = get(&app, &m, &format!("/payments/{id}?force_sync=true")).await;
    assert_eq!(
        synced["amount_captured"], 5000,
        "read back in payd's unit: {synced}"
    );
    let r = post(
        &app,
        &m,
        "/refunds",
        json!({"payment_id": id, "amount": 1200}),
    )
    .await;
    assert_eq!(r.body["status"], "succeeded", "{}", r.body);
    let refunds = ls
        .get(&format!(
            "/v1/refunds?payment_intent={}",
            pi["id"].as_str().unwrap()
        ))
        .await;
    let amounts: Vec<i64> = refunds["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["payment_intent"] == pi["id"])
        .map(|r| r["amount"].as_i64().unwrap())
        .collect();
    assert_eq!(amounts, [120_000]);
    let synced = get(&app, &m, &format!("/payments/{id}?force_sync=true")).await;
    assert_eq!(synced["amount_refunded"], 1200, "{synced}");

    // MGA: two-decimal in ISO 4217, zero-decimal at Stripe.
    let p = pay(&app, &m, json!({"amount": 10_000, "currency": "MGA"})).await;
    assert_eq!(p.body["status"], "succeeded", "{}", p.body);
    let pi = &intents_of(&ls, p.body["payment_id"].as_str().unwrap()).await[0];
    assert_eq!(pi["amount"], 100, "MGA 100.00 is 100 Ar");
    for (amount, currency) in [(10_050, "MGA"), (1_005, "KWD")] {
        let p = pay(&app, &m, json!({"amount": amount, "currency": currency})).await;
        assert_eq!(
            (p.status, p.body["error"]["param"].as_str()),
            (400, Some("amount")),
            "{currency} {amount}: {}",
            p.body
        );
    }
    let p = pay(&app, &m, json!({"amount": 1_010, "currency": "KWD"})).await;
    assert_eq!(p.body["status"], "succeeded", "{}", p.body);
    // A refund Stripe cannot take is refused too.
    let id = p.body["payment_id"].as_str().unwrap();
    let r = post(&app, &m, "/refunds", json!({"payment_id": id, "amount": 5})).await;
    assert_eq!(
        (r.status, r.body["error"]["param"].as_str()),
        (400, Some("amount")),
        "{}",
        r.body
    );
}

/// docs.stripe.com/payments/multicapture: without multicapture Stripe releases what a partial
/// capture leaves, so a capture that is not final is refused for a Stripe account; and
/// docs.stripe.com/api/payment_intents/cancel: a succeeded PaymentIntent cannot be canceled, so
/// a cancel after capture is refused (409: refund instead).
#[actix_web::test]
async fn captures_and_cancels_stripe_cannot_carry_out_are_refused() {
    let Some((app, m, ls, _)) = setup().await else {
        return;
    };
    let p = pay(&app, &m, json!({"capture_method": "manual"})).await;
    let id = p.body["payment_id"].as_str().unwrap();
    let partial = post(
        &app,
        &m,
        &format!("/payments/{id}/capture"),
        json!({"amount": 400, "final_capture": false}),
    )
    .await;
    assert_eq!(
        (partial.status, partial.body["error"]["param"].as_str()),
        (400, Some("final_capture")),
        "{}",
        partial.body
    );
    let captured = post(
        &app,
        &m,
        &format!("/payments/{id}/capture"),
        json!({"amount": 400}),
    )
    .await;
    assert_eq!(
        captured.body["status"], "partially_captured",
        "{}",
        captured.body
    );

    let p = pay(&app, &m, json!({})).await;
    let id = p.body["payment_id"].as_str().unwrap();
    let cancel = post(&app, &m, &format!("/payments/{id}/cancel"), json!({})).await;
    assert_eq!(
        (cancel.status, cancel.body["error"]["code"].as_str()),
        (409, Some("invalid_state")),
        "{}",
        cancel.body
    );
    assert!(cancel.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains("refund"));
    assert_eq!(intents_of(&ls, id).await[0]["status"], "succeeded");
    assert_eq!(
        ls.posts_to(&format!(
            "/v1/payment_intents/{}/cancel",
            intents_of(&ls, id).await[0]["id"].as_str().unwrap()
        )),
        0
    );
}

/// docs.stripe.com/testing#declined-payments and docs.stripe.com/api/errors: a declined
/// confirm is a 402 naming the PaymentIntent Stripe made; the attempt keeps it.
#[actix_web::test]
async fn a_decline_keeps_the_payment_intent_stripe_made() {
    let Some((app, m, ls, _)) = setup().await else {
        return;
    };
    let p = pay(
        &app,
        &m,
        json!({"payment_method_data": card("4000000000009995")}),
    )
    .await;
    assert_eq!(
        (
            p.body["status"].as_str(),
            p.body["last_error"]["code"].as_str()
        ),
        (Some("declined"), Some("insufficient_funds")),
        "{}",
        p.body
    );
    let id = p.body["payment_id"].as_str().unwrap();
    let intents = intents_of(&ls, id).await;
    assert_eq!(intents.len(), 1);
    assert_eq!(
        attempts(&app, &m, id).await[0]["processor_reference"],
        intents[0]["id"]
    );
}

/// docs.stripe.com/refunds#failed-refunds: a refund can fail after it succeeded (a closed
/// card). The sync makes it `failed`, gives its balance back and announces `refund_failed`.
#[actix_web::test]
async fn a_refund_that_fails_after_it_succeeded_gives_its_balance_back() {
    let Some((app, m, ls, _)) = setup().await else {
        return;
    };
    let p = pay(&app, &m, json!({})).await;
    let id = p.body["payment_id"].as_str().unwrap();
    let r = post(
        &app,
        &m,
        "/refunds",
        json!({"payment_id": id, "amount": 300}),
    )
    .await;
    assert_eq!(r.body["status"], "succeeded", "{}", r.body);
    let refund_id = r.body["refund_id"].as_str().unwrap();
    let re = r.body["processor_reference"].as_str().unwrap();
    assert!(re.starts_with("re_"), "{}", r.body);
    ls.fail_refund(re, "expired_or_canceled_card");
    let synced = get(&app, &m, &format!("/payments/{id}?force_sync=true")).await;
    assert_eq!(synced["amount_refunded"], 0, "{synced}");
    let refund = get(&app, &m, &format!("/refunds/{refund_id}")).await;
    assert_eq!(
        (refund["status"].as_str(), refund["failure_reason"].as_str()),
        (Some("failed"), Some("expired_or_canceled_card")),
        "{refund}"
    );
    assert_eq!(
        app.event_types(&m, refund_id).await,
        ["refund_succeeded", "refund_failed"]
    );
    // Its balance is refundable again.
    let again = post(
        &app,
        &m,
        "/refunds",
        json!({"payment_id": id, "amount": 1000}),
    )
    .await;
    assert_eq!(again.body["status"], "succeeded", "{}", again.body);
}

/// An authorization Stripe canceled itself (7 days unused, or its dashboard:
/// docs.stripe.com/payments/place-a-hold-on-a-payment-method) is `cancelled` at payd, never
/// `conflicted`; and a void of it is done, though Stripe refuses to cancel it again.
#[actix_web::test]
async fn an_authorization_canceled_at_stripe_is_cancelled_not_conflicted() {
    let Some((app, m, ls, _)) = setup().await else {
        return;
    };
    let p = pay(&app, &m, json!({"capture_method": "manual"})).await;
    let id = p.body["payment_id"].as_str().unwrap();
    let pi = intent_of(&ls, id).await;
    let (status, _) = ls
        .post(&format!("/v1/payment_intents/{pi}/cancel"), &[])
        .await;
    assert_eq!(status, 200);
    let synced = get(&app, &m, &format!("/payments/{id}?force_sync=true")).await;
    assert_eq!(synced["status"], "cancelled", "{synced}");

    // Canceled at Stripe and not yet synced: payd's own cancel (or the expiry's void), which
    // Stripe refuses for a canceled PaymentIntent, is done.
    let p = pay(&app, &m, json!({"capture_method": "manual"})).await;
    let id = p.body["payment_id"].as_str().unwrap();
    let pi = intent_of(&ls, id).await;
    let (status, _) = ls
        .post(&format!("/v1/payment_intents/{pi}/cancel"), &[])
        .await;
    assert_eq!(status, 200);
    let cancelled = post(&app, &m, &format!("/payments/{id}/cancel"), json!({})).await;
    assert_eq!(
        (cancelled.status, cancelled.body["status"].as_str()),
        (200, Some("cancelled")),
        "{}",
        cancelled.body
    );
}

fn dispute_event(id: &str, intent: &str, dispute: &str, status: &str, created: i64) -> Value {
    json!({"id": id, "object": "event", "type": "charge.dispute.updated", "created": created,
        "api_version": "2022-11-15", "livemode": false, "data": {"object": {"id": dispute,
        "object": "dispute", "amount": 1000, "currency": "usd", "payment_intent": intent,
        "charge": "ch_payd1", "reason": "fraudulent", "status": status,
        "evidence_details": {"due_by": created + 7 * 86_400}}}})
}

/// docs.stripe.com/api/disputes/object (`status`): `prevented` and `charge_refunded` end a
/// dispute without a chargeback (`cancelled`); a status payd does not know is never read as
/// `opened`; two events of the same second apply in the dispute's own order.
#[actix_web::test]
async fn dispute_statuses_follow_stripes_and_an_unknown_one_opens_nothing() {
    let Some((app, m, ls, account)) = setup().await else {
        return;
    };
    let now = chrono::Utc::now().timestamp();
    let send = async |event: &Value| {
        let body = serde_json::to_vec(event).unwrap();
        post_event(&app, &account, event, &signature(&body)).await
    };
    let disputes_of = async |id: &str| {
        get(&app, &m, &format!("/disputes/list?payment_id={id}")).await["data"]
            .as_array()
            .unwrap()
            .clone()
    };

    let p = pay(&app, &m, json!({})).await;
    let id = p.body["payment_id"].as_str().unwrap();
    let pi = intent_of(&ls, id).await;
    let (status, answer) = send(&dispute_event(
        "evt_u",
        &pi,
        "dp_u",
        "some_future_status",
        now,
    ))
    .await;
    assert_eq!(
        (status, answer["outcome"].as_str()),
        (200, Some("ignored")),
        "{answer}"
    );
    assert!(
        disputes_of(id).await.is_empty(),
        "an unknown status opens nothing"
    );

    // The same second: under review arrives before needs response; it stays challenged.
    for (evt, status) in [("evt_1", "under_review"), ("evt_2", "needs_response")] {
        let (code, answer) = send(&dispute_event(evt, &pi, "dp_1", status, now)).await;
        assert_eq!(code, 200, "{answer}");
    }
    let d = disputes_of(id).await;
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0]["status"], "challenged", "{d:?}");

    let p = pay(&app, &m, json!({})).await;
    let id = p.body["payment_id"].as_str().unwrap();
    let pi = intent_of(&ls, id).await;
    send(&dispute_event(
        "evt_3",
        &pi,
        "dp_2",
        "needs_response",
        now - 5,
    ))
    .await;
    let (code, _) = send(&dispute_event("evt_4", &pi, "dp_2", "prevented", now)).await;
    assert_eq!(code, 200);
    let d = disputes_of(id).await;
    assert_eq!(d[0]["status"], "cancelled", "prevented: {d:?}");
    // Refunds are no longer blocked by it.
    let r = post(
        &app,
        &m,
        "/refunds",
        json!({"payment_id": id, "amount": 100}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
}

/// docs.stripe.com/webhooks ("Respond quickly", "Prevent replay attacks"): an event is
/// answered 200 at once, even while Stripe's API cannot be asked; the sync it prompts runs
/// after, as a job. A timestamp ahead of payd's clock is accepted (only an old one is a
/// replay).
#[actix_web::test]
async fn an_event_is_answered_at_once_and_its_sync_runs_after() {
    let Some((app, m, ls, account)) = setup().await else {
        return;
    };
    let p = pay(&app, &m, json!({"capture_method": "manual"})).await;
    let id = p.body["payment_id"].as_str().unwrap();
    let pi = intent_of(&ls, id).await;
    let (status, _) = ls
        .post(&format!("/v1/payment_intents/{pi}/capture"), &[])
        .await;
    assert_eq!(status, 200);
    ls.inject(Fault::RateLimited {
        path: format!("/v1/payment_intents/{pi}"),
        times: 1,
        should_retry: Some(false),
    });
    let event = json!({"id": "evt_pi", "object": "event", "type": "payment_intent.succeeded",
        "created": chrono::Utc::now().timestamp(), "data": {"object": {"id": pi, "object": "payment_intent",
        "metadata": {"payd_payment_id": id}}}});
    let body = serde_json::to_vec(&event).unwrap();
    let ahead = payd::processors::stripe::sign(
        WEBHOOK_SECRET,
        chrono::Utc::now().timestamp() + 3_600,
        &body,
    );
    let (status, answer) = post_event(&app, &account, &event, &ahead).await;
    assert_eq!(
        (status, answer["outcome"].as_str()),
        (200, Some("handled")),
        "{answer}"
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let p = get(&app, &m, &format!("/payments/{id}")).await;
        if p["status"] == "succeeded" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "never synced: {p}");
        actix_web::rt::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Raw card numbers reach Stripe only from an account enabled for them (docs.stripe.com/testing,
/// "raw card data APIs"; support.stripe.com/questions/enabling-access-to-raw-card-data-apis).
/// An account the merchant did not mark `raw_card_data` refuses a card typed in with 400 naming
/// it, before anything is sent; one marked but not approved at Stripe fails the attempt with
/// `processor_configuration` (the merchant's to fix), not a card's decline, and uses up none of
/// the payment's attempts (three declines fail a payment); nothing is charged.
#[actix_web::test]
async fn raw_card_numbers_are_refused_for_an_account_not_enabled_for_them() {
    let Some(ls) = StrictStripe::start().await else {
        return;
    };
    let app = spawn_with(Arc::new(TestDb::new().await), &[]).await;
    let m = app.create_merchant("Acme").await;
    connect_via(&app, &m, &ls, &ls.base, json!({"raw_card_data": false})).await;
    let p = pay(&app, &m, json!({})).await;
    assert_eq!(
        (p.status, p.body["error"]["param"].as_str()),
        (400, Some("payment_method_data.card")),
        "{}",
        p.body
    );
    assert!(ls.seen().iter().all(|s| s.method != "POST"), "nothing sent");

    let (app, m, ls, _) = setup().await.unwrap();
    ls.strict
        .raw_cards
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let p = pay(&app, &m, json!({})).await;
    assert_eq!(
        (
            p.body["status"].as_str(),
            p.body["last_error"]["code"].as_str()
        ),
        (Some("declined"), Some("processor_configuration")),
        "{}",
        p.body
    );
    let id = p.body["payment_id"].as_str().unwrap();
    for _ in 0..3 {
        let again = post(
            &app,
            &m,
            &format!("/payments/{id}/confirm"),
            json!({"payment_method_data": card("4242424242424242")}),
        )
        .await;
        assert_eq!(again.body["status"], "declined", "{}", again.body);
    }
    assert_eq!(attempts(&app, &m, id).await.len(), 4);
    assert_eq!(ls.posts_to("/v1/payment_intents"), 0);
}

/// Stripe's default timeout is at least 30 seconds (Stripe's libraries wait 80).
#[actix_web::test]
async fn a_stripe_account_waits_at_least_thirty_seconds_by_default() {
    let Some(ls) = StrictStripe::start().await else {
        return;
    };
    let app = spawn_with(
        Arc::new(TestDb::new().await),
        &[("PAYD_PROCESSORS__DEFAULT_TIMEOUT_MS", "2000")],
    )
    .await;
    let m = app.create_merchant("Acme").await;
    let account = connect_via(&app, &m, &ls, &ls.base, json!({})).await;
    let seen = app
        .get(&format!("/admin/processors/{account}"), common::ADMIN_KEY)
        .await;
    assert_eq!(
        seen.body["connection"]["timeout_ms"], 30_000,
        "{}",
        seen.body
    );
    let explicit = app
        .post(
            &format!("/account/shops/{}/processors", m.profile_id),
            &m.secret_key,
            json!({"name": "quick", "kind": "stripe", "secret_key": common::stripe::SECRET_KEY,
                "webhook_secret": WEBHOOK_SECRET, "api_base": ls.base, "timeout_ms": 5000}),
        )
        .await;
    let id = explicit.body["processor_account_id"].as_str().unwrap();
    let seen = app
        .get(&format!("/admin/processors/{id}"), common::ADMIN_KEY)
        .await;
    assert_eq!(seen.body["connection"]["timeout_ms"], 5000, "{}", seen.body);
}

/// Every parameter payd sends exists in Stripe's published API for the pinned
/// `Stripe-Version` (the strict layer refuses any other, as Stripe does: every Stripe test
/// passes through it), and every request pins that version. The check itself refuses a
/// parameter Stripe does not know.
#[actix_web::test]
async fn every_parameter_payd_sends_is_in_stripes_published_api() {
    let Some((app, m, ls, _)) = setup().await else {
        return;
    };
    if !ls.checks_parameters() {
        return;
    }
    let mut named = card("4242424242424242");
    named["card"]["holder_name"] = json!("Ana Lima");
    let p = pay(
        &app,
        &m,
        json!({"capture_method": "manual", "payment_method_data": named}),
    )
    .await;
    let id = p.body["payment_id"].as_str().unwrap();
    let captured = post(
        &app,
        &m,
        &format!("/payments/{id}/capture"),
        json!({"amount": 600}),
    )
    .await;
    assert_eq!(captured.status, 200, "{}", captured.body);
    let r = post(
        &app,
        &m,
        "/refunds",
        json!({"payment_id": id, "amount": 100}),
    )
    .await;
    assert_eq!(r.body["status"], "succeeded", "{}", r.body);
    get(&app, &m, &format!("/payments/{id}?force_sync=true")).await;
    let seen = ls.seen();
    assert!(seen.len() >= 5, "{seen:?}");
    // The cardholder's name goes with the card, for Stripe's fraud screening.
    assert!(seen.iter().any(|s| s.path == "/v1/payment_methods"
        && s.params
            .contains(&("billing_details[name]".into(), "Ana Lima".into()))));
    assert!(
        seen.iter()
            .all(|s| s.version.as_deref() == Some(payd::processors::stripe::API_VERSION)),
        "{seen:?}"
    );
    // The check is not vacuous: a parameter Stripe does not take is refused.
    let res = common::client()
        .post(format!("{}/v1/payment_intents", ls.base))
        .bearer_auth(common::stripe::SECRET_KEY)
        .send_form(&[
            ("amount", "100"),
            ("currency", "usd"),
            ("receipt_mail", "x@example.com"),
        ])
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 400);
    let res = common::client()
        .get(format!("{}/v1/refunds?payment_intnt=pi_1", ls.base))
        .bearer_auth(common::stripe::SECRET_KEY)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status().as_u16(), 400);
}

/// Stripe made the refund and answered 500 (docs.stripe.com/error-low-level): the refund stays
/// `pending`; the payment's sync finds it among the PaymentIntent's refunds by its
/// `metadata[payd_refund_id]` and settles it from there, never POSTing it again (after 24
/// hours Stripe forgets the key and would refund twice).
#[actix_web::test]
async fn a_refund_whose_answer_was_lost_settles_from_stripes_list_not_a_second_post() {
    let Some((app, m, ls, _)) = setup().await else {
        return;
    };
    let p = pay(&app, &m, json!({})).await;
    let id = p.body["payment_id"].as_str().unwrap();
    ls.inject(Fault::ServerErrorAfter {
        path: "/v1/refunds".into(),
    });
    let r = post(
        &app,
        &m,
        "/refunds",
        json!({"payment_id": id, "amount": 250}),
    )
    .await;
    assert_eq!(r.body["status"], "pending", "{}", r.body);
    let refund_id = r.body["refund_id"].as_str().unwrap();
    let synced = get(&app, &m, &format!("/payments/{id}?force_sync=true")).await;
    assert_eq!(synced["amount_refunded"], 250, "{synced}");
    let refund = get(&app, &m, &format!("/refunds/{refund_id}")).await;
    assert_eq!(refund["status"], "succeeded", "{refund}");
    assert!(
        refund["processor_reference"]
            .as_str()
            .unwrap()
            .starts_with("re_"),
        "{refund}"
    );
    assert_eq!(app.event_types(&m, refund_id).await, ["refund_succeeded"]);
    assert_eq!(ls.posts_to("/v1/refunds"), 1, "never POSTed again");
}

/// Several Stripe disputes on one payment are several payd disputes, and a dispute whose
/// events never arrived is found by the payment's `force_sync`, which lists the
/// PaymentIntent's disputes (docs.stripe.com/api/disputes/list, `payment_intent`).
#[actix_web::test]
async fn several_disputes_are_several_and_a_missed_one_is_found_by_a_sync() {
    let Some((app, m, ls, account)) = setup().await else {
        return;
    };
    let p = pay(&app, &m, json!({})).await;
    let id = p.body["payment_id"].as_str().unwrap();
    let pi = intent_of(&ls, id).await;
    let now = chrono::Utc::now().timestamp();
    let first = dispute_event("evt_a", &pi, "dp_first", "warning_needs_response", now);
    deliver_event(&app, &account, &first).await;

    // Stripe holds a second dispute whose events payd never got.
    let mut missed =
        dispute_event("evt_b", &pi, "dp_missed", "under_review", now)["data"]["object"].clone();
    missed["amount"] = json!(400);
    ls.hold_dispute(missed);
    get(&app, &m, &format!("/payments/{id}?force_sync=true")).await;
    get(&app, &m, &format!("/payments/{id}?force_sync=true")).await;
    let disputes = get(&app, &m, &format!("/disputes/list?payment_id={id}")).await["data"]
        .as_array()
        .unwrap()
        .clone();
    let seen: Vec<(Option<&str>, Option<&str>, Option<i64>)> = disputes
        .iter()
        .map(|d| {
            (
                d["stage"].as_str(),
                d["status"].as_str(),
                d["amount"].as_i64(),
            )
        })
        .collect();
    assert_eq!(
        seen,
        [
            (Some("dispute"), Some("challenged"), Some(400)),
            (Some("pre_dispute"), Some("opened"), Some(1000)),
        ],
        "newest first: {disputes:?}"
    );
    let missed_id = disputes[0]["dispute_id"].as_str().unwrap();
    assert_eq!(
        app.event_types(&m, missed_id).await,
        ["dispute_opened", "dispute_challenged"],
        "each change announced once, however often it is synced"
    );
}

/// An event whose delivery was missed (payd down for longer than Stripe retries, an endpoint
/// misconfigured) is read back from Stripe's `GET /v1/events` (docs.stripe.com/api/events/list)
/// by the periodic catch-up and handled as if delivered: a dispute reaches payd without any
/// delivery.
#[actix_web::test]
async fn an_event_whose_delivery_was_missed_is_read_back_from_stripe() {
    let Some(ls) = StrictStripe::start().await else {
        return;
    };
    // payd's clock moves only when told: each step of it makes the catch-up due.
    let clock = payd::clock::ManualClock::new();
    let app = common::spawn_with_clock(
        Arc::new(TestDb::new().await),
        &[("PAYD_PROCESSORS__STRIPE_EVENTS_CATCH_UP_SECS", "1")],
        clock.clone(),
    )
    .await;
    let m = app.create_merchant("Acme").await;
    ls.connect(&app, &m).await;
    let p = pay(&app, &m, json!({})).await;
    let id = p.body["payment_id"].as_str().unwrap();
    let pi = intent_of(&ls, id).await;
    let now = chrono::Utc::now().timestamp();
    let mut dispute = dispute_event("evt_missed_dp", &pi, "dp_missed", "needs_response", now);
    dispute["type"] = json!("charge.dispute.created");
    ls.made_event(dispute);

    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let disputes = get(&app, &m, &format!("/disputes/list?payment_id={id}")).await;
        if disputes["data"].as_array().unwrap().len() == 1 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never read back: {disputes}"
        );
        clock.advance(chrono::Duration::seconds(2));
        actix_web::rt::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(ls.seen().iter().any(|s| s.path == "/v1/events"
        && s.params
            .iter()
            .any(|(k, v)| k == "types[]" && v == "charge.dispute.created")));
}

/// Stripe cancels an authorization left uncaptured past the card's window itself
/// (docs.stripe.com/payments/place-a-hold-on-a-payment-method), with `cancellation_reason:
/// automatic` (docs.stripe.com/api/payment_intents/object): the payment `expired`, as payd's own
/// expiry would have made it, though payd's clock has not reached its `capture_before`.
#[actix_web::test]
async fn an_authorization_stripe_let_lapse_expired() {
    let Some((app, m, ls, _)) = setup().await else {
        return;
    };
    let p = pay(&app, &m, json!({"capture_method": "manual"})).await;
    assert_eq!(p.body["status"], "requires_capture", "{}", p.body);
    let id = p.body["payment_id"].as_str().unwrap();
    ls.lapse(&intent_of(&ls, id).await).await;
    let synced = get(&app, &m, &format!("/payments/{id}?force_sync=true")).await;
    assert_eq!(synced["status"], "expired", "{synced}");
}

/// An attempt payd concluded never reached Stripe (Stripe answered 500 before doing anything,
/// and kept that 500 under the key: docs.stripe.com/idempotency) whose PaymentIntent appears at
/// Stripe after all: the payment's `force_sync` looks for it again, in the window it was sent
/// in, and gives it back (refunded in full), though no event told of it. The payment's own
/// charge, made by the buyer's next attempt, stays.
#[actix_web::test]
async fn an_orphan_payment_intent_is_found_by_a_sync() {
    let Some(ls) = StrictStripe::start().await else {
        return;
    };
    let clock = payd::clock::ManualClock::new();
    let app = common::spawn_with_clock(Arc::new(TestDb::new().await), &[], clock.clone()).await;
    let m = app.create_merchant("Acme").await;
    ls.connect(&app, &m).await;
    ls.inject(Fault::ServerErrorBefore {
        path: "/v1/payment_intents".into(),
    });
    let p = pay(&app, &m, json!({})).await;
    assert_eq!(p.body["status"], "processing", "{}", p.body);
    let id = p.body["payment_id"].as_str().unwrap();
    let synced = get(&app, &m, &format!("/payments/{id}?force_sync=true")).await;
    assert_eq!(
        synced["status"], "processing",
        "not before the deadline: {synced}"
    );
    // Past Stripe's timeout and payd's grace, with no trace: never reached.
    clock.advance(chrono::Duration::minutes(12));
    let synced = get(&app, &m, &format!("/payments/{id}?force_sync=true")).await;
    assert_eq!(synced["status"], "declined", "{synced}");
    let gave_up = attempts(&app, &m, id).await;
    assert_eq!(
        gave_up[0]["error"]["code"], "processor_unavailable",
        "{gave_up:?}"
    );
    let reference = gave_up[0]["processor_reference"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(!reference.starts_with("pi_"), "{reference}");
    let again = post(
        &app,
        &m,
        &format!("/payments/{id}/confirm"),
        json!({"payment_method_data": card("4242424242424242")}),
    )
    .await;
    assert_eq!(again.body["status"], "succeeded", "{}", again.body);
    let own = intent_of(&ls, id).await;
    // The first attempt's request, carried out at Stripe after all.
    let orphan = charge_at_stripe(&ls, id, &reference).await;
    let orphan_id = orphan["id"].as_str().unwrap();

    let synced = get(&app, &m, &format!("/payments/{id}?force_sync=true")).await;
    assert_eq!(synced["status"], "succeeded", "{synced}");
    wait_refunded(&ls, orphan_id, 1000).await;
    assert_ne!(own, orphan_id);
    assert_eq!(
        refunded(&ls, &own).await,
        0,
        "the payment's own charge stays"
    );
}

/// What Stripe (localstripe) refunded of a PaymentIntent.
async fn refunded(ls: &StrictStripe, pi: &str) -> i64 {
    ls.get(&format!("/v1/refunds?payment_intent={pi}")).await["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["payment_intent"] == pi)
        .map(|r| r["amount"].as_i64().unwrap())
        .sum()
}

/// Waits (at most 20 s) until Stripe refunded `amount` of the PaymentIntent.
async fn wait_refunded(ls: &StrictStripe, pi: &str, amount: i64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while refunded(ls, pi).await != amount {
        assert!(
            std::time::Instant::now() < deadline,
            "{pi} was never refunded"
        );
        actix_web::rt::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A succeeded PaymentIntent of 10.00 USD made straight at Stripe (localstripe) for the
/// payment, under an attempt's reference: what an attempt payd gave up on leaves at Stripe when
/// it arrives after all.
async fn charge_at_stripe(ls: &StrictStripe, payment_id: &str, reference: &str) -> Value {
    let (status, pm) = ls
        .post(
            "/v1/payment_methods",
            &[
                ("type", "card"),
                ("card[number]", "4242424242424242"),
                ("card[exp_month]", "12"),
                ("card[exp_year]", "2040"),
                ("card[cvc]", "123"),
            ],
        )
        .await;
    assert_eq!(status, 200, "{pm}");
    let (status, orphan) = ls
        .post(
            "/v1/payment_intents",
            &[
                ("amount", "1000"),
                ("currency", "usd"),
                ("confirm", "true"),
                ("payment_method", pm["id"].as_str().unwrap()),
                ("metadata[payd_payment_id]", payment_id),
                ("metadata[payd_reference]", reference),
            ],
        )
        .await;
    assert_eq!(
        (status, orphan["status"].as_str()),
        (200, Some("succeeded")),
        "{orphan}"
    );
    orphan
}

/// A PaymentIntent made for a payment that the payment does not hold (an attempt payd declared
/// never reached, which reached Stripe after all, charged the buyer a second time) is given
/// back: refunded in full at Stripe when Stripe tells of it, and the payment's own charge is
/// left alone.
#[actix_web::test]
async fn an_orphan_payment_intent_is_refunded_and_the_payments_own_is_not() {
    let Some((app, m, ls, account)) = setup().await else {
        return;
    };
    let p = pay(&app, &m, json!({})).await;
    let id = p.body["payment_id"].as_str().unwrap();
    let own = intent_of(&ls, id).await;
    // A second charge for the same payment, made at Stripe under an attempt payd gave up on.
    let orphan = charge_at_stripe(&ls, id, &format!("{id}.9.stripe")).await;
    let orphan_id = orphan["id"].as_str().unwrap();
    let event = json!({"id": "evt_orphan", "object": "event", "type": "payment_intent.succeeded",
        "created": chrono::Utc::now().timestamp(), "data": {"object": orphan}});
    deliver_event(&app, &account, &event).await;

    wait_refunded(&ls, orphan_id, 1000).await;
    assert_eq!(
        refunded(&ls, &own).await,
        0,
        "the payment's own charge stays"
    );
    let p = get(&app, &m, &format!("/payments/{id}")).await;
    assert_eq!(
        (p["status"].as_str(), p["amount_refunded"].as_i64()),
        (Some("succeeded"), Some(0)),
        "{p}"
    );
    // Told again, nothing more happens.
    deliver_event(&app, &account, &event).await;
    app.run_due_jobs().await;
    assert_eq!(refunded(&ls, orphan_id).await, 1000);
}

/// An authorization may be captured until the card's network says
/// (docs.stripe.com/payments/place-a-hold-on-a-payment-method, `capture_before` on the
/// charge), not payd's own seven days: the payment's `capture_before` is Stripe's.
#[actix_web::test]
async fn capture_before_is_the_one_stripe_gives() {
    let Some((app, m, ls, _)) = setup().await else {
        return;
    };
    let p = pay(&app, &m, json!({"capture_method": "manual"})).await;
    assert_eq!(p.body["status"], "requires_capture", "{}", p.body);
    let id = p.body["payment_id"].as_str().unwrap();
    let pi = &intents_of(&ls, id).await[0];
    let stripes =
        chrono::DateTime::from_timestamp(pi["created"].as_i64().unwrap() + 5 * 86_400, 0).unwrap();
    let ours: chrono::DateTime<chrono::Utc> =
        p.body["capture_before"].as_str().unwrap().parse().unwrap();
    assert_eq!(ours, stripes, "{}", p.body);
}

/// The card of a Stripe PaymentMethod (docs.stripe.com/payments/payment-methods: made by
/// Stripe.js in the buyer's browser; in test mode one of Stripe's test PaymentMethods,
/// docs.stripe.com/testing) reaches payd only as Stripe describes it: the account need not be
/// enabled for raw card data, no card number crosses payd, a decline test PaymentMethod is
/// declined, and one saved for later charges off-session on the customer's Stripe Customer.
#[actix_web::test]
async fn a_stripe_payment_method_pays_and_no_card_number_crosses_payd() {
    let Some((app, m, ls, _)) = setup().await else {
        return;
    };
    ls.strict
        .raw_cards
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let stripe = |pm: &str| json!({"stripe": {"payment_method": pm}});
    let p = pay(
        &app,
        &m,
        json!({"payment_method_data": stripe("pm_card_visa")}),
    )
    .await;
    assert_eq!(
        (p.status, p.body["status"].as_str()),
        (201, Some("succeeded")),
        "{}",
        p.body
    );
    let card = &p.body["payment_method"];
    assert_eq!(
        (card["brand"].as_str(), card["last4"].as_str()),
        (Some("visa"), Some("4242")),
        "{}",
        p.body
    );
    let id = p.body["payment_id"].as_str().unwrap();
    let charged = &intents_of(&ls, id).await[0];
    assert_eq!(charged["status"], "succeeded", "{charged}");

    let declined = pay(
        &app,
        &m,
        json!({"payment_method_data": stripe("pm_card_chargeDeclined")}),
    )
    .await;
    assert_eq!(
        (
            declined.body["status"].as_str(),
            declined.body["last_error"]["code"].as_str()
        ),
        (Some("declined"), Some("generic_decline")),
        "{}",
        declined.body
    );

    // Saved for later: attached to one Stripe Customer, then charged off-session by its mandate.
    let c = post(&app, &m, "/customers", json!({"name": "Ana"})).await;
    let cid = c.body["customer_id"].as_str().unwrap();
    let first = pay(
        &app,
        &m,
        json!({"payment_method_data": stripe("pm_card_mastercard"),
            "customer_id": cid, "setup_future_usage": "off_session"}),
    )
    .await;
    assert_eq!(first.body["status"], "succeeded", "{}", first.body);
    let mandate = first.body["mandate_id"].as_str().expect("a mandate");
    let later = app
        .create_payment(
            &m,
            json!({"amount": 700, "currency": "USD", "confirm": true,
                "customer_id": cid, "mandate_id": mandate, "off_session": true}),
        )
        .await;
    assert_eq!(later.body["status"], "succeeded", "{}", later.body);
    let pis = [
        intent_of(&ls, first.body["payment_id"].as_str().unwrap()).await,
        intent_of(&ls, later.body["payment_id"].as_str().unwrap()).await,
    ];
    let mut on = Vec::new();
    for pi in &pis {
        on.push(ls.get(&format!("/v1/payment_intents/{pi}")).await["customer"].clone());
    }
    assert!(
        on[0].as_str().is_some_and(|c| c.starts_with("cus_")) && on[0] == on[1],
        "one Stripe customer: {on:?}"
    );

    assert!(
        ls.seen().iter().all(|s| s
            .params
            .iter()
            .all(|(k, _)| !k.starts_with("card[number]") && !k.starts_with("card[cvc]"))),
        "a card number crossed payd"
    );
}

/// A Stripe PaymentMethod that cannot be charged is refused before anything is sent to charge
/// it, each refusal naming its field: an id that is not Stripe's, a card and a PaymentMethod
/// at once, a PaymentMethod the account does not hold, and a shop without a Stripe account.
#[actix_web::test]
async fn a_stripe_payment_method_no_account_can_charge_is_refused_naming_its_field() {
    let Some((app, m, ls, _)) = setup().await else {
        return;
    };
    let cases = [
        (
            json!({"stripe": {"payment_method": "card_123; drop"}}),
            "payment_method_data.stripe.payment_method",
        ),
        (
            json!({"card": {"number": "4242424242424242", "exp_month": 12, "exp_year": 2040,
                "cvc": "123"}, "stripe": {"payment_method": "pm_card_visa"}}),
            "payment_method_data",
        ),
        (
            json!({"stripe": {"payment_method": "pm_NoSuchMethod"}}),
            "payment_method_data.stripe.payment_method",
        ),
        (
            json!({"stripe": {"payment_method": "pm_card_visa", "processor_account_id": "pa_nope"}}),
            "payment_method_data.stripe.processor_account_id",
        ),
    ];
    for (data, param) in cases {
        let r = pay(&app, &m, json!({"payment_method_data": data})).await;
        assert_eq!(
            (r.status, r.body["error"]["param"].as_str()),
            (400, Some(param)),
            "{data}: {}",
            r.body
        );
    }
    assert_eq!(ls.posts_to("/v1/payment_intents"), 0);

    let other = app.create_merchant("Sandbox only").await;
    let r = pay(
        &app,
        &other,
        json!({"payment_method_data": {"stripe": {"payment_method": "pm_card_visa"}}}),
    )
    .await;
    assert_eq!(
        (r.status, r.body["error"]["param"].as_str()),
        (400, Some("payment_method_data.stripe")),
        "{}",
        r.body
    );
}

/// An account a merchant can keep: created before its webhook secret exists (the endpoint's
/// URL at Stripe names the account), then given it; its secret key rolled in place
/// (docs.stripe.com/keys#rolling-keys) with payments before and after, the id unchanged; its
/// webhook secret rolled with both accepted while Stripe signs with either
/// (docs.stripe.com/webhooks#roll-endpoint-secrets), the old one refused after 24 hours;
/// disabled and enabled again; every change audited without its secrets.
#[actix_web::test]
async fn a_stripe_accounts_credentials_rotate_in_place() {
    let Some(ls) = StrictStripe::start().await else {
        return;
    };
    let clock = payd::clock::ManualClock::new();
    let app = common::spawn_with_clock(Arc::new(TestDb::new().await), &[], clock.clone()).await;
    let m = app.create_merchant("Acme").await;
    let processors = format!("/account/shops/{}/processors", m.profile_id);
    let r = app
        .post(
            &processors,
            &m.secret_key,
            json!({"name": "stripe", "kind": "stripe", "raw_card_data": true,
                "secret_key": common::stripe::SECRET_KEY, "api_base": ls.base}),
        )
        .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.body["processor_account_id"].as_str().unwrap().to_owned();
    let account = format!("{processors}/{id}");
    let patch = async |body: Value| app.call(&m, Method::PATCH, &account, Some(body)).await;
    let event = json!({"id": "evt_1", "object": "event", "type": "payment_intent.succeeded",
        "created": chrono::Utc::now().timestamp(),
        "data": {"object": {"id": "pi_unknown", "object": "payment_intent", "metadata": {}}}});
    let body = serde_json::to_vec(&event).unwrap();
    let signed = |secret: &str| {
        payd::processors::stripe::sign(secret, chrono::Utc::now().timestamp(), &body)
    };
    let (status, _) = post_event(&app, &id, &event, &signed(WEBHOOK_SECRET)).await;
    assert_eq!(status, 400, "no webhook secret yet");
    let r = patch(json!({"webhook_secret": WEBHOOK_SECRET})).await;
    assert_eq!(
        (r.status, r.body["processor_account_id"].as_str()),
        (200, Some(id.as_str()))
    );
    let (status, _) = post_event(&app, &id, &event, &signed(WEBHOOK_SECRET)).await;
    assert_eq!(status, 200);

    // The secret key rolled: the payment made before is refunded with the new key.
    let before = pay(&app, &m, json!({})).await;
    assert_eq!(before.body["status"], "succeeded", "{}", before.body);
    const ROLLED: &str = "sk_test_rolled0000000000000000000002";
    let r = patch(json!({"secret_key": ROLLED})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let refund = post(
        &app,
        &m,
        "/refunds",
        json!({"payment_id": before.body["payment_id"], "amount": 100}),
    )
    .await;
    assert_eq!(refund.body["status"], "succeeded", "{}", refund.body);
    let after = pay(&app, &m, json!({})).await;
    assert_eq!(after.body["status"], "succeeded", "{}", after.body);
    let posts: Vec<_> = ls
        .seen()
        .into_iter()
        .filter(|s| s.method == "POST")
        .collect();
    assert_eq!(posts.last().unwrap().bearer.as_deref(), Some(ROLLED));
    assert_eq!(
        posts.first().unwrap().bearer.as_deref(),
        Some(common::stripe::SECRET_KEY)
    );
    let r = patch(json!({"secret_key": "sk_live_other0000000000000000000003"})).await;
    assert_eq!(
        (r.status, r.body["error"]["param"].as_str()),
        (400, Some("secret_key"))
    );
    let r = patch(json!({"secret": "a-remote-accounts-secret"})).await;
    assert_eq!(
        (r.status, r.body["error"]["param"].as_str()),
        (400, Some("secret"))
    );

    // The webhook secret rolled: both sign for 24 hours, then only the new one.
    const NEW_SECRET: &str = "whsec_rolled0000000000000000000000000002";
    assert_eq!(
        patch(json!({"webhook_secret": NEW_SECRET})).await.status,
        200
    );
    for secret in [WEBHOOK_SECRET, NEW_SECRET] {
        let (status, _) = post_event(&app, &id, &event, &signed(secret)).await;
        assert_eq!(status, 200, "{secret}");
    }
    clock.advance(chrono::Duration::hours(25));
    let (status, _) = post_event(&app, &id, &event, &signed(WEBHOOK_SECRET)).await;
    assert_eq!(status, 400, "the old secret is no longer accepted");
    let (status, _) = post_event(&app, &id, &event, &signed(NEW_SECRET)).await;
    assert_eq!(status, 200);

    // Disabled, the shop's payments go elsewhere (its implicit sandbox); enabled, here again.
    assert_eq!(
        patch(json!({"enabled": false})).await.body["enabled"],
        false
    );
    let elsewhere = pay(&app, &m, json!({})).await;
    let tried = attempts(&app, &m, elsewhere.body["payment_id"].as_str().unwrap()).await;
    assert_eq!(tried[0]["processor"], "sandbox", "{tried:?}");
    assert_eq!(patch(json!({"enabled": true})).await.body["enabled"], true);
    let back = pay(&app, &m, json!({})).await;
    let tried = attempts(&app, &m, back.body["payment_id"].as_str().unwrap()).await;
    assert_eq!(tried[0]["processor"], "stripe", "{tried:?}");

    let log = get(&app, &m, "/account/audit-log?limit=100").await;
    let updates: Vec<&Value> = log["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["action"] == "processor_account.updated")
        .collect();
    assert_eq!(updates.len(), 5, "{log}");
    let text = log.to_string();
    for secret in [ROLLED, NEW_SECRET, WEBHOOK_SECRET] {
        assert!(!text.contains(secret), "a secret in the audit log");
    }
    let other = app.create_merchant("Other").await;
    let r = app
        .call(
            &other,
            Method::PATCH,
            &format!("/account/shops/{}/processors/{id}", other.profile_id),
            Some(json!({"enabled": false})),
        )
        .await;
    assert_eq!(r.status, 404, "{}", r.body);
}

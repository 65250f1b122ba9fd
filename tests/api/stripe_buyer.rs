//! Stripe with the buyer there, as Stripe documents it and the strict layer
//! (`common::strict_stripe`) holds payd to: 3-D Secure by Stripe's redirect and back, cards
//! saved by Stripe only when their payment succeeds, and an off-session charge the card's
//! issuer wants authenticated, which waits for the buyer on payd's page.

use crate::common;

use actix_web::http::Method;
use common::{
    card,
    strict_app::{customer, get, intent_of, intents_of, outcome, pay, post, setup},
    strict_stripe::{Fault, StrictStripe},
    Merchant, TestApp,
};
use serde_json::{json, Value};

/// The `Location` of a redirect answer, as a path of `app` (or as it is, for another host).
fn location(r: &common::Answer) -> String {
    r.header("location").expect("a Location").to_owned()
}

/// The buyer follows a payment's 3-D Secure link: payd's challenge link, Stripe's page (the
/// strict layer's) where they pass (`complete`) or fail (`fail`), and back to payd, which sends
/// them on to the checkout page.
async fn through_3ds(app: &TestApp, ls: &StrictStripe, payment: &Value, outcome: &str) {
    let id = payment["payment_id"].as_str().unwrap();
    let ours = payment["next_action"]["redirect_to_url"]["url"]
        .as_str()
        .unwrap();
    let path = app.path_of(ours).expect("payd's challenge link").to_owned();
    let to_stripe = app.send(Method::GET, &path, None, None, &[]).await;
    assert_eq!(to_stripe.status, 303, "{}", to_stripe.body);
    let stripe_page = location(&to_stripe);
    assert!(
        stripe_page.starts_with(&format!("{}/3ds/pi_", ls.base)),
        "{stripe_page}"
    );
    let mut back = common::client()
        .post(&stripe_page)
        .send_form(&[("result", outcome)])
        .await
        .unwrap();
    assert_eq!(back.status(), 303);
    let _ = back.body().await;
    let back = back
        .headers()
        .get("location")
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let back = app.path_of(&back).expect("back to payd").to_owned();
    assert!(
        back.starts_with(&format!("/checkout/{id}/challenge/return?")),
        "{back}"
    );
    let page = app.send(Method::GET, &back, None, None, &[]).await;
    assert_eq!(page.status, 303, "{}", page.body);
    assert!(location(&page).starts_with(&format!("/checkout/{id}?client_secret=")));
}

/// 3-D Secure a buyer can finish (docs.stripe.com/payments/3d-secure/authentication-flow): the
/// PaymentIntent is confirmed with a `return_url` on payd, so Stripe's `next_action` is a
/// redirect; payd's challenge link sends the buyer to Stripe's page, Stripe sends them back to
/// payd, and payd reads the PaymentIntent: paid when 3-D Secure passed, declined with Stripe's
/// `payment_intent_authentication_failure` when it failed. A payment cancelled while it waits for
/// 3-D Secure cancels its PaymentIntent at Stripe too.
#[actix_web::test]
async fn three_d_secure_completes_by_stripes_redirect_and_back() {
    let Some((app, m, ls, _)) = setup().await else {
        return;
    };
    let challenge = async |outcome: &str| -> (String, Value) {
        let p = pay(
            &app,
            &m,
            json!({"payment_method_data": card("4000000000003220")}),
        )
        .await;
        assert_eq!(p.body["status"], "requires_customer_action", "{}", p.body);
        let id = p.body["payment_id"].as_str().unwrap().to_owned();
        through_3ds(&app, &ls, &p.body, outcome).await;
        (id.clone(), get(&app, &m, &format!("/payments/{id}")).await)
    };
    let (_, paid) = challenge("complete").await;
    assert_eq!(paid["status"], "succeeded", "{paid}");
    let (_, failed) = challenge("fail").await;
    assert_eq!(
        outcome(&failed),
        (
            Some("declined"),
            Some("payment_intent_authentication_failure")
        ),
        "{failed}"
    );
    // Every PaymentIntent was confirmed with payd's way back.
    assert!(ls
        .seen()
        .iter()
        .filter(|s| s.method == "POST" && s.path == "/v1/payment_intents")
        .all(|s| s
            .params
            .iter()
            .any(|(k, v)| k == "return_url" && v.contains("/challenge/return?client_secret="))));

    let waiting = pay(
        &app,
        &m,
        json!({"payment_method_data": card("4000000000003220")}),
    )
    .await;
    let id = waiting.body["payment_id"].as_str().unwrap();
    let cancelled = post(&app, &m, &format!("/payments/{id}/cancel"), json!({})).await;
    assert_eq!(cancelled.body["status"], "cancelled", "{}", cancelled.body);
    let pi = intent_of(&ls, id).await;
    assert_eq!(
        ls.get(&format!("/v1/payment_intents/{pi}")).await["status"],
        "canceled"
    );
}

/// docs.stripe.com/payments/save-during-payment: a payment that saves its card is confirmed
/// with the customer's Stripe Customer and `setup_future_usage`, and Stripe attaches the card
/// when the payment succeeds. A declined card is neither attached at Stripe nor saved at payd,
/// and gets no mandate; a card behind 3-D Secure is saved, with its mandate, once it passed.
#[actix_web::test]
async fn a_card_is_saved_only_when_its_payment_succeeds() {
    let Some((app, m, ls, _)) = setup().await else {
        return;
    };
    let cid = &customer(&app, &m).await;
    let saving = |number: &str| {
        json!({"payment_method_data": card(number), "customer_id": cid,
            "setup_future_usage": "off_session"})
    };
    let saved_at_stripe = async |payment_id: &str| -> usize {
        let pi = &intents_of(&ls, payment_id).await[0];
        let customer = pi["customer"]
            .as_str()
            .expect("the customer's Stripe Customer");
        ls.get(&format!(
            "/v1/payment_methods?customer={customer}&type=card"
        ))
        .await["data"]
            .as_array()
            .unwrap()
            .len()
    };
    let saved_at_payd = async || {
        get(&app, &m, &format!("/customers/{cid}/payment-methods")).await["data"]
            .as_array()
            .unwrap()
            .len()
    };

    let declined = pay(&app, &m, saving("4000000000000002")).await;
    assert_eq!(declined.body["status"], "declined", "{}", declined.body);
    assert!(declined.body["mandate_id"].is_null(), "{}", declined.body);
    let id = declined.body["payment_id"].as_str().unwrap();
    assert_eq!(
        saved_at_stripe(id).await,
        0,
        "a declined card is not attached"
    );
    assert_eq!(saved_at_payd().await, 0);

    let (paid, _) = saved_behind_3ds(&app, &m, &ls, cid).await;
    let id = paid["payment_id"].as_str().unwrap();
    assert_eq!(saved_at_stripe(id).await, 1);
    assert_eq!(saved_at_payd().await, 1);
    assert!(ls
        .seen()
        .iter()
        .filter(|s| s.method == "POST" && s.path == "/v1/payment_intents")
        .all(|s| s
            .params
            .contains(&("setup_future_usage".into(), "off_session".into()))));
    assert_eq!(ls.posts_to("/v1/payment_methods/{id}/attach"), 0);
}

/// An off-session charge Stripe declined `authentication_required`, as payd holds it.
const WAITS_FOR_THE_BUYER: (Option<&str>, Option<&str>) = (
    Some("requires_customer_action"),
    Some("authentication_required"),
);

/// The 3-D Secure card 4000000000003220 saved for customer `cid` under a mandate, by a payment
/// whose 3-D Secure the buyer passed: (that payment, once paid; its mandate).
async fn saved_behind_3ds(
    app: &TestApp,
    m: &Merchant,
    ls: &StrictStripe,
    cid: &str,
) -> (Value, String) {
    let p = pay(
        app,
        m,
        json!({"payment_method_data": card("4000000000003220"), "customer_id": cid,
            "setup_future_usage": "off_session"}),
    )
    .await;
    assert_eq!(p.body["status"], "requires_customer_action", "{}", p.body);
    assert!(p.body["mandate_id"].is_null(), "not before 3-D Secure");
    through_3ds(app, ls, &p.body, "complete").await;
    let id = p.body["payment_id"].as_str().unwrap();
    let paid = get(app, m, &format!("/payments/{id}")).await;
    assert_eq!(paid["status"], "succeeded", "{paid}");
    let mandate = paid["mandate_id"]
        .as_str()
        .expect("a mandate once it passed")
        .to_owned();
    (paid, mandate)
}

/// docs.stripe.com/payments/save-during-payment#charge-saved-payment-method: an off-session
/// charge the card's issuer wants authenticated is Stripe's 402 `authentication_required`, its
/// PaymentIntent kept for the buyer. payd holds the payment `requires_customer_action`
/// (`action_required`), `last_error` saying why, its `next_action` the link the merchant sends
/// the buyer. Opening the link starts nothing (mail scanners open links): the buyer's
/// "continue" confirms the same PaymentIntent again on its PaymentMethod, with the buyer there
/// and payd's way back, and Stripe's 3-D Secure follows; passed, the payment is paid. A sync
/// while it waits leaves it waiting; one the buyer never completes is cancelled at Stripe with
/// the payment.
#[actix_web::test]
async fn an_off_session_charge_stripe_wants_authenticated_waits_for_the_buyer() {
    let Some((app, m, ls, _)) = setup().await else {
        return;
    };
    let cid = &customer(&app, &m).await;
    let (first, mandate) = saved_behind_3ds(&app, &m, &ls, cid).await;
    let charge = async || {
        let r = app
            .create_payment(
                &m,
                json!({"amount": 700, "currency": "USD", "confirm": true,
                    "customer_id": cid, "mandate_id": mandate, "off_session": true}),
            )
            .await;
        assert_eq!(outcome(&r.body), WAITS_FOR_THE_BUYER, "{}", r.body);
        r.body
    };
    let waiting = charge().await;
    let id = waiting["payment_id"].as_str().unwrap();
    // Charged at Stripe on the customer's Stripe Customer, under the card saved there.
    let pi = intents_of(&ls, id).await.remove(0);
    let first_id = first["payment_id"].as_str().unwrap();
    assert_eq!(
        pi["customer"],
        intents_of(&ls, first_id).await[0]["customer"]
    );
    let pi = pi["id"].as_str().unwrap().to_owned();
    assert_eq!(app.event_types(&m, id).await, ["action_required"]);
    let synced = get(&app, &m, &format!("/payments/{id}?force_sync=true")).await;
    assert_eq!(synced["status"], "requires_customer_action", "{synced}");

    let link = waiting["next_action"]["redirect_to_url"]["url"]
        .as_str()
        .expect("a link for the buyer");
    let path = app.path_of(link).expect("payd's page").to_owned();
    let page = app.send(Method::GET, &path, None, None, &[]).await;
    assert_eq!(page.status, 200, "{}", page.body);
    let html = String::from_utf8_lossy(&page.raw).into_owned();
    assert!(html.contains("Continue to your bank"), "{html}");
    assert!(!html.contains("id=\"reject\""), "{html}");
    let confirm = format!("/v1/payment_intents/{pi}/confirm");
    assert_eq!(ls.posts_to(&confirm), 0, "opening the link starts nothing");

    let on = to_the_bank(&app, &waiting).await;
    assert_eq!(on["status"], "requires_customer_action", "{on}");
    let sent = ls
        .seen()
        .into_iter()
        .find(|s| s.method == "POST" && s.path == confirm)
        .expect("the PaymentIntent confirmed again");
    let method = pi_method(&ls, first_id).await;
    assert!(
        sent.params.contains(&("payment_method".into(), method)),
        "{:?}",
        sent.params
    );
    assert!(
        !sent.params.iter().any(|(k, _)| k == "off_session"),
        "{:?}",
        sent.params
    );
    through_3ds(&app, &ls, &waiting, "complete").await;
    let paid = get(&app, &m, &format!("/payments/{id}")).await;
    assert_eq!(
        (paid["status"].as_str(), paid["amount_captured"].as_i64()),
        (Some("succeeded"), Some(700)),
        "{paid}"
    );
    assert_eq!(
        app.event_types(&m, id).await,
        ["action_required", "payment_succeeded"]
    );
    assert_eq!(ls.posts_to(&confirm), 1);

    let left = charge().await;
    let id = left["payment_id"].as_str().unwrap();
    let cancelled = post(&app, &m, &format!("/payments/{id}/cancel"), json!({})).await;
    assert_eq!(cancelled.body["status"], "cancelled", "{}", cancelled.body);
    let pi = intent_of(&ls, id).await;
    assert_eq!(
        ls.get(&format!("/v1/payment_intents/{pi}")).await["status"],
        "canceled"
    );
}

/// The buyer's "Continue to your bank" on payd's page for `payment`: the checkout status it
/// answers.
async fn to_the_bank(app: &TestApp, payment: &Value) -> Value {
    let id = payment["payment_id"].as_str().unwrap();
    let go = json!({"client_secret": payment["client_secret"], "result": "approve"});
    let on = app
        .send(
            Method::POST,
            &format!("/checkout/{id}/challenge"),
            None,
            Some(&go),
            &[],
        )
        .await;
    assert_eq!(on.status, 200, "{}", on.body);
    on.body
}

/// The PaymentMethod a payment's PaymentIntent was charged with, at Stripe.
async fn pi_method(ls: &StrictStripe, payment_id: &str) -> String {
    intents_of(ls, payment_id).await[0]["payment_method"]
        .as_str()
        .expect("a PaymentMethod")
        .to_owned()
}

/// docs.stripe.com/get-started/account/statement-descriptors: a shop's Stripe account may put
/// a suffix after its statement descriptor on the buyer's card statement; every PaymentIntent
/// carries it, checked as Stripe takes it (a bad one is 400 naming it), and `""` removes it.
#[actix_web::test]
async fn the_shops_statement_descriptor_suffix_goes_on_every_payment_intent() {
    let Some(ls) = StrictStripe::start().await else {
        return;
    };
    let app = common::spawn_with(std::sync::Arc::new(common::TestDb::new().await), &[]).await;
    let m = app.create_merchant("Acme").await;
    let path = format!("/account/shops/{}/processors", m.profile_id);
    for bad in [
        "",
        "12345",
        "ACME <SHOP>",
        "A VERY LONG SUFFIX OF 23X",
        "ÉCOLE",
    ] {
        let r = app
            .post(
                &path,
                &m.secret_key,
                json!({"name": "stripe", "kind": "stripe", "secret_key": common::stripe::SECRET_KEY,
                    "api_base": ls.base, "statement_descriptor_suffix": bad}),
            )
            .await;
        assert_eq!(
            (r.status, r.body["error"]["param"].as_str()),
            (400, Some("statement_descriptor_suffix")),
            "{bad}: {}",
            r.body
        );
    }
    let account = common::stripe::connect_via(
        &app,
        &m,
        &ls,
        &ls.base,
        json!({"statement_descriptor_suffix": " ORDER 42 "}),
    )
    .await;
    let suffixes = |ls: &StrictStripe| -> Vec<Option<String>> {
        ls.seen()
            .into_iter()
            .filter(|s| s.method == "POST" && s.path == "/v1/payment_intents")
            .map(|s| {
                s.params
                    .into_iter()
                    .find(|(k, _)| k == "statement_descriptor_suffix")
                    .map(|(_, v)| v)
            })
            .collect()
    };
    let p = pay(&app, &m, json!({})).await;
    assert_eq!(p.body["status"], "succeeded", "{}", p.body);
    assert_eq!(suffixes(&ls), [Some("ORDER 42".to_owned())]);

    let one = format!("{path}/{account}");
    let patch = |body: Value| app.call(&m, Method::PATCH, &one, Some(body));
    let r = patch(json!({"statement_descriptor_suffix": "*"})).await;
    assert_eq!(r.status, 400, "{}", r.body);
    let r = patch(json!({"statement_descriptor_suffix": ""})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    pay(&app, &m, json!({})).await;
    assert_eq!(suffixes(&ls), [Some("ORDER 42".to_owned()), None]);
}

/// A subscription's cycle is charged off-session under its mandate, so Stripe's
/// `authentication_required` takes the same path: its payment waits for the buyer, the cycle
/// waits with it (neither failed nor retried), and once the buyer passed 3-D Secure the cycle
/// is paid and the subscription active.
#[actix_web::test]
async fn a_subscription_cycle_stripe_wants_authenticated_is_paid_once_the_buyer_finishes() {
    let Some((app, m, ls, _)) = setup().await else {
        return;
    };
    let cid = &customer(&app, &m).await;
    let (_, mandate) = saved_behind_3ds(&app, &m, &ls, cid).await;
    let product = post(
        &app,
        &m,
        "/products",
        json!({"name": "Plan", "prices": [{"unit_amount": 900, "currency": "USD",
            "recurring": {"interval": "month"}}]}),
    )
    .await;
    let price = product.body["prices"][0]["price_id"].as_str().unwrap();
    let s = post(
        &app,
        &m,
        "/subscriptions",
        json!({"customer_id": cid, "mandate_id": mandate, "items": [{"price_id": price}]}),
    )
    .await;
    assert_eq!(s.status, 201, "{}", s.body);
    let sid = s.body["subscription_id"].as_str().unwrap();
    let cycle =
        async || get(&app, &m, &format!("/subscriptions/{sid}/invoices")).await["data"][0].clone();
    let pid = cycle().await["payment_id"].as_str().unwrap().to_owned();
    let waiting = get(&app, &m, &format!("/payments/{pid}")).await;
    assert_eq!(outcome(&waiting), WAITS_FOR_THE_BUYER, "{waiting}");
    assert_ne!(cycle().await["status"], "paid");

    to_the_bank(&app, &waiting).await;
    through_3ds(&app, &ls, &waiting, "complete").await;
    // The cycle looks at its payment again a minute on.
    for _ in 0..200 {
        if cycle().await["status"] == "paid" {
            break;
        }
        app.clock.advance(chrono::Duration::minutes(2));
        actix_web::rt::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    let paid = cycle().await;
    assert_eq!(paid["status"], "paid", "{paid}");
    let s = get(&app, &m, &format!("/subscriptions/{sid}")).await;
    assert_eq!(s["status"], "active", "{s}");
}

/// A deleted customer's cards go at Stripe too (docs.stripe.com/api/payment_methods/detach):
/// each is detached from the customer's Stripe Customer, so none can be charged there again.
#[actix_web::test]
async fn a_deleted_customers_cards_are_detached_at_stripe() {
    let Some((app, m, ls, _)) = setup().await else {
        return;
    };
    let cid = &customer(&app, &m).await;
    let p = pay(
        &app,
        &m,
        json!({"customer_id": cid, "setup_future_usage": "on_session"}),
    )
    .await;
    assert_eq!(p.body["status"], "succeeded", "{}", p.body);
    let pi = &intents_of(&ls, p.body["payment_id"].as_str().unwrap()).await[0];
    let attached = format!(
        "/v1/payment_methods?customer={}&type=card",
        pi["customer"]
            .as_str()
            .expect("the customer's Stripe Customer")
    );
    assert_eq!(ls.get(&attached).await["data"].as_array().unwrap().len(), 1);

    let deleted = app
        .call(&m, Method::DELETE, &format!("/customers/{cid}"), None)
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.body);
    assert_eq!(
        deleted.body["deleted_payment_methods"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let method = pi["payment_method"].as_str().unwrap();
    assert_eq!(
        ls.posts_to(&format!("/v1/payment_methods/{method}/detach")),
        1
    );
    assert!(ls.get(&attached).await["data"]
        .as_array()
        .unwrap()
        .is_empty());
}

/// A payment that saves its card, whose answer was lost (Stripe charged and answered 500:
/// docs.stripe.com/error-low-level): the reconciliation that finds it approved saves the card
/// Stripe attached, with its mandate, as the answer would have.
#[actix_web::test]
async fn an_approval_whose_answer_was_lost_still_saves_its_card() {
    let Some((app, m, ls, _)) = setup().await else {
        return;
    };
    let cid = &customer(&app, &m).await;
    ls.inject(Fault::ServerErrorAfter {
        path: "/v1/payment_intents".into(),
    });
    let p = pay(
        &app,
        &m,
        json!({"customer_id": cid, "setup_future_usage": "off_session"}),
    )
    .await;
    assert_eq!(p.body["status"], "processing", "{}", p.body);
    let id = p.body["payment_id"].as_str().unwrap();
    let synced = get(&app, &m, &format!("/payments/{id}?force_sync=true")).await;
    assert_eq!(synced["status"], "succeeded", "{synced}");
    assert!(synced["mandate_id"].is_string(), "{synced}");
    let saved = get(&app, &m, &format!("/customers/{cid}/payment-methods")).await;
    assert_eq!(saved["data"].as_array().unwrap().len(), 1, "{saved}");
}

//! Subscriptions billed by the sandbox billing processor: adopted one by one or imported as a
//! reviewed set, collected by the processor at each renewal (`payment: null`), followed by
//! sync, their status changes made at the processor too, and a chargeback of a collected
//! cycle announced as `invoice_disputed`.

use crate::common;

use actix_web::http::Method;
use common::{spawn_app, Merchant, TestApp};
use serde_json::{json, Value};

async fn call(
    app: &TestApp,
    m: &Merchant,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> common::Answer {
    app.call(m, method, path, body).await
}

async fn post(app: &TestApp, m: &Merchant, path: &str, body: Value) -> common::Answer {
    call(app, m, Method::POST, path, Some(body)).await
}

async fn get(app: &TestApp, m: &Merchant, path: &str) -> common::Answer {
    call(app, m, Method::GET, path, None).await
}

/// A subscription made at the processor: its id.
async fn at_processor(app: &TestApp, m: &Merchant, plan: &str, quantity: i64) -> String {
    let r = post(
        app,
        m,
        "/sandbox/billing/subscriptions",
        json!({"customer_name": "Ana", "customer_email": "ana@example.com", "plan_id": plan,
            "quantity": quantity}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let id = r.body["processor_subscription_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(id.starts_with("bsub_"), "{id}");
    id
}

async fn processor_change(app: &TestApp, m: &Merchant, id: &str, change: Value) -> Value {
    let r = post(
        app,
        m,
        &format!("/sandbox/billing/subscriptions/{id}"),
        change,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body
}

async fn advance(app: &TestApp, m: &Merchant, seconds: i64) {
    let r = post(
        app,
        m,
        "/sandbox/clock/advance",
        json!({ "seconds": seconds }),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
}

/// Advances the merchant's clock to `seconds` past `at` (RFC 3339): past a period's end
/// whatever the calendar makes its length (a month is 28 to 31 days).
async fn advance_past(app: &TestApp, m: &Merchant, at: &Value, seconds: i64) {
    let time = |v: &Value| {
        chrono::DateTime::parse_from_rfc3339(v.as_str().unwrap_or_default())
            .unwrap_or_else(|e| panic!("{v}: {e}"))
    };
    let clock = get(app, m, "/sandbox/clock").await;
    let now = time(&clock.body["now"]);
    advance(app, m, (time(at) - now).num_seconds().max(0) + seconds).await;
}

async fn cycles(app: &TestApp, m: &Merchant, id: &str) -> Vec<Value> {
    let r = get(app, m, &format!("/subscriptions/{id}/invoices")).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body["data"].as_array().unwrap().clone()
}

/// The envelopes of the object's events, oldest first.
async fn events(app: &TestApp, m: &Merchant, object_id: &str) -> Vec<Value> {
    let r = post(
        app,
        m,
        &format!("/events/{}", m.merchant_id),
        json!({"object_id": object_id, "limit": 100}),
    )
    .await;
    let mut all: Vec<Value> = r.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["envelope"].clone())
        .collect();
    all.reverse();
    all
}

fn types(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|e| e["event_type"].as_str().unwrap())
        .collect()
}

const DAY: i64 = 86_400;

#[actix_web::test]
async fn an_adopted_subscription_is_collected_by_the_processor_and_follows_it() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;

    let items = get(&app, &m, "/subscriptions/items").await;
    assert_eq!(items.status, 200, "{}", items.body);
    assert_eq!(items.body["processor"], "billing_sandbox");
    let plans: Vec<&str> = items.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["item_id"].as_str().unwrap())
        .collect();
    assert!(plans.contains(&"plan_pro_monthly") && plans.contains(&"addon_extra_seat"));
    let estimate = get(
        &app,
        &m,
        "/subscriptions/estimate?plan_id=plan_pro_monthly&quantity=2",
    )
    .await;
    assert_eq!(estimate.body["amount"], 5800, "{}", estimate.body);
    let unknown = get(&app, &m, "/subscriptions/estimate?plan_id=plan_gold").await;
    assert_eq!((unknown.status, unknown.param()), (404, Some("plan_id")));

    for (body, param) in [
        (
            json!({"customer_name": "Ana", "plan_id": "plan_gold"}),
            "plan_id",
        ),
        (
            json!({"customer_name": "Ana", "plan_id": "addon_extra_seat"}),
            "plan_id",
        ),
        (
            json!({"customer_name": "Ana", "plan_id": "plan_pro_monthly", "quantity": 0}),
            "quantity",
        ),
        (
            json!({"customer_name": " ", "plan_id": "plan_pro_monthly"}),
            "customer_name",
        ),
        (json!({"plan_id": "plan_pro_monthly"}), "customer_name"),
    ] {
        let r = post(&app, &m, "/sandbox/billing/subscriptions", body.clone()).await;
        assert_eq!(
            (r.status, r.param()),
            (400, Some(param)),
            "{body}: {}",
            r.body
        );
    }

    let bsub = at_processor(&app, &m, "plan_pro_monthly", 2).await;
    let adopted = post(
        &app,
        &m,
        "/subscriptions/adopt",
        json!({"processor_subscription_id": bsub}),
    )
    .await;
    assert_eq!(adopted.status, 201, "{}", adopted.body);
    let s = adopted.body;
    let id = s["subscription_id"].as_str().unwrap().to_owned();
    assert_eq!(
        (
            s["billing"].as_str(),
            s["processor_subscription_id"].as_str(),
            s["status"].as_str()
        ),
        (Some("billing_sandbox"), Some(bsub.as_str()), Some("active"))
    );
    assert_eq!(
        (s["amount"].as_i64(), s["items"][0]["plan_id"].as_str()),
        (Some(5800), Some("plan_pro_monthly"))
    );
    let customer = get(
        &app,
        &m,
        &format!("/customers/{}", s["customer_id"].as_str().unwrap()),
    )
    .await;
    assert_eq!(
        customer.body["email"], "ana@example.com",
        "{}",
        customer.body
    );

    let again = post(
        &app,
        &m,
        "/subscriptions/adopt",
        json!({"processor_subscription_id": bsub}),
    )
    .await;
    assert_eq!(
        (again.status, again.code(), again.param()),
        (409, "already_adopted", Some("processor_subscription_id"))
    );
    let none = post(
        &app,
        &m,
        "/subscriptions/adopt",
        json!({"processor_subscription_id": "bsub_nope"}),
    )
    .await;
    assert_eq!(
        (none.status, none.param()),
        (404, Some("processor_subscription_id"))
    );
    let other = app.create_merchant("Other").await;
    let theirs = post(
        &app,
        &other,
        "/subscriptions/adopt",
        json!({"processor_subscription_id": bsub}),
    )
    .await;
    assert_eq!(
        theirs.status, 404,
        "another merchant's processor subscription: {}",
        theirs.body
    );

    let caps = get(&app, &m, &format!("/subscriptions/{id}/capabilities")).await;
    assert!(
        caps.body["actions"]
            .as_array()
            .unwrap()
            .contains(&json!("sync")),
        "{}",
        caps.body
    );
    let update = call(
        &app,
        &m,
        Method::PUT,
        &format!("/subscriptions/{id}/update"),
        Some(json!({"items": []})),
    )
    .await;
    assert_eq!(
        (update.status, update.code()),
        (409, "processor_billing"),
        "{}",
        update.body
    );

    // A renewal: the processor collects, no payment is made.
    advance(&app, &m, 31 * DAY).await;
    let c = cycles(&app, &m, &id).await;
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(
        (c[0]["status"].as_str(), c[0]["amount"].as_i64()),
        (Some("paid"), Some(5800))
    );
    assert!(c[0]["payment_id"].is_null());
    let invoice = c[0]["processor_invoice_id"].as_str().unwrap().to_owned();
    assert!(invoice.starts_with("binv_"), "{invoice}");
    let evs = events(&app, &m, &id).await;
    assert_eq!(
        types(&evs),
        ["subscription_active", "invoice_paid"],
        "an adopted subscription is announced in the state it is in"
    );
    let paid = &evs[1]["content"]["object"];
    assert!(paid["payment"].is_null(), "{paid}");
    assert_eq!(paid["invoice"]["cycle_id"], c[0]["cycle_id"]);

    // The processor's card declines: a failed renewal, then the retry a day later collects.
    processor_change(&app, &m, &bsub, json!({"declines": true})).await;
    advance_past(&app, &m, &c[0]["period_end"], 3_600).await;
    let c = cycles(&app, &m, &id).await;
    assert_eq!(
        (c.len(), c[0]["status"].as_str()),
        (2, Some("open")),
        "{c:?}"
    );
    processor_change(&app, &m, &bsub, json!({"declines": false})).await;
    advance(&app, &m, DAY + 60).await;
    let c = cycles(&app, &m, &id).await;
    assert_eq!(
        (c[0]["status"].as_str(), c[0]["attempts"].as_i64()),
        (Some("paid"), Some(2)),
        "{c:?}"
    );

    // A chargeback of the first collection.
    let back = post(
        &app,
        &m,
        &format!("/sandbox/billing/invoices/{invoice}/chargeback"),
        json!({}),
    )
    .await;
    assert_eq!(back.status, 200, "{}", back.body);
    let twice = post(
        &app,
        &m,
        &format!("/sandbox/billing/invoices/{invoice}/chargeback"),
        json!({}),
    )
    .await;
    assert_eq!(
        (twice.status, twice.code()),
        (409, "invoice_not_disputable")
    );
    let evs = events(&app, &m, &id).await;
    let disputed = evs.last().unwrap();
    assert_eq!(disputed["event_type"], "invoice_disputed");
    assert_eq!(disputed["content"]["type"], "subscription_details");
    let o = &disputed["content"]["object"];
    assert!(o["dispute_id"].as_str().unwrap().starts_with("bdp_"), "{o}");
    assert_eq!(
        (
            o["subscription_id"].as_str(),
            o["amount"].as_i64(),
            o["currency"].as_str()
        ),
        (Some(id.as_str()), Some(5800), Some("EUR"))
    );
    assert_eq!(o["invoice_id"], cycles(&app, &m, &id).await[1]["cycle_id"]);
    assert_eq!(
        (
            o["dispute_status"].as_str(),
            o["test_mode"].as_bool(),
            o["processor"].as_str()
        ),
        (Some("needs_response"), Some(true), Some("billing_sandbox"))
    );
    assert_eq!(
        (
            o["processor_subscription_id"].as_str(),
            o["processor_invoice_id"].as_str()
        ),
        (Some(bsub.as_str()), Some(invoice.as_str()))
    );

    // Changes made at the processor come in on sync; changes made here go to the processor.
    processor_change(
        &app,
        &m,
        &bsub,
        json!({"status": "paused", "plan_id": "plan_starter_monthly", "quantity": 3}),
    )
    .await;
    let synced = post(&app, &m, &format!("/subscriptions/{id}/sync"), json!({})).await;
    assert_eq!(synced.status, 200, "{}", synced.body);
    assert_eq!(
        (
            synced.body["status"].as_str(),
            synced.body["amount"].as_i64(),
            synced.body["items"][0]["plan_id"].as_str()
        ),
        (Some("paused"), Some(2700), Some("plan_starter_monthly"))
    );
    let same = post(&app, &m, &format!("/subscriptions/{id}/sync"), json!({})).await;
    assert_eq!(
        same.body["transition_id"], synced.body["transition_id"],
        "nothing differs: no change"
    );
    let resumed = post(&app, &m, &format!("/subscriptions/{id}/resume"), json!({})).await;
    assert_eq!(resumed.body["status"], "active", "{}", resumed.body);
    let there = processor_change(&app, &m, &bsub, json!({})).await;
    assert_eq!(
        (there["status"].as_str(), there["subscription_id"].as_str()),
        (Some("active"), Some(id.as_str()))
    );
    processor_change(&app, &m, &bsub, json!({"status": "cancelled"})).await;
    let ended = post(&app, &m, &format!("/subscriptions/{id}/sync"), json!({})).await;
    assert_eq!(ended.body["status"], "cancelled", "{}", ended.body);
    let t: Vec<String> = types(&events(&app, &m, &id).await)
        .into_iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(
        t[t.len() - 3..],
        [
            "subscription_paused",
            "subscription_resumed",
            "subscription_cancelled"
        ],
        "{t:?}"
    );
}

#[actix_web::test]
async fn import_adopts_exactly_the_reviewed_set_once() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let a = at_processor(&app, &m, "plan_pro_monthly", 1).await;
    let b = at_processor(&app, &m, "plan_starter_monthly", 1).await;
    let c = at_processor(&app, &m, "plan_pro_yearly", 1).await;
    processor_change(&app, &m, &c, json!({"status": "cancelled"})).await;
    let first = post(
        &app,
        &m,
        "/subscriptions/adopt",
        json!({"processor_subscription_id": a}),
    )
    .await;
    assert_eq!(first.status, 201, "{}", first.body);

    let preview = post(&app, &m, "/subscriptions/import/preview", json!({})).await;
    assert_eq!(preview.status, 200, "{}", preview.body);
    let listed: Vec<&str> = preview.body["subscriptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["processor_subscription_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        listed,
        [b.as_str()],
        "adopted and cancelled ones are not listed"
    );
    assert_eq!(
        preview.body["already_adopted"][0]["processor_subscription_id"],
        a.as_str()
    );
    assert_eq!(
        preview.body["already_adopted"][0]["subscription_id"],
        first.body["subscription_id"]
    );
    let preview_id = preview.body["preview_id"].as_str().unwrap().to_owned();

    // Made at the processor after the review: not in this apply.
    let d = at_processor(&app, &m, "plan_pro_monthly", 4).await;
    let applied = post(
        &app,
        &m,
        "/subscriptions/import/apply",
        json!({"preview_id": preview_id}),
    )
    .await;
    assert_eq!(applied.status, 200, "{}", applied.body);
    assert_eq!(
        applied.body["adopted"].as_array().unwrap().len(),
        1,
        "{}",
        applied.body
    );
    assert_eq!(applied.body["subscriptions"], applied.body["adopted"]);
    let sub_b = applied.body["adopted"][0].as_str().unwrap().to_owned();
    let got = get(&app, &m, &format!("/subscriptions/{sub_b}")).await;
    assert_eq!(got.body["processor_subscription_id"], b.as_str());

    let twice = post(
        &app,
        &m,
        "/subscriptions/import/apply",
        json!({"preview_id": preview_id}),
    )
    .await;
    assert_eq!(twice.status, 200, "{}", twice.body);
    assert_eq!(twice.body["adopted"], json!([]));
    assert_eq!(twice.body["subscriptions"], json!([sub_b]));

    let next = post(&app, &m, "/subscriptions/import/preview", json!({})).await;
    let listed: Vec<&str> = next.body["subscriptions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["processor_subscription_id"].as_str().unwrap())
        .collect();
    assert_eq!(listed, [d.as_str()]);

    let unknown = post(
        &app,
        &m,
        "/subscriptions/import/apply",
        json!({"preview_id": "subprev_nope"}),
    )
    .await;
    assert_eq!((unknown.status, unknown.param()), (404, Some("preview_id")));
    let missing = post(&app, &m, "/subscriptions/import/apply", json!({})).await;
    assert_eq!((missing.status, missing.param()), (400, Some("preview_id")));
    let other = app.create_merchant("Other").await;
    let theirs = post(
        &app,
        &other,
        "/subscriptions/import/apply",
        json!({"preview_id": preview_id}),
    )
    .await;
    assert_eq!(theirs.status, 404, "another merchant's preview");
}

#[actix_web::test]
async fn a_subscription_to_a_processor_plan_is_made_there_and_collected_at_once() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let c = post(
        &app,
        &m,
        "/customers",
        json!({"name": "Bo", "email": "bo@example.com"}),
    )
    .await;
    let cid = c.body["customer_id"].as_str().unwrap().to_owned();
    for (body, param) in [
        (
            json!({"customer_id": cid, "plan_id": "plan_gold"}),
            "plan_id",
        ),
        (
            json!({"customer_id": cid, "plan_id": "plan_pro_monthly", "items": [{"price_id": "price_x"}]}),
            "items",
        ),
        (
            json!({"customer_id": cid, "plan_id": "plan_pro_monthly", "mandate_id": "man_x"}),
            "mandate_id",
        ),
        (
            json!({"customer_id": cid, "plan_id": "plan_pro_monthly", "quantity": 0}),
            "quantity",
        ),
        (
            json!({"customer_id": cid, "items": [], "quantity": 2}),
            "quantity",
        ),
    ] {
        let r = post(&app, &m, "/subscriptions", body.clone()).await;
        assert_eq!(
            (r.status, r.param()),
            (400, Some(param)),
            "{body}: {}",
            r.body
        );
    }
    let checkout = post(
        &app,
        &m,
        "/subscriptions/create",
        json!({"customer_id": cid, "plan_id": "plan_pro_monthly"}),
    )
    .await;
    assert_eq!((checkout.status, checkout.param()), (400, Some("plan_id")));

    let r = post(
        &app,
        &m,
        "/subscriptions",
        json!({"customer_id": cid, "plan_id": "plan_pro_monthly", "quantity": 3}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let s = r.body;
    let id = s["subscription_id"].as_str().unwrap().to_owned();
    assert_eq!(
        (
            s["status"].as_str(),
            s["billing"].as_str(),
            s["amount"].as_i64()
        ),
        (Some("active"), Some("billing_sandbox"), Some(8700))
    );
    assert_eq!(s["customer_id"], cid.as_str());
    let bsub = s["processor_subscription_id"].as_str().unwrap().to_owned();
    let there = processor_change(&app, &m, &bsub, json!({})).await;
    assert_eq!(
        (
            there["customer_email"].as_str(),
            there["subscription_id"].as_str()
        ),
        (Some("bo@example.com"), Some(id.as_str()))
    );
    let first = cycles(&app, &m, &id).await;
    assert_eq!(first.len(), 1);
    assert_eq!(first[0]["status"], "paid");
    assert!(first[0]["payment_id"].is_null() && first[0]["processor_invoice_id"].is_string());
    advance(&app, &m, 31 * DAY).await;
    assert_eq!(cycles(&app, &m, &id).await.len(), 2);
    assert_eq!(
        types(&events(&app, &m, &id).await),
        ["subscription_active", "invoice_paid", "invoice_paid"]
    );
}

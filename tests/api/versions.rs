//! Every object with a version shows it: it rises with each committed change, `GET` answers the
//! latest, and each event about the object carries the version its change committed.

use crate::common;

use actix_web::http::Method;
use common::{card, spawn_app, Answer, Merchant, TestApp};
use serde_json::{json, Value};

/// The object's `version`, an integer.
fn version(object: &Value) -> i64 {
    object["version"]
        .as_i64()
        .unwrap_or_else(|| panic!("no integer version in {object}"))
}

/// A successful answer (`status`), and its object's version.
fn answered(r: &Answer, status: u16) -> i64 {
    assert_eq!(r.status, status, "{}", r.body);
    version(&r.body)
}

/// The version `GET path` answers.
async fn current(app: &TestApp, m: &Merchant, path: &str) -> i64 {
    answered(&app.call(m, Method::GET, path, None).await, 200)
}

/// The events announced for an object, oldest first: each one's type and the version of the
/// object it carries (checked to be about that object).
async fn announced(app: &TestApp, m: &Merchant, id_field: &str, id: &str) -> Vec<(String, i64)> {
    let r = app
        .call(
            m,
            Method::POST,
            &format!("/events/{}", m.merchant_id),
            Some(json!({"object_id": id, "limit": 100})),
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let mut events: Vec<(String, i64)> = r.body["data"]
        .as_array()
        .expect("a list of events")
        .iter()
        .map(|e| {
            let object = &e["envelope"]["content"]["object"];
            assert_eq!(object[id_field], id, "{e}");
            (
                e["event_type"].as_str().unwrap_or_default().to_owned(),
                version(object),
            )
        })
        .collect();
    events.reverse();
    events
}

fn strictly_increasing(versions: &[i64]) {
    assert!(
        versions.windows(2).all(|w| w[0] < w[1]),
        "versions must rise with each change: {versions:?}"
    );
}

fn versions_of(events: &[(String, i64)]) -> Vec<i64> {
    events.iter().map(|(_, v)| *v).collect()
}

#[actix_web::test]
async fn a_payment_and_its_refund_show_the_version_of_each_change_in_answers_and_events() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;

    let created = app
        .create_payment(
            &m,
            json!({"amount": 500, "currency": "USD", "capture_method": "manual"}),
        )
        .await;
    let v_created = answered(&created, 201);
    let id = created.body["payment_id"].as_str().unwrap().to_owned();
    let path = format!("/payments/{id}");
    assert_eq!(current(&app, &m, &path).await, v_created);

    let confirmed = app
        .call(
            &m,
            Method::POST,
            &format!("{path}/confirm"),
            Some(json!({"payment_method_data": card("4242424242424242")})),
        )
        .await;
    let v_confirmed = answered(&confirmed, 200);
    assert_eq!(confirmed.body["status"], "requires_capture");
    assert_eq!(current(&app, &m, &path).await, v_confirmed);

    let captured = app
        .call(
            &m,
            Method::POST,
            &format!("{path}/capture"),
            Some(json!({})),
        )
        .await;
    let v_captured = answered(&captured, 200);
    assert_eq!(captured.body["status"], "succeeded");
    assert_eq!(current(&app, &m, &path).await, v_captured);

    let refunded = app
        .call(
            &m,
            Method::POST,
            "/refunds",
            Some(json!({"payment_id": id, "amount": 200})),
        )
        .await;
    let v_refund = answered(&refunded, 201);
    assert_eq!(refunded.body["status"], "succeeded");
    let v_refunded = current(&app, &m, &path).await;
    strictly_increasing(&[v_created, v_confirmed, v_captured, v_refunded]);

    // Each payment event carries the version of the change it announces, in order.
    let events = announced(&app, &m, "payment_id", &id).await;
    assert_eq!(
        events,
        [
            ("payment_authorized".to_owned(), v_confirmed),
            ("payment_succeeded".to_owned(), v_captured),
        ]
    );
    strictly_increasing(&versions_of(&events));

    // The refund: its answer, its event and its later change.
    let refund_id = refunded.body["refund_id"].as_str().unwrap().to_owned();
    let refund_path = format!("/refunds/{refund_id}");
    assert_eq!(current(&app, &m, &refund_path).await, v_refund);
    let events = announced(&app, &m, "refund_id", &refund_id).await;
    assert_eq!(events, [("refund_succeeded".to_owned(), v_refund)]);
    let updated = app
        .call(
            &m,
            Method::POST,
            &refund_path,
            Some(json!({"metadata": {"ticket": "T-1"}})),
        )
        .await;
    let v_updated = answered(&updated, 200);
    strictly_increasing(&[v_refund, v_updated]);
    assert_eq!(current(&app, &m, &refund_path).await, v_updated);
    // The payment's list shows the same version as its GET.
    let listed = app
        .call(&m, Method::POST, "/payments/list", Some(json!({})))
        .await;
    assert_eq!(listed.status, 200, "{}", listed.body);
    let item = listed.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["payment_id"] == id.as_str())
        .expect("the payment is listed");
    assert_eq!(version(item), v_refunded);
}

#[actix_web::test]
async fn customers_and_mandates_show_the_version_of_each_change() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;

    let created = app
        .call(&m, Method::POST, "/customers", Some(json!({"name": "Ana"})))
        .await;
    let v_created = answered(&created, 201);
    let cid = created.body["customer_id"].as_str().unwrap().to_owned();
    let path = format!("/customers/{cid}");
    assert_eq!(current(&app, &m, &path).await, v_created);

    let updated = app
        .call(
            &m,
            Method::POST,
            &path,
            Some(json!({"email": "ana@example.com"})),
        )
        .await;
    let v_updated = answered(&updated, 200);
    assert_eq!(current(&app, &m, &path).await, v_updated);

    // A payment saves the card (the customer's default now) and makes a mandate.
    let paid = app
        .create_payment(
            &m,
            json!({"amount": 500, "currency": "EUR", "confirm": true, "customer_id": cid,
                "setup_future_usage": "off_session", "payment_method_data": card("4242424242424242")}),
        )
        .await;
    assert_eq!(paid.status, 201, "{}", paid.body);
    let v_saved = current(&app, &m, &path).await;
    let mandate_id = paid.body["mandate_id"]
        .as_str()
        .expect("a mandate was made")
        .to_owned();
    let mandate_path = format!("/mandates/{mandate_id}");
    let v_mandate = current(&app, &m, &mandate_path).await;
    let revoked = app
        .call(
            &m,
            Method::POST,
            &format!("/mandates/revoke/{mandate_id}"),
            None,
        )
        .await;
    let v_revoked = answered(&revoked, 200);
    assert_eq!(revoked.body["status"], "revoked");
    assert_eq!(current(&app, &m, &mandate_path).await, v_revoked);
    strictly_increasing(&[v_mandate, v_revoked]);
    let events = announced(&app, &m, "mandate_id", &mandate_id).await;
    assert_eq!(
        events,
        [
            ("mandate_active".to_owned(), v_mandate),
            ("mandate_revoked".to_owned(), v_revoked),
        ]
    );

    // Deleting the customer redacts it: a change like any other.
    let deleted = app.call(&m, Method::DELETE, &path, None).await;
    assert_eq!(deleted.status, 200, "{}", deleted.body);
    let v_deleted = version(&deleted.body["customer"]);
    assert_eq!(current(&app, &m, &path).await, v_deleted);
    strictly_increasing(&[v_created, v_updated, v_saved, v_deleted]);
}

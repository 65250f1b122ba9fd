//! The strict Stripe tests' shorthands: a payd with one merchant whose shop is connected to a
//! strict Stripe (`strict_stripe`), payments on it, and the PaymentIntents Stripe holds for them.

use std::sync::Arc;

use actix_web::http::Method;
use serde_json::{json, Value};

use super::{card, spawn_with, strict_stripe::StrictStripe, Answer, Merchant, TestApp, TestDb};

pub async fn setup() -> Option<(TestApp, Merchant, StrictStripe, String)> {
    let ls = StrictStripe::start().await?;
    let app = spawn_with(Arc::new(TestDb::new().await), &[]).await;
    let m = app.create_merchant("Acme").await;
    let account = ls.connect(&app, &m).await;
    Some((app, m, ls, account))
}

pub async fn pay(app: &TestApp, m: &Merchant, body: Value) -> Answer {
    let mut full = json!({"amount": 1000, "currency": "USD", "confirm": true,
        "payment_method_data": card("4242424242424242")});
    full.as_object_mut()
        .unwrap()
        .extend(body.as_object().unwrap().clone());
    app.create_payment(m, full).await
}

pub async fn get(app: &TestApp, m: &Merchant, path: &str) -> Value {
    let r = app.call(m, Method::GET, path, None).await;
    assert_eq!(r.status, 200, "{path}: {}", r.body);
    r.body
}

pub async fn post(app: &TestApp, m: &Merchant, path: &str, body: Value) -> Answer {
    app.call(m, Method::POST, path, Some(body)).await
}

/// The PaymentIntents localstripe holds for a payment.
pub async fn intents_of(ls: &StrictStripe, payment_id: &str) -> Vec<Value> {
    let pis = ls.get("/v1/payment_intents?limit=100").await;
    pis["data"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|pi| pi["metadata"]["payd_payment_id"] == payment_id)
        .cloned()
        .collect()
}

/// The id of the (first) PaymentIntent localstripe holds for a payment.
pub async fn intent_of(ls: &StrictStripe, payment_id: &str) -> String {
    intents_of(ls, payment_id).await[0]["id"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// A payment's status and its last error's code, as one value to compare.
pub fn outcome(p: &Value) -> (Option<&str>, Option<&str>) {
    (p["status"].as_str(), p["last_error"]["code"].as_str())
}

/// A new customer of the merchant: its id.
pub async fn customer(app: &TestApp, m: &Merchant) -> String {
    let c = post(app, m, "/customers", json!({"name": "Ana"})).await;
    assert_eq!(c.status, 201, "{}", c.body);
    c.body["customer_id"].as_str().unwrap().to_owned()
}

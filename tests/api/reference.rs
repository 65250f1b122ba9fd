//! The reference an integrator builds from (`/openapi.json`, `/docs`) holds to the code: every
//! operation has a summary and a description naming the errors it answers and the events it
//! causes (each a row of the error codes' and event types' tables), a unique operationId, and
//! an example recorded from a real answer that its schemas still accept; every event type's
//! recorded sample matches its schema.

use crate::common;

use std::collections::{BTreeSet, HashMap};

use actix_web::http::Method;
use common::{
    card,
    receiver::{validator, Contract},
    spawn_app,
};
use payd::{error::codes::CODES, event_types::EVENT_TYPES};
use serde_json::{json, Value};

async fn document() -> Value {
    let app = spawn_app().await;
    let doc = app
        .send(Method::GET, "/openapi.json", None, None, &[])
        .await;
    assert_eq!(doc.status, 200);
    app.stop().await;
    doc.body
}

/// `(path, method, operation)` of every operation.
fn operations(doc: &Value) -> Vec<(&str, &str, &Value)> {
    let mut ops = Vec::new();
    for (path, item) in doc["paths"].as_object().expect("paths") {
        for (method, op) in item.as_object().into_iter().flatten() {
            ops.push((path.as_str(), method.as_str(), op));
        }
    }
    ops
}

/// The backticked names of a description's paragraph that starts with `label`, with the
/// `(status)` after each when there is one; `None` when there is no such paragraph.
fn named(description: &str, label: &str) -> Option<Vec<(String, Option<u16>)>> {
    let line = description
        .split("\n\n")
        .find_map(|p| p.trim().strip_prefix(label))?;
    let mut names = Vec::new();
    let mut rest = line;
    while let Some((_, after)) = rest.split_once('`') {
        let Some((name, tail)) = after.split_once('`') else {
            break;
        };
        let status = tail
            .trim_start()
            .strip_prefix('(')
            .and_then(|t| t.split(')').next())
            .and_then(|s| s.parse().ok());
        names.push((name.to_owned(), status));
        rest = tail;
    }
    Some(names)
}

#[actix_web::test]
async fn every_operation_says_what_it_does_how_it_fails_and_what_it_sends() {
    let doc = document().await;
    let mut ids = BTreeSet::new();
    let mut problems = Vec::new();
    for (path, method, op) in operations(&doc) {
        let at = format!("{} {path}", method.to_uppercase());
        let id = op["operationId"].as_str().unwrap_or_default();
        if !ids.insert(id.to_owned()) {
            problems.push(format!(
                "{at}: operationId `{id}` is another operation's too"
            ));
        }
        let summary = op["summary"].as_str().unwrap_or_default();
        if summary.is_empty() || summary.contains('\n') {
            problems.push(format!(
                "{at}: the summary is one line (the doc comment's first)"
            ));
        }
        let description = op["description"].as_str().unwrap_or_default();
        let what = description.split("\n\n").next().unwrap_or_default();
        if what.starts_with("Fails:") || what.split_whitespace().count() < 6 {
            problems.push(format!("{at}: no description of what it does"));
        }
        match named(description, "Fails:") {
            None => problems.push(format!("{at}: no `Fails:` paragraph")),
            Some(codes) => {
                for (code, status) in codes {
                    let known = CODES
                        .iter()
                        .any(|c| c.code == code && Some(c.status) == status);
                    if !known {
                        problems.push(format!(
                            "{at}: `{code}` ({status:?}) is no row of src/error/codes.rs"
                        ));
                    }
                }
            }
        }
        match named(description, "Events:") {
            None => problems.push(format!("{at}: no `Events:` paragraph")),
            Some(events) => {
                for (event, _) in events {
                    if !EVENT_TYPES.iter().any(|t| t.name == event) {
                        problems.push(format!("{at}: `{event}` is no event type payd sends"));
                    }
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

fn violations(doc: &Value, schema: &Value, value: &Value) -> Vec<String> {
    validator(doc, schema)
        .iter_errors(value)
        .take(3)
        .map(|e| format!("{e} at `{}`", e.instance_path))
        .collect()
}

#[actix_web::test]
async fn every_operation_has_an_example_recorded_from_a_real_answer_that_still_matches() {
    let doc = document().await;
    let mut problems = Vec::new();
    let mut documented = BTreeSet::new();
    for (path, method, op) in operations(&doc) {
        let at = format!("{} {path}", method.to_uppercase());
        let id = op["operationId"].as_str().unwrap_or_default();
        documented.insert(id.to_owned());
        let Some(rec) = payd::examples::operation(id) else {
            problems.push(format!(
                "{at}: no example in docs/examples/operations/{id}.json (PAYD_RECORD_EXAMPLES=1 \
                 cargo test records the first success a test gets)"
            ));
            continue;
        };
        if rec.method != method.to_uppercase() {
            problems.push(format!("{at}: the example is of a {} request", rec.method));
        }
        let json = |content: &Value| content["application/json"].clone();
        if let Some(request) = &rec.request {
            let body = json(&op["requestBody"]["content"]);
            if body.is_null() {
                problems.push(format!(
                    "{at}: the example sends JSON the operation does not take"
                ));
            } else {
                for v in violations(&doc, &body["schema"], request) {
                    problems.push(format!("{at}: the example's request: {v}"));
                }
            }
        }
        let answer = &op["responses"][rec.status.to_string()];
        if answer.is_null() {
            problems.push(format!(
                "{at}: the example answers {}, not documented",
                rec.status
            ));
        }
        let answer_body = json(&answer["content"]);
        match (&rec.response, answer_body.is_null()) {
            (Some(response), false) => {
                for v in violations(&doc, &answer_body["schema"], response) {
                    problems.push(format!("{at}: the example's answer: {v}"));
                }
            }
            (None, false) => problems.push(format!("{at}: the example's answer is not JSON")),
            (Some(_), true) => problems.push(format!(
                "{at}: the example answers JSON the document does not say"
            )),
            (None, true) => {}
        }
    }
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/examples/operations");
    for entry in std::fs::read_dir(&dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let id = name.trim_end_matches(".json");
        if !documented.contains(id) {
            problems.push(format!(
                "docs/examples/operations/{name}: no operation is `{id}`"
            ));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

#[actix_web::test]
async fn every_event_sample_matches_its_event_types_schema() {
    let doc = document().await;
    let contract = Contract::of(&doc);
    let hooks = doc["webhooks"].as_object().expect("webhooks");
    let mut problems: HashMap<String, Vec<String>> = HashMap::new();
    for t in EVENT_TYPES {
        let content = &hooks[t.name]["post"]["requestBody"]["content"]["application/json"];
        let sample = &content["examples"]["recorded"]["value"];
        let found = if sample.is_null() {
            vec!["no sample in the webhooks section".to_owned()]
        } else {
            contract.violations(&serde_json::to_vec(sample).expect("JSON"))
        };
        if !found.is_empty() {
            problems.insert(t.name.to_owned(), found);
        }
    }
    assert!(problems.is_empty(), "{problems:#?}");
}

/// One object of each core resource as a client reads it, snapshotted (`insta`): a field
/// renamed, dropped or added shows in review as a change of the wire shape, not only of a
/// schema. Ids, times and secrets are replaced by their kind (`stable`).
#[actix_web::test]
async fn one_object_per_resource_keeps_its_shape() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let call = |method: Method, path: String, body: Option<Value>| {
        let (app, m) = (&app, &m);
        async move {
            let r = app.call(m, method, &path, body).await;
            assert!(r.status < 300, "{path}: {} {}", r.status, r.body);
            r.body
        }
    };
    let customer = call(
        Method::POST,
        "/customers".into(),
        Some(json!({"name": "Ana", "email": "ana@example.com", "metadata": {"crm": "7"}})),
    )
    .await;
    let product = call(
        Method::POST,
        "/products".into(),
        Some(json!({"name": "Tasse", "prices": [{"unit_amount": 335, "currency": "EUR"}]})),
    )
    .await;
    let payment = call(
        Method::POST,
        "/payments".into(),
        Some(json!({"amount": 1007, "currency": "EUR", "confirm": true,
            "customer_id": customer["customer_id"], "payment_method_data": card("4242424242424242"),
            "lines": [{"line_id": "a", "name": "Tasse", "quantity": 3, "unit_amount": 335,
                "tax_amount": 2}]})),
    )
    .await;
    let payment_id = payment["payment_id"].as_str().unwrap().to_owned();
    let invoice = call(
        Method::POST,
        "/invoices".into(),
        Some(json!({"payment_id": payment_id})),
    )
    .await;
    let invoice_id = invoice["invoice_id"].as_str().unwrap().to_owned();
    let invoice = call(
        Method::POST,
        format!("/invoices/{invoice_id}/finalize"),
        Some(json!({})),
    )
    .await;
    let refund = call(
        Method::POST,
        "/refunds".into(),
        Some(json!({"payment_id": payment_id, "lines": [{"line_id": "a", "quantity": 1}]})),
    )
    .await;
    let payment = call(Method::GET, format!("/payments/{payment_id}"), None).await;
    // The sandbox disputes this card's payment once its delay has passed.
    let disputed = call(
        Method::POST,
        "/payments".into(),
        Some(json!({"amount": 500, "currency": "EUR", "confirm": true,
            "payment_method_data": card("4000000000000259")})),
    )
    .await;
    app.clock.advance(chrono::Duration::seconds(6));
    app.run_due_jobs().await;
    let disputed = disputed["payment_id"].as_str().unwrap();
    let path = format!("/disputes/list?payment_id={disputed}");
    let dispute = call(Method::GET, path, None).await["data"][0].clone();
    // A subscription on a monthly price, charged under the mandate a saved card made.
    let saving = call(
        Method::POST,
        "/payments".into(),
        Some(json!({"amount": 100, "currency": "EUR", "confirm": true,
            "customer_id": customer["customer_id"], "setup_future_usage": "off_session",
            "payment_method_data": card("4242424242424242")})),
    )
    .await;
    let mandate_id = saving["mandate_id"].as_str().unwrap().to_owned();
    let mandate = call(Method::GET, format!("/mandates/{mandate_id}"), None).await;
    let plan = call(
        Method::POST,
        "/products".into(),
        Some(
            json!({"name": "Abo", "prices": [{"unit_amount": 990, "currency": "EUR",
            "recurring": {"interval": "month"}}]}),
        ),
    )
    .await;
    let subscription = call(
        Method::POST,
        "/subscriptions".into(),
        Some(
            json!({"customer_id": customer["customer_id"], "mandate_id": mandate_id,
            "items": [{"price_id": plan["prices"][0]["price_id"], "quantity": 1}]}),
        ),
    )
    .await;
    let payout = call(
        Method::POST,
        "/payouts/create".into(),
        Some(
            json!({"amount": 300, "currency": "EUR", "destination": {"bank_account": {
            "account_number": "000123456789", "routing_number": "110000000",
            "holder_name": "Ana Lima"}}}),
        ),
    )
    .await;
    let filter = json!({"object_id": payment_id, "event_type": "payment_succeeded"});
    let path = format!("/events/{}", m.merchant_id);
    let event = call(Method::POST, path, Some(filter)).await["data"][0].clone();
    let mut objects = json!({"customer": customer, "product": product, "payment": payment,
        "refund": refund, "invoice": invoice, "dispute": dispute, "mandate": mandate,
        "subscription": subscription, "payout": payout, "event": event});
    stable(&mut objects);
    insta::assert_json_snapshot!("one_object_per_resource", objects);
    app.stop().await;
}

/// `value` with what differs between runs replaced by its kind: a payd id by `[prefix_id]`
/// (also inside a URL), an RFC 3339 time by `[time]`, a date by `[date]`, a secret by
/// `[secret]`, a processor's reference by `[reference]`, the test
/// server's address by `[base]`.
fn stable(value: &mut Value) {
    match value {
        Value::Object(fields) => {
            for (key, v) in fields.iter_mut() {
                match v {
                    Value::String(_) if key.contains("secret") => *v = json!("[secret]"),
                    Value::String(_) if key.ends_with("_reference") => *v = json!("[reference]"),
                    _ => stable(v),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(stable),
        Value::String(s) => {
            if chrono::DateTime::parse_from_rfc3339(s).is_ok() {
                *s = "[time]".into();
                return;
            }
            if chrono::NaiveDate::parse_from_str(s, "%Y-%m-%d").is_ok() {
                *s = "[date]".into();
                return;
            }
            let parts: Vec<String> = s
                .split('/')
                .map(|part| match part.split_once('_') {
                    Some((prefix, hex))
                        if hex.len() == 32
                            && hex.bytes().all(|b| b.is_ascii_hexdigit())
                            && prefix.bytes().all(|b| b.is_ascii_lowercase()) =>
                    {
                        format!("[{prefix}_id]")
                    }
                    _ if part.starts_with("127.0.0.1:") => "[base]".into(),
                    _ => part.to_owned(),
                })
                .collect();
            *s = parts.join("/");
        }
        _ => {}
    }
}

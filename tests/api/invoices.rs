//! Invoices and credit notes through the HTTP API: drafts from lines, payments and billing
//! cycles; tax rules and their precedence; finalize with gapless numbers (also under 50
//! concurrent finalizes on two instances), frozen parties and a PDF whose text reads back and
//! whose bytes never change; void and credit-note refusals; share links that expire and are
//! revoked; and the events with their `kind`.

use crate::common;

use std::collections::BTreeSet;

use actix_web::http::Method;
use chrono::Duration;
use common::{card, spawn_app, Merchant, TestApp};
use payd::clock::Clock;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};

async fn get(app: &TestApp, m: &Merchant, path: &str) -> common::Answer {
    app.call(m, Method::GET, path, None).await
}

async fn post(app: &TestApp, m: &Merchant, path: &str, body: Value) -> common::Answer {
    app.call(m, Method::POST, path, Some(body)).await
}

async fn put(app: &TestApp, m: &Merchant, path: &str, body: Value) -> common::Answer {
    app.call(m, Method::PUT, path, Some(body)).await
}

fn id(v: &Value) -> String {
    v["invoice_id"].as_str().expect("an invoice id").to_owned()
}

/// A draft of these lines in EUR for a buyer in `country`.
async fn draft(app: &TestApp, m: &Merchant, lines: Value, country: &str) -> Value {
    let r = post(
        app,
        m,
        "/invoices",
        json!({"currency": "EUR", "lines": lines,
            "buyer": {"name": "Жанна Иванова", "email": "zh@example.com", "country": country,
                "address": {"line1": "Tverskaya 1", "city": "Moskva", "postal_code": "125009",
                    "country": country}}}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body
}

async fn finalize(app: &TestApp, m: &Merchant, id: &str) -> Value {
    let r = post(app, m, &format!("/invoices/{id}/finalize"), json!({})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    r.body
}

async fn pdf_of(app: &TestApp, m: &Merchant, id: &str) -> common::Answer {
    let r = get(app, m, &format!("/invoices/{id}/pdf")).await;
    assert_eq!(r.status, 200, "{:?}", r.body);
    assert_eq!(r.header("content-type"), Some("application/pdf"));
    r
}

fn text_of(pdf: &[u8]) -> String {
    pdf_extract::extract_text_from_mem(pdf).expect("the PDF's text reads back")
}

/// The newest events of an object (up to 100), oldest first.
async fn events(app: &TestApp, m: &Merchant, object_id: &str) -> Vec<Value> {
    let r = post(
        app,
        m,
        &format!("/events/{}", m.merchant_id),
        json!({"object_id": object_id, "limit": 100}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let mut list = r.body["data"].as_array().unwrap().clone();
    list.reverse();
    list
}

#[actix_web::test]
async fn an_invoice_of_lines_is_taxed_numbered_frozen_rendered_and_announced() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let s = put(
        &app,
        &m,
        "/invoice-settings",
        json!({"number_prefix": "ACME-", "payment_terms_days": 14, "locale": "de",
            "footer": "Danke für Ihren Einkauf",
            "seller": {"name": "Atelier Łódź GmbH", "tax_id": "DE123456789", "country": "DE",
                "address": {"line1": "Hauptstraße 5", "city": "Berlin", "postal_code": "10115",
                    "country": "DE"}}}),
    )
    .await;
    assert_eq!(s.status, 200, "{}", s.body);
    assert_eq!(s.body["effective"]["credit_note_prefix"], "CN-");
    let r = put(
        &app,
        &m,
        "/invoice-settings/tax-rules",
        json!({"rules": [{"rate_bps": 1900, "country": "DE"},
            {"rate_bps": 700, "country": "DE", "tax_category": "books"}]}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let d = draft(
        &app,
        &m,
        json!([{"name": "Widget", "quantity": 3, "unit_amount": 1050},
            {"name": "Buch", "unit_amount": 2000, "tax_category": "books"}]),
        "DE",
    )
    .await;
    let inv = id(&d);
    assert!(inv.starts_with("inv_"));
    assert_eq!(
        (d["status"].as_str(), d["kind"].as_str()),
        (Some("draft"), Some("invoice"))
    );
    assert!(d["number"].is_null());
    // 3 × 10.50 = 31.50 at 19 % is 5.985 → 5.98 (half to even); 20.00 at 7 % is 1.40.
    assert_eq!(d["lines"][0]["tax_amount"], 598);
    assert_eq!(d["lines"][1]["tax_amount"], 140);
    assert_eq!(
        (
            d["subtotal"].as_i64(),
            d["tax"].as_i64(),
            d["total"].as_i64()
        ),
        (Some(5150), Some(738), Some(5888))
    );
    assert_eq!(d["tax_breakdown"].as_array().unwrap().len(), 2);

    // A draft has no PDF and no link; it can be edited.
    let r = get(&app, &m, &format!("/invoices/{inv}/pdf")).await;
    assert_eq!((r.status, r.code()), (409, "invoice_draft"));
    let r = post(&app, &m, &format!("/invoices/{inv}/share-link"), json!({})).await;
    assert_eq!((r.status, r.code()), (409, "invoice_draft"));
    let r = app
        .call(
            &m,
            Method::PATCH,
            &format!("/invoices/{inv}"),
            Some(json!({"memo": "Bestellung 42"})),
        )
        .await;
    assert_eq!(
        (r.status, r.body["memo"].as_str()),
        (200, Some("Bestellung 42"))
    );

    let f = finalize(&app, &m, &inv).await;
    assert_eq!(f["status"], "open");
    assert_eq!(f["number"], "ACME-000001");
    assert_eq!(f["seller"]["name"], "Atelier Łódź GmbH");
    assert_eq!(f["buyer"]["name"], "Жанна Иванова");
    assert_eq!(
        (f["amount_paid"].as_i64(), f["amount_due"].as_i64()),
        (Some(0), Some(5888))
    );
    let due = (app.clock.now() + Duration::days(14))
        .date_naive()
        .to_string();
    assert_eq!(f["due_date"].as_str(), Some(due.as_str()));

    // Frozen: a seller changed afterwards does not reach it, and it cannot be edited.
    put(
        &app,
        &m,
        "/invoice-settings",
        json!({"number_prefix": "ACME-", "seller": {"name": "Someone Else"}}),
    )
    .await;
    assert_eq!(
        get(&app, &m, &format!("/invoices/{inv}")).await.body["seller"]["name"],
        "Atelier Łódź GmbH"
    );
    let r = app
        .call(
            &m,
            Method::PATCH,
            &format!("/invoices/{inv}"),
            Some(json!({"memo": "x"})),
        )
        .await;
    assert_eq!((r.status, r.code()), (409, "invalid_state"));
    let r = app
        .call(&m, Method::DELETE, &format!("/invoices/{inv}"), None)
        .await;
    assert_eq!((r.status, r.code()), (409, "invalid_state"));
    assert_eq!(
        post(&app, &m, &format!("/invoices/{inv}/finalize"), json!({}))
            .await
            .status,
        409
    );

    // The PDF: its text reads back, and every download is the same bytes.
    let first = pdf_of(&app, &m, &inv).await;
    let text = text_of(&first.raw);
    for needle in [
        "ACME-000001",
        "Widget",
        "Buch",
        "Жанна Иванова",
        "Atelier Łódź GmbH",
        "58,88",
        "€",
        "19%",
        "7%",
        "Bestellung 42",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
    }
    let sha = hex::encode(Sha256::digest(&first.raw));
    assert_eq!(first.header("x-pdf-sha256"), Some(sha.as_str()));
    for _ in 0..3 {
        assert_eq!(pdf_of(&app, &m, &inv).await.raw, first.raw);
    }

    // Announced with its kind; voided and announced again; a second void is refused.
    let v = post(&app, &m, &format!("/invoices/{inv}/void"), json!({})).await;
    assert_eq!((v.status, v.body["status"].as_str()), (200, Some("void")));
    assert_eq!(
        post(&app, &m, &format!("/invoices/{inv}/void"), json!({}))
            .await
            .status,
        409
    );
    let evs = events(&app, &m, &inv).await;
    let types: Vec<&str> = evs
        .iter()
        .map(|e| e["event_type"].as_str().unwrap())
        .collect();
    assert_eq!(
        types,
        ["merchant_invoice_finalized", "merchant_invoice_voided"]
    );
    assert_eq!(
        evs[0]["envelope"]["content"]["type"],
        "merchant_invoice_details"
    );
    assert_eq!(evs[0]["envelope"]["content"]["object"]["kind"], "invoice");
    assert_eq!(
        evs[0]["envelope"]["content"]["object"]["number"],
        "ACME-000001"
    );
    assert_eq!(evs[1]["envelope"]["content"]["object"]["status"], "void");

    // The next invoice takes the next number; a deleted draft takes none and is gone.
    let gone = draft(&app, &m, json!([{"name": "x", "unit_amount": 1}]), "DE").await;
    let r = app
        .call(
            &m,
            Method::DELETE,
            &format!("/invoices/{}", id(&gone)),
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        get(&app, &m, &format!("/invoices/{}", id(&gone)))
            .await
            .status,
        404
    );
    let next = draft(
        &app,
        &m,
        json!([{"name": "Widget", "unit_amount": 100}]),
        "DE",
    )
    .await;
    assert_eq!(
        finalize(&app, &m, &id(&next)).await["number"],
        "ACME-000002"
    );
    let list = get(&app, &m, "/invoices?kind=invoice&status=open").await;
    assert_eq!(
        list.body["data"].as_array().unwrap().len(),
        1,
        "{}",
        list.body
    );

    // Lines that name the catalog name this shop's.
    let tea = post(
        &app,
        &m,
        "/products",
        json!({"name": "Tea", "prices": [{"unit_amount": 450,
        "currency": "EUR"}]}),
    )
    .await;
    let price = tea.body["prices"][0]["price_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let named = json!({"currency": "EUR", "lines": [{"name": "Tea", "unit_amount": 450,
        "price_id": price}]});
    let r = post(&app, &m, "/invoices", named.clone()).await;
    assert_eq!(r.status, 201, "{}", r.body);
    let r = app
        .call(
            &m,
            Method::PATCH,
            &format!("/invoices/{}", id(&r.body)),
            Some(json!({"currency": "USD"})),
        )
        .await;
    assert_eq!(
        (r.status, r.param()),
        (400, Some("lines[0].price_id")),
        "{}",
        r.body
    );
    let other = app.create_merchant("Other").await;
    let r = post(&app, &other, "/invoices", named).await;
    assert_eq!(
        (r.status, r.param()),
        (404, Some("lines[0].price_id")),
        "{}",
        r.body
    );

    // Bad input names the field.
    for (body, param) in [
        (json!({"currency": "EUR"}), "payment_id"),
        (json!({"currency": "EUR", "lines": []}), "lines"),
        (
            json!({"currency": "EUR", "lines": [{"name": "", "unit_amount": 1}]}),
            "lines[0].name",
        ),
        (
            json!({"currency": "EUR", "lines": [{"name": "a", "unit_amount": -1}]}),
            "lines[0].unit_amount",
        ),
        (
            json!({"currency": "XYZ", "lines": [{"name": "a", "unit_amount": 1}]}),
            "currency",
        ),
        (
            json!({"lines": [{"name": "a", "unit_amount": 1}]}),
            "currency",
        ),
        (
            json!({"currency": "EUR", "lines": [{"name": "a", "unit_amount": 1}],
            "buyer": {"name": "B", "country": "Germany"}}),
            "buyer.country",
        ),
    ] {
        let r = post(&app, &m, "/invoices", body.clone()).await;
        assert_eq!(
            (r.status, r.param()),
            (400, Some(param)),
            "{body}: {}",
            r.body
        );
    }
    app.stop().await;
}

#[actix_web::test]
async fn credit_notes_stay_within_each_line_and_the_total() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    put(
        &app,
        &m,
        "/invoice-settings/tax-rules",
        json!({"rules": [{"rate_bps": 2000, "country": "FR"}]}),
    )
    .await;
    // a: 3 × 10.00 + 20 % = 36.00; b: 5.00 + 1.00.
    let d = draft(
        &app,
        &m,
        json!([{"line_id": "a", "name": "Chaise", "quantity": 3, "unit_amount": 1000},
            {"line_id": "b", "name": "Livraison", "unit_amount": 500}]),
        "FR",
    )
    .await;
    let inv = id(&d);
    let r = post(
        &app,
        &m,
        &format!("/invoices/{inv}/credit-note"),
        json!({"amount": 100, "reason": "early"}),
    )
    .await;
    assert_eq!(
        (r.status, r.code()),
        (409, "invalid_state"),
        "a draft cannot be credited"
    );
    let f = finalize(&app, &m, &inv).await;
    assert_eq!(f["total"], 4200);

    let cn = post(
        &app,
        &m,
        &format!("/invoices/{inv}/credit-note"),
        json!({"lines": [{"line_id": "a", "quantity": 1}], "reason": "Stuhl beschädigt"}),
    )
    .await;
    assert_eq!(cn.status, 201, "{}", cn.body);
    let note = &cn.body;
    assert_eq!(
        (note["kind"].as_str(), note["status"].as_str()),
        (Some("credit_note"), Some("issued"))
    );
    assert_eq!(note["number"], "CN-000001");
    assert_eq!(note["original_invoice_id"].as_str(), Some(inv.as_str()));
    assert_eq!(
        (note["total"].as_i64(), note["tax"].as_i64()),
        (Some(1200), Some(200))
    );
    let original = get(&app, &m, &format!("/invoices/{inv}")).await.body;
    assert_eq!(original["amount_credited"], 1200);
    assert_eq!(original["amount_due"], 3000);
    assert_eq!(original["lines"][0]["quantity_credited"], 1);

    // Refusals: void with a credit note, more units or more money than is left.
    let r = post(&app, &m, &format!("/invoices/{inv}/void"), json!({})).await;
    assert_eq!((r.status, r.code()), (409, "invoice_credited"));
    let r = post(
        &app,
        &m,
        &format!("/invoices/{inv}/credit-note"),
        json!({"lines": [{"line_id": "a", "quantity": 3}], "reason": "r"}),
    )
    .await;
    assert_eq!((r.status, r.code()), (400, "credit_exceeds_line"));
    let r = post(
        &app,
        &m,
        &format!("/invoices/{inv}/credit-note"),
        json!({"lines": [{"line_id": "b", "amount": 601}], "reason": "r"}),
    )
    .await;
    assert_eq!((r.status, r.code()), (400, "credit_exceeds_line"));
    let r = post(
        &app,
        &m,
        &format!("/invoices/{inv}/credit-note"),
        json!({"amount": 3001, "reason": "r"}),
    )
    .await;
    assert_eq!((r.status, r.code()), (400, "credit_exceeds_total"));
    let r = post(
        &app,
        &m,
        &format!("/invoices/{inv}/credit-note"),
        json!({"lines": [{"line_id": "zz"}], "reason": "r"}),
    )
    .await;
    assert_eq!((r.status, r.code()), (400, "unknown_line"));
    for body in [
        json!({"amount": 1}),
        json!({"amount": 1, "reason": ""}),
        json!({"amount": 0, "reason": "r"}),
        json!({"reason": "r"}),
        json!({"amount": 1, "lines": [{"line_id": "a"}], "reason": "r"}),
    ] {
        let r = post(
            &app,
            &m,
            &format!("/invoices/{inv}/credit-note"),
            body.clone(),
        )
        .await;
        assert_eq!(r.status, 400, "{body}: {}", r.body);
    }

    // The rest, as an amount: the invoice is settled by its credit notes.
    let rest = post(
        &app,
        &m,
        &format!("/invoices/{inv}/credit-note"),
        json!({"amount": 3000, "reason": "Auftrag storniert"}),
    )
    .await;
    assert_eq!(rest.status, 201, "{}", rest.body);
    assert_eq!(rest.body["number"], "CN-000002");
    let original = get(&app, &m, &format!("/invoices/{inv}")).await.body;
    assert_eq!(
        (
            original["amount_credited"].as_i64(),
            original["amount_due"].as_i64()
        ),
        (Some(4200), Some(0))
    );
    assert_eq!(original["status"], "paid");
    for l in original["lines"].as_array().unwrap() {
        assert_eq!(l["amount_credited"], l["total"], "{l}");
        assert_eq!(l["tax_credited"], l["tax_amount"], "{l}");
    }
    let r = post(
        &app,
        &m,
        &format!("/invoices/{inv}/credit-note"),
        json!({"amount": 1, "reason": "r"}),
    )
    .await;
    assert_eq!((r.status, r.code()), (400, "credit_exceeds_total"));
    // A credit note is not an invoice: no credit note, void or payment of its own.
    let note_id = id(note);
    let r = post(&app, &m, &format!("/invoices/{note_id}/void"), json!({})).await;
    assert_eq!((r.status, r.code()), (409, "invalid_state"));

    // Its PDF says what it is and which invoice it credits; its event says its kind.
    let text = text_of(&pdf_of(&app, &m, &note_id).await.raw);
    for needle in [
        "CREDIT NOTE",
        "CN-000001",
        "INV-000001",
        "Stuhl beschädigt",
        "Chaise",
    ] {
        assert!(text.contains(needle), "{needle:?} missing from:\n{text}");
    }
    let evs = events(&app, &m, &note_id).await;
    assert_eq!(evs.len(), 1);
    assert_eq!(evs[0]["event_type"], "merchant_invoice_finalized");
    assert_eq!(
        evs[0]["envelope"]["content"]["object"]["kind"],
        "credit_note"
    );
    let notes = get(
        &app,
        &m,
        &format!("/invoices?kind=credit_note&original_invoice_id={inv}"),
    )
    .await;
    assert_eq!(
        notes.body["data"].as_array().unwrap().len(),
        2,
        "{}",
        notes.body
    );
    app.stop().await;
}

#[actix_web::test]
async fn invoices_from_a_captured_payment_and_a_paid_cycle_are_paid_at_finalize() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let p = app
        .create_payment(
            &m,
            json!({"amount": 3000, "currency": "EUR", "confirm": true,
                "payment_method_data": card("4242424242424242"),
                "lines": [{"name": "Lampe", "quantity": 2, "unit_amount": 1000, "tax_amount": 400},
                    {"name": "Kabel", "quantity": 1, "unit_amount": 500, "tax_amount": 100}]}),
        )
        .await;
    assert_eq!(p.status, 201, "{}", p.body);
    let pid = p.body["payment_id"].as_str().unwrap().to_owned();
    let d = post(&app, &m, "/invoices", json!({"payment_id": pid})).await;
    assert_eq!(d.status, 201, "{}", d.body);
    assert_eq!(
        (d.body["total"].as_i64(), d.body["tax"].as_i64()),
        (Some(3000), Some(500))
    );
    assert_eq!(d.body["lines"][0]["tax_rate_bps"], 2000);
    let again = post(&app, &m, "/invoices", json!({"payment_id": pid})).await;
    assert_eq!((again.status, again.code()), (409, "invoice_exists"));
    let r = app
        .call(
            &m,
            Method::PATCH,
            &format!("/invoices/{}", id(&d.body)),
            Some(json!({"lines": [{"name": "x", "unit_amount": 1}]})),
        )
        .await;
    assert_eq!((r.status, r.param()), (400, Some("lines")));
    let f = finalize(&app, &m, &id(&d.body)).await;
    assert_eq!(
        (
            f["status"].as_str(),
            f["amount_paid"].as_i64(),
            f["amount_due"].as_i64()
        ),
        (Some("paid"), Some(3000), Some(0))
    );
    assert!(f["paid_at"].is_string());
    let r = post(
        &app,
        &m,
        &format!("/invoices/{}/void", id(&d.body)),
        json!({}),
    )
    .await;
    assert_eq!((r.status, r.code()), (409, "invoice_paid"));
    let text = text_of(&pdf_of(&app, &m, &id(&d.body)).await.raw);
    assert!(text.contains("Lampe") && text.contains("€30.00"), "{text}");

    // A payment not captured in full cannot be invoiced.
    let manual = app
        .create_payment(
            &m,
            json!({"amount": 900, "currency": "EUR", "confirm": true, "capture_method": "manual",
                "payment_method_data": card("4242424242424242")}),
        )
        .await;
    let r = post(
        &app,
        &m,
        "/invoices",
        json!({"payment_id": manual.body["payment_id"]}),
    )
    .await;
    assert_eq!((r.status, r.code()), (409, "payment_not_captured"));

    // A subscription's paid cycle: the tax rules apply (inclusive here, so the total is what
    // was paid), and it is paid at finalize.
    put(
        &app,
        &m,
        "/invoice-settings/tax-rules",
        json!({"rules": [{"rate_bps": 2000, "country": "FR", "inclusive": true}]}),
    )
    .await;
    let c = post(
        &app,
        &m,
        "/customers",
        json!({"name": "Ana", "address": {"line1": "1 rue",
        "city": "Paris", "country": "FR"}}),
    )
    .await;
    let cid = c.body["customer_id"].as_str().unwrap().to_owned();
    let saved = app
        .create_payment(
            &m,
            json!({"amount": 100, "currency": "EUR", "confirm": true, "customer_id": cid,
            "setup_future_usage": "off_session", "payment_method_data": card("4242424242424242")}),
        )
        .await;
    let mandate = saved.body["mandate_id"].as_str().unwrap().to_owned();
    let prod = post(
        &app,
        &m,
        "/products",
        json!({"name": "Plan", "prices": [{"unit_amount": 1200,
        "currency": "EUR", "recurring": {"interval": "month"}}]}),
    )
    .await;
    let price = prod.body["prices"][0]["price_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let s = post(
        &app,
        &m,
        "/subscriptions",
        json!({"customer_id": cid, "mandate_id": mandate,
        "items": [{"price_id": price, "quantity": 1}]}),
    )
    .await;
    assert_eq!(s.status, 201, "{}", s.body);
    let sid = s.body["subscription_id"].as_str().unwrap().to_owned();
    let cycles = get(&app, &m, &format!("/subscriptions/{sid}/invoices")).await;
    let cycle = cycles.body["data"][0]["cycle_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let d = post(
        &app,
        &m,
        "/invoices",
        json!({"subscription_id": sid, "cycle_id": cycle}),
    )
    .await;
    assert_eq!(d.status, 201, "{}", d.body);
    assert_eq!(d.body["customer_id"].as_str(), Some(cid.as_str()));
    let f = finalize(&app, &m, &id(&d.body)).await;
    assert_eq!(
        (f["total"].as_i64(), f["tax"].as_i64(), f["status"].as_str()),
        (Some(1200), Some(200), Some("paid"))
    );
    assert_eq!(f["buyer"]["name"], "Ana");
    let r = post(
        &app,
        &m,
        "/invoices",
        json!({"subscription_id": sid, "cycle_id": "cyc_0"}),
    )
    .await;
    assert_eq!((r.status, r.param()), (404, Some("cycle_id")));
    app.stop().await;
}

#[actix_web::test]
async fn tax_rules_take_category_then_shop_then_merchant_and_refuse_ties() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let shop = m.profile_id.clone();
    let r = put(
        &app,
        &m,
        "/invoice-settings/tax-rules",
        json!({"rules": [
        {"rate_bps": 1900, "country": "DE"},
        {"rate_bps": 700, "country": "DE", "tax_category": "books"}]}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = put(
        &app,
        &m,
        &format!("/invoice-settings/profiles/{shop}/tax-rules"),
        json!({"rules": [
        {"rate_bps": 1600, "country": "DE", "inclusive": true},
        {"rate_bps": 1000, "country": "DE", "region": "BY"}]}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let lines = json!([{"line_id": "g", "name": "General", "unit_amount": 1160},
        {"line_id": "b", "name": "Book", "unit_amount": 1000, "tax_category": "books"}]);
    let eval = |region: Option<&str>| {
        let mut buyer = json!({"country": "de"});
        if let Some(r) = region {
            buyer["region"] = json!(r);
        }
        json!({"buyer": buyer, "currency": "EUR", "lines": lines})
    };
    // In the shop: its inclusive 16 % for the general line, the merchant's book rate for books.
    let e = post(&app, &m, "/invoice-settings/tax-rules/evaluate", eval(None)).await;
    assert_eq!(e.status, 200, "{}", e.body);
    let g = &e.body["lines"][0];
    assert_eq!(
        (
            g["source"].as_str(),
            g["tax_rate_bps"].as_i64(),
            g["tax_inclusive"].as_bool()
        ),
        (Some("shop"), Some(1600), Some(true))
    );
    assert_eq!(
        (
            g["amount"].as_i64(),
            g["tax_amount"].as_i64(),
            g["total"].as_i64()
        ),
        (Some(1000), Some(160), Some(1160))
    );
    let b = &e.body["lines"][1];
    assert_eq!(
        (
            b["source"].as_str(),
            b["tax_rate_bps"].as_i64(),
            b["tax_amount"].as_i64()
        ),
        (Some("merchant"), Some(700), Some(70))
    );
    assert_eq!(
        (
            e.body["subtotal"].as_i64(),
            e.body["tax"].as_i64(),
            e.body["total"].as_i64()
        ),
        (Some(2000), Some(230), Some(2230))
    );
    // A region's rule beats the country's.
    let e = post(
        &app,
        &m,
        "/invoice-settings/tax-rules/evaluate",
        eval(Some("BY")),
    )
    .await;
    assert_eq!(e.body["lines"][0]["tax_rate_bps"], 1000);
    assert_eq!(e.body["lines"][0]["tax_amount"], 116);
    // Merchant-wide (no shop): the merchant's rules alone.
    let e = app
        .send(
            Method::POST,
            "/invoice-settings/tax-rules/evaluate",
            Some(&m.secret_key),
            Some(&eval(None)),
            &[],
        )
        .await;
    assert_eq!(
        (
            e.body["lines"][0]["source"].as_str(),
            e.body["lines"][0]["tax_amount"].as_i64()
        ),
        (Some("merchant"), Some(220))
    );
    // No rule for the country: no tax.
    let e = post(
        &app,
        &m,
        "/invoice-settings/tax-rules/evaluate",
        json!({"buyer": {"country": "US"}, "currency": "USD", "lines": lines}),
    )
    .await;
    assert!(e.body["lines"][0]["tax_rule_id"].is_null());
    assert_eq!(e.body["tax"], 0);

    // A tie is refused when saved; disjoint validity windows are no tie, and the window picks.
    let r = put(
        &app,
        &m,
        "/invoice-settings/tax-rules",
        json!({"rules": [
        {"rate_bps": 1900, "country": "DE"}, {"rate_bps": 1600, "country": "DE"}]}),
    )
    .await;
    assert_eq!(
        (r.status, r.code(), r.param()),
        (400, "tax_rule_tie", Some("rules[1]"))
    );
    let r = put(
        &app,
        &m,
        "/invoice-settings/tax-rules",
        json!({"rules": [
        {"rate_bps": 1600, "country": "DE", "valid_until": "2020-07-01T00:00:00Z"},
        {"rate_bps": 1900, "country": "DE", "valid_from": "2020-07-01T00:00:00Z"}]}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let mut past = eval(None);
    past["at"] = json!("2020-06-30T12:00:00Z");
    let r = app
        .send(
            Method::POST,
            "/invoice-settings/tax-rules/evaluate",
            Some(&m.secret_key),
            Some(&past),
            &[],
        )
        .await;
    assert_eq!(r.body["lines"][0]["tax_rate_bps"], 1600, "{}", r.body);
    for (rule, param) in [
        (
            json!({"rate_bps": 10001, "country": "DE"}),
            "rules[0].rate_bps",
        ),
        (
            json!({"rate_bps": 100, "country": "DEU"}),
            "rules[0].country",
        ),
        (
            json!({"rate_bps": 100, "country": "DE", "valid_from": "2021-01-01T00:00:00Z",
            "valid_until": "2020-01-01T00:00:00Z"}),
            "rules[0].valid_until",
        ),
    ] {
        let r = put(
            &app,
            &m,
            "/invoice-settings/tax-rules",
            json!({"rules": [rule]}),
        )
        .await;
        assert_eq!((r.status, r.param()), (400, Some(param)), "{}", r.body);
    }

    // The shop's rules removed: the merchant's apply alone.
    let r = app
        .call(
            &m,
            Method::DELETE,
            &format!("/invoice-settings/profiles/{shop}/tax-rules"),
            None,
        )
        .await;
    assert_eq!(
        (r.status, r.body["rules"].as_array().map(Vec::len)),
        (200, Some(0))
    );
    let e = post(&app, &m, "/invoice-settings/tax-rules/evaluate", eval(None)).await;
    assert_eq!(e.body["lines"][0]["source"], "merchant");

    // A shop's settings override the merchant's field by field.
    put(
        &app,
        &m,
        "/invoice-settings",
        json!({"number_prefix": "M-", "payment_terms_days": 10}),
    )
    .await;
    let r = put(
        &app,
        &m,
        &format!("/invoice-settings/profiles/{shop}"),
        json!({"number_prefix": "SHOP-"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        (
            r.body["effective"]["number_prefix"].as_str(),
            r.body["effective"]["payment_terms_days"].as_i64()
        ),
        (Some("SHOP-"), Some(10))
    );
    assert!(r.body["settings"]["payment_terms_days"].is_null());
    let d = draft(&app, &m, json!([{"name": "x", "unit_amount": 100}]), "DE").await;
    assert_eq!(finalize(&app, &m, &id(&d)).await["number"], "SHOP-000001");
    for (body, param) in [
        (json!({"number_prefix": "bad prefix"}), "number_prefix"),
        (json!({"locale": "xx"}), "locale"),
        (json!({"payment_terms_days": 400}), "payment_terms_days"),
        (json!({"seller": {"name": ""}}), "seller.name"),
    ] {
        let r = put(&app, &m, "/invoice-settings", body).await;
        assert_eq!((r.status, r.param()), (400, Some(param)), "{}", r.body);
    }
    // A key bound to a shop changes that shop's settings, not the merchant's, and lists only
    // that shop's invoices.
    let bound = app
        .post(
            "/account/api-keys",
            &m.secret_key,
            json!({"kind": "secret", "profile_id": shop}),
        )
        .await;
    let bound = bound.body["key"].as_str().unwrap().to_owned();
    let r = app
        .send(
            Method::PUT,
            "/invoice-settings",
            Some(&bound),
            Some(&json!({})),
            &[],
        )
        .await;
    assert_eq!((r.status, r.code()), (403, "shop_bound_key"));
    let r = app
        .send(
            Method::PUT,
            "/invoice-settings/tax-rules",
            Some(&bound),
            Some(&json!({"rules": []})),
            &[],
        )
        .await;
    assert_eq!((r.status, r.code()), (403, "shop_bound_key"));
    let b = app
        .post("/account/shops", &m.secret_key, json!({"name": "Shop B"}))
        .await;
    let shop_b = b.body["profile_id"].as_str().unwrap().to_owned();
    let in_b = app
        .send(
            Method::POST,
            "/invoices",
            Some(&m.secret_key),
            Some(&json!({"currency": "EUR", "lines": [{"name": "b", "unit_amount": 1}]})),
            &[("x-profile-id", &shop_b)],
        )
        .await;
    assert_eq!(in_b.status, 201, "{}", in_b.body);
    let listed = app
        .send(Method::GET, "/invoices?limit=100", Some(&bound), None, &[])
        .await;
    let ids: Vec<&str> = listed.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i["invoice_id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&id(&d).as_str()) && !ids.contains(&id(&in_b.body).as_str()),
        "{ids:?}"
    );
    let r = app
        .send(
            Method::GET,
            &format!("/invoices/{}", id(&in_b.body)),
            Some(&bound),
            None,
            &[],
        )
        .await;
    assert_eq!(r.status, 404);
    let r = app
        .send(
            Method::POST,
            "/invoices",
            Some(&m.secret_key),
            Some(&json!({"currency": "EUR", "lines": [{"name": "b", "unit_amount": 1}]})),
            &[],
        )
        .await;
    assert_eq!((r.status, r.code()), (400, "shop_required"));
    // Another merchant's shop is not found.
    let other = app.create_merchant("Other").await;
    let r = put(
        &app,
        &m,
        &format!("/invoice-settings/profiles/{}", other.profile_id),
        json!({"number_prefix": "X-"}),
    )
    .await;
    assert_eq!(r.status, 404);
    app.stop().await;
}

/// The path of a link to an instance (any of them serves it).
fn path_of(url: &str) -> String {
    let at = url.find("/invoice-links/").expect("a share link");
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");
    url[at..].to_owned()
}

#[actix_web::test]
async fn share_links_show_the_invoice_until_they_expire_or_are_revoked() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let d = draft(
        &app,
        &m,
        json!([{"name": "Widget", "unit_amount": 4200}]),
        "FR",
    )
    .await;
    let inv = id(&d);
    let f = finalize(&app, &m, &inv).await;
    let link = post(
        &app,
        &m,
        &format!("/invoices/{inv}/share-link"),
        json!({"expires_in_days": 2}),
    )
    .await;
    assert_eq!(link.status, 201, "{}", link.body);
    let url = link.body["url"].as_str().unwrap().to_owned();
    let path = path_of(&url);
    let page = app.send(Method::GET, &path, None, None, &[]).await;
    assert_eq!(page.status, 200);
    let html = String::from_utf8_lossy(&page.raw);
    assert!(
        html.contains(f["number"].as_str().unwrap()) && html.contains("Widget"),
        "{html}"
    );
    assert!(html.contains("Жанна Иванова"));
    let shared = app
        .send(Method::GET, &format!("{path}/pdf"), None, None, &[])
        .await;
    assert_eq!(shared.status, 200);
    assert_eq!(shared.raw, pdf_of(&app, &m, &inv).await.raw);

    // Revoked: gone.
    let link_id = link.body["link_id"].as_str().unwrap();
    let r = app
        .call(
            &m,
            Method::DELETE,
            &format!("/invoices/{inv}/share-link/{link_id}"),
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert!(r.body["revoked_at"].is_string());
    assert_eq!(
        app.send(Method::GET, &path, None, None, &[]).await.status,
        404
    );
    assert_eq!(
        app.send(Method::GET, &format!("{path}/pdf"), None, None, &[])
            .await
            .status,
        404
    );

    // Expired on the merchant's test clock: gone.
    let link = post(
        &app,
        &m,
        &format!("/invoices/{inv}/share-link"),
        json!({"expires_in_days": 2}),
    )
    .await;
    let path = path_of(link.body["url"].as_str().unwrap());
    assert_eq!(
        app.send(Method::GET, &path, None, None, &[]).await.status,
        200
    );
    let r = post(
        &app,
        &m,
        "/sandbox/clock/advance",
        json!({"seconds": 2 * 86_400 + 1}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        app.send(Method::GET, &path, None, None, &[]).await.status,
        404
    );
    // A token nobody issued, and bad lifetimes.
    assert_eq!(
        app.send(Method::GET, "/invoice-links/nope", None, None, &[])
            .await
            .status,
        404
    );
    for days in [0, 366] {
        let r = post(
            &app,
            &m,
            &format!("/invoices/{inv}/share-link"),
            json!({"expires_in_days": days}),
        )
        .await;
        assert_eq!((r.status, r.param()), (400, Some("expires_in_days")));
    }
    // Another merchant cannot reach the invoice or its links.
    let other = app.create_merchant("Other").await;
    assert_eq!(
        get(&app, &other, &format!("/invoices/{inv}")).await.status,
        404
    );
    assert_eq!(
        post(
            &app,
            &other,
            &format!("/invoices/{inv}/share-link"),
            json!({})
        )
        .await
        .status,
        404
    );
    app.stop().await;
}

#[actix_web::test]
async fn fifty_concurrent_finalizes_take_fifty_numbers_without_gap_or_duplicate() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let mut ids = Vec::new();
    for i in 0..50 {
        let d = draft(
            &app,
            &m,
            json!([{"name": format!("Item {i}"), "unit_amount": 100 + i}]),
            "DE",
        )
        .await;
        ids.push(id(&d));
    }
    let finalized = futures_util::future::join_all(ids.iter().map(|inv| {
        let (app, m) = (&app, &m);
        async move { post(app, m, &format!("/invoices/{inv}/finalize"), json!({})).await }
    }))
    .await;
    let mut numbers = BTreeSet::new();
    for r in &finalized {
        assert_eq!(r.status, 200, "{}", r.body);
        assert!(
            numbers.insert(r.body["number"].as_str().unwrap().to_owned()),
            "a number twice"
        );
    }
    let expected: BTreeSet<String> = (1..=50).map(|n| format!("INV-{n:06}")).collect();
    assert_eq!(numbers, expected);
    // What the store holds agrees, and each PDF carries its own number.
    for (inv, r) in ids.iter().zip(&finalized).take(5) {
        let text = text_of(&pdf_of(&app, &m, inv).await.raw);
        assert!(text.contains(r.body["number"].as_str().unwrap()));
    }
    app.stop().await;
}

/// Issue 42, item 4: an invoice of a payment with any refund would show refunded money as
/// paid; it is refused (409 `payment_refunded`) when made, and at finalize when the refund
/// came after the draft.
#[actix_web::test]
async fn an_invoice_of_a_refunded_payment_is_refused_when_made_and_at_finalize() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let paid = |amount: i64| {
        let (app, m) = (&app, &m);
        async move {
            let p = app
                .create_payment(
                    m,
                    json!({"amount": amount, "currency": "EUR", "confirm": true,
                        "payment_method_data": card("4242424242424242")}),
                )
                .await;
            assert_eq!(p.status, 201, "{}", p.body);
            p.body["payment_id"].as_str().unwrap().to_owned()
        }
    };
    let refund = |pid: String, amount: i64| {
        let (app, m) = (&app, &m);
        async move {
            let r = post(
                app,
                m,
                "/refunds",
                json!({"payment_id": pid, "amount": amount}),
            )
            .await;
            assert_eq!(r.status, 201, "{}", r.body);
        }
    };

    // Refunded in full, then invoiced: refused.
    let full = paid(3000).await;
    refund(full.clone(), 3000).await;
    let r = post(&app, &m, "/invoices", json!({"payment_id": full})).await;
    assert_eq!(
        (r.status, r.code(), r.param()),
        (409, "payment_refunded", Some("payment_id")),
        "{}",
        r.body
    );

    // Invoiced, then refunded in part before the draft is finalized: the finalize is refused
    // and the draft stays a draft.
    let later = paid(2000).await;
    let d = post(&app, &m, "/invoices", json!({"payment_id": later})).await;
    assert_eq!(d.status, 201, "{}", d.body);
    let inv = id(&d.body);
    refund(later, 500).await;
    let r = post(&app, &m, &format!("/invoices/{inv}/finalize"), json!({})).await;
    assert_eq!(
        (r.status, r.code(), r.param()),
        (409, "payment_refunded", Some("payment_id")),
        "{}",
        r.body
    );
    let still = get(&app, &m, &format!("/invoices/{inv}")).await;
    assert_eq!(
        (
            still.body["status"].as_str(),
            still.body["amount_paid"].as_i64()
        ),
        (Some("draft"), Some(0)),
        "{}",
        still.body
    );
    app.stop().await;
}

/// Issue 42, item 11: each line of a credit note for an amount shows a quantity and a unit
/// amount that give its amount before tax, as the invoice's own lines do.
#[actix_web::test]
async fn an_amount_credit_notes_lines_show_quantity_times_unit_amount_equal_to_the_amount() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    put(
        &app,
        &m,
        "/invoice-settings/tax-rules",
        json!({"rules": [{"rate_bps": 2000, "country": "FR"}]}),
    )
    .await;
    let d = draft(
        &app,
        &m,
        json!([{"line_id": "a", "name": "Chaise", "quantity": 3, "unit_amount": 1000},
            {"line_id": "b", "name": "Livraison", "unit_amount": 500},
            {"line_id": "c", "name": "Coussin", "quantity": 7, "unit_amount": 333}]),
        "FR",
    )
    .await;
    let inv = id(&d);
    finalize(&app, &m, &inv).await;
    for body in [
        json!({"amount": 1234, "reason": "goodwill"}),
        json!({"lines": [{"line_id": "c", "amount": 999}], "reason": "stained"}),
    ] {
        let cn = post(&app, &m, &format!("/invoices/{inv}/credit-note"), body).await;
        assert_eq!(cn.status, 201, "{}", cn.body);
        let lines = cn.body["lines"].as_array().unwrap();
        assert!(!lines.is_empty());
        for l in lines {
            let (q, unit, amount) = (
                l["quantity"].as_i64().unwrap(),
                l["unit_amount"].as_i64().unwrap(),
                l["amount"].as_i64().unwrap(),
            );
            assert!(l["tax_amount"].as_i64().unwrap() > 0, "{l}");
            assert_eq!(q * unit, amount, "{l}");
            assert_eq!(
                amount + l["tax_amount"].as_i64().unwrap(),
                l["total"].as_i64().unwrap()
            );
        }
    }
    app.stop().await;
}

/// Issue 64, item 2: one unit of a line gives back the same amount whether the payment refunds
/// it or its invoice credits it (both round the unit's share down on the units taken so far,
/// `money::unit_share`; credit notes rounded half to even, so the first unit of 3 × 335 + 2 of
/// tax credited 336 and refunded 335).
#[actix_web::test]
async fn a_unit_refunded_and_a_unit_credited_give_back_the_same() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let p = app
        .create_payment(
            &m,
            json!({"amount": 1007, "currency": "EUR", "confirm": true,
                "payment_method_data": card("4242424242424242"),
                "lines": [{"line_id": "a", "name": "Tasse", "quantity": 3, "unit_amount": 335,
                    "tax_amount": 2}]}),
        )
        .await;
    assert_eq!(p.status, 201, "{}", p.body);
    let pid = p.body["payment_id"].as_str().unwrap().to_owned();
    let d = post(&app, &m, "/invoices", json!({"payment_id": pid})).await;
    assert_eq!(d.status, 201, "{}", d.body);
    let inv = id(&d.body);
    finalize(&app, &m, &inv).await;
    let mut refunded = Vec::new();
    let mut credited = Vec::new();
    for _ in 0..3 {
        let one = json!([{"line_id": "a", "quantity": 1}]);
        let r = post(
            &app,
            &m,
            "/refunds",
            json!({"payment_id": pid, "lines": one.clone()}),
        )
        .await;
        assert_eq!(r.status, 201, "{}", r.body);
        refunded.push(r.body["amount"].as_i64().unwrap());
        let cn = post(
            &app,
            &m,
            &format!("/invoices/{inv}/credit-note"),
            json!({"lines": one, "reason": "returned"}),
        )
        .await;
        assert_eq!(cn.status, 201, "{}", cn.body);
        let l = &cn.body["lines"][0];
        assert_eq!(
            l["quantity"].as_i64().unwrap() * l["unit_amount"].as_i64().unwrap(),
            l["amount"].as_i64().unwrap(),
            "{l}"
        );
        credited.push((
            cn.body["total"].as_i64().unwrap(),
            cn.body["tax"].as_i64().unwrap(),
        ));
    }
    assert_eq!(refunded, [335, 336, 336]);
    assert_eq!(credited, [(335, 0), (336, 1), (336, 1)]);
    app.stop().await;
}

/// Issue 42, item 11: a share link carries `test_mode` like every sandbox object.
#[actix_web::test]
async fn a_share_link_carries_test_mode() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let d = draft(
        &app,
        &m,
        json!([{"name": "Widget", "unit_amount": 4200}]),
        "FR",
    )
    .await;
    let inv = id(&d);
    finalize(&app, &m, &inv).await;
    let link = post(&app, &m, &format!("/invoices/{inv}/share-link"), json!({})).await;
    assert_eq!(link.status, 201, "{}", link.body);
    assert_eq!(link.body["test_mode"], true, "{}", link.body);
    let link_id = link.body["link_id"].as_str().unwrap();
    let revoked = app
        .call(
            &m,
            Method::DELETE,
            &format!("/invoices/{inv}/share-link/{link_id}"),
            None,
        )
        .await;
    assert_eq!(revoked.status, 200, "{}", revoked.body);
    assert_eq!(revoked.body["test_mode"], true, "{}", revoked.body);
    app.stop().await;
}

/// A number prefix is a safe file-name part: `/`, `.` and quotes are refused when saved, and
/// the PDF's `Content-Disposition` names the number as it is.
#[actix_web::test]
async fn a_number_prefix_cannot_make_the_pdf_name_a_path() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    for (field, bad) in [
        ("number_prefix", "../../../../tmp/"),
        ("number_prefix", "A.B"),
        ("credit_note_prefix", "CN/"),
        ("number_prefix", "A\"B"),
    ] {
        let r = put(&app, &m, "/invoice-settings", json!({ field: bad })).await;
        assert_eq!(
            (r.status, r.param()),
            (400, Some(field)),
            "{bad}: {}",
            r.body
        );
        let shop = format!("/invoice-settings/profiles/{}", m.profile_id);
        let r = put(&app, &m, &shop, json!({ field: bad })).await;
        assert_eq!(
            (r.status, r.param()),
            (400, Some(field)),
            "{bad}: {}",
            r.body
        );
    }
    let r = put(
        &app,
        &m,
        "/invoice-settings",
        json!({"number_prefix": "ACME_2026-"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let d = draft(
        &app,
        &m,
        json!([{"name": "Widget", "unit_amount": 1000}]),
        "DE",
    )
    .await;
    let f = finalize(&app, &m, &id(&d)).await;
    let pdf = pdf_of(&app, &m, &id(&f)).await;
    assert_eq!(
        pdf.header("content-disposition"),
        Some("inline; filename=\"ACME_2026-000001.pdf\"")
    );
}

/// An invoice paid outside payd, or written off and paid later: `mark-uncollectible` from
/// open only, `mark-paid` from open or uncollectible, recording what was due as paid; a
/// paid invoice is neither voided nor written off again.
#[actix_web::test]
async fn an_invoice_is_written_off_then_marked_paid_outside_payd() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let lines = json!([{"name": "Consulting", "unit_amount": 1500, "quantity": 2}]);
    let draft_one = draft(&app, &m, lines.clone(), "DE").await;
    let inv = id(&draft_one);
    let early = post(&app, &m, &format!("/invoices/{inv}/mark-paid"), json!({})).await;
    assert_eq!(
        (early.status, early.code()),
        (409, "invalid_state"),
        "{}",
        early.body
    );
    let open = finalize(&app, &m, &inv).await;
    assert_eq!(open["status"], "open");

    let off = post(
        &app,
        &m,
        &format!("/invoices/{inv}/mark-uncollectible"),
        json!({}),
    )
    .await;
    assert_eq!(off.status, 200, "{}", off.body);
    assert_eq!(off.body["status"], "uncollectible", "{}", off.body);
    assert_eq!(off.body["amount_paid"], 0, "{}", off.body);
    let again = post(
        &app,
        &m,
        &format!("/invoices/{inv}/mark-uncollectible"),
        json!({}),
    )
    .await;
    assert_eq!(
        (again.status, again.code()),
        (409, "invalid_state"),
        "{}",
        again.body
    );

    let paid = post(&app, &m, &format!("/invoices/{inv}/mark-paid"), json!({})).await;
    assert_eq!(paid.status, 200, "{}", paid.body);
    assert_eq!(
        (
            paid.body["status"].as_str(),
            paid.body["amount_paid"].as_i64(),
            paid.body["amount_due"].as_i64()
        ),
        (Some("paid"), open["amount_due"].as_i64(), Some(0)),
        "{}",
        paid.body
    );
    let void = post(&app, &m, &format!("/invoices/{inv}/void"), json!({})).await;
    assert_eq!(
        (void.status, void.code()),
        (409, "invoice_paid"),
        "{}",
        void.body
    );

    // Straight from open to paid.
    let other = id(&draft(&app, &m, lines, "DE").await);
    finalize(&app, &m, &other).await;
    let paid = post(&app, &m, &format!("/invoices/{other}/mark-paid"), json!({})).await;
    assert_eq!(
        (paid.status, paid.body["status"].as_str()),
        (200, Some("paid")),
        "{}",
        paid.body
    );
    app.stop().await;
}

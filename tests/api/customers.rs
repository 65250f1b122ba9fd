//! Customers, saved payment methods, mandates and merchant-initiated payments.

use crate::common;

use actix_web::http::Method;
use common::{card, spawn_app, Merchant, TestApp};
use serde_json::{json, Value};

async fn customer(app: &TestApp, m: &Merchant, body: Value) -> Value {
    let r = app.call(m, Method::POST, "/customers", Some(body)).await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body
}

/// A payment that saves its card for the customer (and, off-session, makes a mandate).
async fn save(app: &TestApp, m: &Merchant, customer_id: &str, number: &str, extra: Value) -> Value {
    let mut body = json!({"amount": 500, "currency": "EUR", "confirm": true, "customer_id": customer_id,
        "setup_future_usage": "off_session", "payment_method_data": card(number)});
    body.as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    let r = app.create_payment(m, body).await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body
}

async fn charge(
    app: &TestApp,
    m: &Merchant,
    customer_id: &str,
    mandate_id: &str,
    amount: i64,
    currency: &str,
) -> common::Answer {
    app.create_payment(
        m,
        json!({"amount": amount, "currency": currency, "confirm": true, "customer_id": customer_id,
        "mandate_id": mandate_id, "off_session": true}),
    )
    .await
}

async fn get(app: &TestApp, m: &Merchant, path: &str) -> common::Answer {
    app.call(m, Method::GET, path, None).await
}

#[actix_web::test]
async fn save_list_default_charge_off_session_revoke_and_refuse() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let c = customer(&app, &m, json!({"name": "Ana", "email": "ana@example.com", "phone": "+49 30 1234567",
        "address": {"line1": "Main St 1", "city": "Berlin", "country": "DE"}, "metadata": {"crm": "42"}})).await;
    let cid = c["customer_id"].as_str().unwrap();
    assert!(cid.starts_with("cus_"));

    let p = save(&app, &m, cid, "4242424242424242", json!({})).await;
    assert_eq!(p["status"], "succeeded");
    let mandate_id = p["mandate_id"]
        .as_str()
        .expect("a mandate was made")
        .to_owned();
    save(
        &app,
        &m,
        cid,
        "4242424242424242",
        json!({"setup_future_usage": "on_session"}),
    )
    .await;
    save(
        &app,
        &m,
        cid,
        "5555555555554444",
        json!({"setup_future_usage": "on_session"}),
    )
    .await;
    let methods = get(&app, &m, &format!("/customers/{cid}/payment-methods"))
        .await
        .body;
    let list = methods["data"].as_array().unwrap();
    assert_eq!(list.len(), 2, "the same card is saved once");
    assert!(!methods.to_string().contains("4242424242424242"));
    let first_default: Vec<bool> = list
        .iter()
        .map(|x| x["is_default"].as_bool().unwrap())
        .collect();
    assert_eq!(
        first_default,
        [false, true],
        "the first saved card is the default"
    );
    let mastercard = list[0]["payment_method_id"].as_str().unwrap().to_owned();
    let r = app
        .call(
            &m,
            Method::POST,
            &format!("/customers/{cid}/payment-methods/{mastercard}/default"),
            None,
        )
        .await;
    assert_eq!(r.body["default_payment_method_id"], mastercard.as_str());

    let mandate = get(&app, &m, &format!("/mandates/{mandate_id}")).await.body;
    assert_eq!(
        (
            mandate["status"].as_str(),
            mandate["type"].as_str(),
            mandate["currency"].as_str()
        ),
        (Some("active"), Some("multi_use"), Some("EUR"))
    );
    let r = charge(&app, &m, cid, &mandate_id, 700, "EUR").await;
    assert_eq!(
        (
            r.status,
            r.body["status"].as_str(),
            r.body["mandate_id"].as_str()
        ),
        (201, Some("succeeded"), Some(mandate_id.as_str()))
    );
    assert_eq!(r.body["payment_method"]["last4"], "4242");
    let r = charge(&app, &m, cid, &mandate_id, 700, "EUR").await;
    assert_eq!(
        r.body["status"], "succeeded",
        "multi-use mandates charge again"
    );

    let r = app
        .call(
            &m,
            Method::POST,
            &format!("/mandates/revoke/{mandate_id}"),
            None,
        )
        .await;
    assert_eq!(r.body["status"], "revoked");
    let r = app
        .call(
            &m,
            Method::POST,
            &format!("/mandates/revoke/{mandate_id}"),
            None,
        )
        .await;
    assert_eq!((r.status, r.code()), (409, "invalid_state"));
    let r = charge(&app, &m, cid, &mandate_id, 700, "EUR").await;
    assert_eq!(
        (r.status, r.code(), r.param()),
        (409, "mandate_revoked", Some("mandate_id"))
    );

    let events = app
        .call(
            &m,
            Method::POST,
            &format!("/events/{}", m.merchant_id),
            Some(json!({"object_id": mandate_id})),
        )
        .await
        .body;
    let types: Vec<&str> = events["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event_type"].as_str().unwrap())
        .collect();
    assert_eq!(types, ["mandate_revoked", "mandate_active"]);
    assert_eq!(
        events["data"][0]["envelope"]["content"]["type"],
        "mandate_details"
    );
    let listed = get(&app, &m, &format!("/customers/{cid}/mandates"))
        .await
        .body;
    assert_eq!(listed["data"][0]["mandate_id"], mandate_id.as_str());
    let active = get(&app, &m, "/mandates/list?status=active").await.body;
    assert!(active["data"].as_array().unwrap().is_empty());
}

#[actix_web::test]
async fn mandates_enforce_their_terms() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let cid = customer(&app, &m, json!({"name": "Bo"})).await["customer_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let once = save(
        &app,
        &m,
        &cid,
        "4242424242424242",
        json!({"mandate_data": {"type": "single_use", "amount_limit": 1000}}),
    )
    .await;
    let mid = once["mandate_id"].as_str().unwrap().to_owned();
    let r = charge(&app, &m, &cid, &mid, 1001, "EUR").await;
    assert_eq!((r.status, r.code()), (409, "mandate_amount_exceeded"));
    let r = charge(&app, &m, &cid, &mid, 100, "USD").await;
    assert_eq!((r.status, r.code()), (409, "mandate_currency_mismatch"));
    let r = charge(&app, &m, &cid, &mid, 1000, "EUR").await;
    assert_eq!(r.body["status"], "succeeded");
    assert_eq!(
        get(&app, &m, &format!("/mandates/{mid}")).await.body["status"],
        "inactive",
        "single use"
    );
    let r = charge(&app, &m, &cid, &mid, 10, "EUR").await;
    assert_eq!((r.status, r.code()), (409, "mandate_inactive"));

    // A card that saves, but whose every charge declines.
    let declining = save(&app, &m, &cid, "4000000000000341", json!({})).await;
    assert_eq!(declining["status"], "declined");
    let mid = declining["mandate_id"]
        .as_str()
        .expect("saved despite the decline")
        .to_owned();
    let r = charge(&app, &m, &cid, &mid, 100, "EUR").await;
    assert_eq!(
        (r.status, r.body["status"].as_str()),
        (201, Some("declined"))
    );
    // A card that declines outright is not saved.
    let stolen = save(&app, &m, &cid, "4000000000009979", json!({})).await;
    assert_eq!(stolen["mandate_id"], Value::Null);
    // Off-session needs a mandate; a mandate needs a customer.
    let r = app
        .create_payment(
            &m,
            json!({"amount": 5, "currency": "EUR", "customer_id": cid, "off_session": true}),
        )
        .await;
    assert_eq!((r.status, r.param()), (400, Some("mandate_id")));
    let r = app
        .create_payment(
            &m,
            json!({"amount": 5, "currency": "EUR", "mandate_id": mid}),
        )
        .await;
    assert_eq!((r.status, r.param()), (400, Some("customer_id")));
}

#[actix_web::test]
async fn a_mandate_charges_only_its_own_method() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let c = customer(&app, &m, json!({"name": "Ana"})).await;
    let cid = c["customer_id"].as_str().unwrap().to_owned();
    let p = save(&app, &m, &cid, "4242424242424242", json!({})).await;
    let mid = p["mandate_id"].as_str().unwrap().to_owned();
    let other = save(
        &app,
        &m,
        &cid,
        "5555555555554444",
        json!({"setup_future_usage": "on_session"}),
    )
    .await;
    assert_eq!(other["status"], "succeeded");
    let methods = get(&app, &m, &format!("/customers/{cid}/payment-methods")).await;
    let mandated =
        get(&app, &m, &format!("/mandates/{mid}")).await.body["payment_method_id"].clone();
    let other_pm = methods.body["data"]
        .as_array()
        .unwrap()
        .iter()
        .find(|pm| pm["payment_method_id"] != mandated)
        .expect("a second saved method")["payment_method_id"]
        .clone();
    let base = json!({"amount": 700, "currency": "EUR", "confirm": true, "customer_id": cid,
        "mandate_id": mid, "off_session": true});
    for (extra, param) in [
        (
            json!({"payment_method_data": card("4000000000000077")}),
            "payment_method_data",
        ),
        (json!({"payment_method_id": other_pm}), "payment_method_id"),
    ] {
        let mut body = base.clone();
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let r = app.create_payment(&m, body).await;
        assert_eq!(
            (r.status, r.code(), r.param()),
            (400, "mandate_method_mismatch", Some(param))
        );
    }
    // The mandate is not used up by the refused attempts; its own method still works.
    let mut own = base.clone();
    own["payment_method_id"] = mandated;
    let r = app.create_payment(&m, own).await;
    assert_eq!(
        (r.status, r.body["status"].as_str()),
        (201, Some("succeeded")),
        "{}",
        r.body
    );
}

#[actix_web::test]
async fn deleting_a_customer_redacts_it_once_its_mandates_are_revoked() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let cid = customer(
        &app,
        &m,
        json!({"name": "Cy", "email": "cy@example.com", "description": "VIP"}),
    )
    .await["customer_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let p = save(&app, &m, &cid, "4242424242424242", json!({})).await;
    let mid = p["mandate_id"].as_str().unwrap();
    let r = app
        .call(&m, Method::DELETE, &format!("/customers/{cid}"), None)
        .await;
    assert_eq!((r.status, r.code()), (409, "active_mandate"));
    app.call(&m, Method::POST, &format!("/mandates/revoke/{mid}"), None)
        .await;
    let r = app
        .call(&m, Method::DELETE, &format!("/customers/{cid}"), None)
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.body["erased_fields"],
        json!(["name", "email", "description"])
    );
    assert_eq!(
        r.body["deleted_payment_methods"].as_array().unwrap().len(),
        1
    );
    let c = get(&app, &m, &format!("/customers/{cid}")).await.body;
    assert_eq!(
        (
            c["redacted"].as_bool(),
            c["name"].clone(),
            c["email"].clone()
        ),
        (Some(true), Value::Null, Value::Null)
    );
    assert!(get(&app, &m, &format!("/customers/{cid}/payment-methods"))
        .await
        .body["data"]
        .as_array()
        .unwrap()
        .is_empty());
    let payment = get(
        &app,
        &m,
        &format!("/payments/{}", p["payment_id"].as_str().unwrap()),
    )
    .await
    .body;
    assert_eq!(
        payment["customer_id"],
        cid.as_str(),
        "payments keep the customer id"
    );
    let r = app
        .call(
            &m,
            Method::POST,
            &format!("/customers/{cid}"),
            Some(json!({"name": "again"})),
        )
        .await;
    assert_eq!((r.status, r.code()), (409, "customer_redacted"));
    let r = app
        .create_payment(
            &m,
            json!({"amount": 5, "currency": "EUR", "customer_id": cid}),
        )
        .await;
    assert_eq!((r.status, r.code()), (409, "customer_redacted"));
    let r = app
        .call(&m, Method::DELETE, &format!("/customers/{cid}"), None)
        .await;
    assert_eq!(r.status, 409);
}

#[actix_web::test]
async fn saved_methods_belong_to_their_customer_and_merchant() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let a = customer(&app, &m, json!({})).await["customer_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let b = customer(&app, &m, json!({})).await["customer_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let p = save(
        &app,
        &m,
        &a,
        "4242424242424242",
        json!({"setup_future_usage": "on_session"}),
    )
    .await;
    assert_eq!(
        p["mandate_id"],
        Value::Null,
        "on-session saving makes no mandate"
    );
    let pm = get(&app, &m, &format!("/customers/{a}/payment-methods"))
        .await
        .body["data"][0]["payment_method_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let r = app.create_payment(&m, json!({"amount": 5, "currency": "EUR", "confirm": true, "customer_id": a, "payment_method_id": pm})).await;
    assert_eq!(r.body["status"], "succeeded", "{}", r.body);
    let r = app.create_payment(&m, json!({"amount": 5, "currency": "EUR", "confirm": true, "customer_id": b, "payment_method_id": pm})).await;
    assert_eq!((r.status, r.param()), (404, Some("payment_method_id")));
    let draft = app
        .create_payment(
            &m,
            json!({"amount": 5, "currency": "EUR", "customer_id": a}),
        )
        .await
        .body;
    let r = app
        .call(
            &m,
            Method::POST,
            &format!(
                "/payments/{}/confirm",
                draft["payment_id"].as_str().unwrap()
            ),
            Some(json!({"payment_method_id": pm})),
        )
        .await;
    assert_eq!(r.body["status"], "succeeded", "confirm with a saved method");

    let other = app.create_merchant("Other").await;
    for path in [
        format!("/customers/{a}"),
        format!("/customers/{a}/payment-methods"),
        format!("/customers/{a}/mandates"),
    ] {
        assert_eq!(get(&app, &other, &path).await.status, 404, "{path}");
    }
    let r = app
        .call(
            &other,
            Method::DELETE,
            &format!("/payment-methods/{pm}"),
            None,
        )
        .await;
    assert_eq!(r.status, 404);
    let r = app
        .create_payment(
            &other,
            json!({"amount": 5, "currency": "EUR", "customer_id": a}),
        )
        .await;
    assert_eq!((r.status, r.param()), (404, Some("customer_id")));

    let r = app
        .call(&m, Method::DELETE, &format!("/payment-methods/{pm}"), None)
        .await;
    assert_eq!(r.status, 200);
    let c = get(&app, &m, &format!("/customers/{a}")).await.body;
    assert_eq!(
        c["default_payment_method_id"],
        Value::Null,
        "deleting the default clears it"
    );
}

#[actix_web::test]
async fn customer_fields_are_checked_and_listed() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    for (body, param) in [
        (json!({"email": "not-an-email"}), "email"),
        (json!({"phone": "call me"}), "phone"),
        (json!({"nickname": "x"}), "nickname"),
        (
            json!({"address": {"country": "Germany"}}),
            "address.country",
        ),
        (json!({"address": {"planet": "Mars"}}), "address.planet"),
        (json!({"name": 5}), "name"),
    ] {
        let r = app
            .call(&m, Method::POST, "/customers", Some(body.clone()))
            .await;
        assert_eq!(
            (r.status, r.param()),
            (400, Some(param)),
            "{body}: {}",
            r.body
        );
    }
    let mut ids = vec![];
    for i in 0..5 {
        ids.push(
            customer(&app, &m, json!({"email": format!("c{i}@example.com")})).await["customer_id"]
                .as_str()
                .unwrap()
                .to_owned(),
        );
    }
    let r = get(&app, &m, "/customers/list?email=c3@example.com")
        .await
        .body;
    assert_eq!(r["data"][0]["customer_id"], ids[3].as_str());
    let page = get(&app, &m, "/customers/list?limit=2").await.body;
    assert_eq!(
        (
            page["data"].as_array().unwrap().len(),
            page["has_more"].as_bool()
        ),
        (2, Some(true))
    );
    let next = get(
        &app,
        &m,
        &format!("/customers/list?limit=2&starting_after={}", ids[3]),
    )
    .await
    .body;
    assert_eq!(next["data"][0]["customer_id"], ids[2].as_str());
    let r = get(&app, &m, "/customers/list?limit=500").await;
    assert_eq!((r.status, r.param()), (400, Some("limit")));
    let u = app
        .call(
            &m,
            Method::POST,
            &format!("/customers/{}", ids[0]),
            Some(json!({"name": "Dee", "metadata": {"tier": "gold"}})),
        )
        .await;
    assert_eq!(
        (
            u.body["name"].as_str(),
            u.body["email"].as_str(),
            u.body["metadata"]["tier"].as_str()
        ),
        (Some("Dee"), Some("c0@example.com"), Some("gold"))
    );
}

#[actix_web::test]
async fn a_mandate_with_an_end_date_lapses() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let cid = customer(&app, &m, json!({})).await["customer_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let now = payd::clock::Clock::now(&*app.clock);
    let ends_at = (now + chrono::Duration::days(1)).to_rfc3339();
    let p = save(
        &app,
        &m,
        &cid,
        "4242424242424242",
        json!({"mandate_data": {"ends_at": ends_at}}),
    )
    .await;
    let mid = p["mandate_id"].as_str().unwrap().to_owned();
    assert_eq!(
        charge(&app, &m, &cid, &mid, 100, "EUR").await.body["status"],
        "succeeded"
    );
    app.clock.advance(chrono::Duration::days(2));
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while get(&app, &m, &format!("/mandates/{mid}")).await.body["status"] != "inactive" {
        assert!(
            std::time::Instant::now() < deadline,
            "the mandate never lapsed"
        );
        actix_web::rt::time::sleep(std::time::Duration::from_millis(25)).await;
    }
    let r = charge(&app, &m, &cid, &mid, 100, "EUR").await;
    assert_eq!((r.status, r.code()), (409, "mandate_inactive"));
    let past = (now - chrono::Duration::days(1)).to_rfc3339();
    let r = app
        .create_payment(
            &m,
            json!({"amount": 5, "currency": "EUR", "customer_id": cid,
        "setup_future_usage": "off_session", "mandate_data": {"ends_at": past}}),
        )
        .await;
    assert_eq!((r.status, r.param()), (400, Some("mandate_data.ends_at")));
}

#[actix_web::test]
async fn deleting_a_saved_method_revokes_its_mandates() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let c = customer(&app, &m, json!({"name": "Ana"})).await;
    let cid = c["customer_id"].as_str().unwrap();
    let p = save(&app, &m, cid, "4242424242424242", json!({})).await;
    let mandate_id = p["mandate_id"].as_str().unwrap().to_owned();
    let methods = app
        .call(
            &m,
            Method::GET,
            &format!("/customers/{cid}/payment-methods"),
            None,
        )
        .await;
    let pm = methods.body["data"][0]["payment_method_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let deleted = app
        .call(&m, Method::DELETE, &format!("/payment-methods/{pm}"), None)
        .await;
    assert_eq!(deleted.status, 200, "{}", deleted.body);
    let mandate = app
        .call(&m, Method::GET, &format!("/mandates/{mandate_id}"), None)
        .await;
    assert_eq!(mandate.body["status"], "revoked", "{}", mandate.body);
    let events = app
        .call(
            &m,
            Method::POST,
            &format!("/events/{}", m.merchant_id),
            Some(json!({"object_id": mandate_id, "event_type": "mandate_revoked"})),
        )
        .await;
    assert_eq!(
        events.body["data"].as_array().unwrap().len(),
        1,
        "{}",
        events.body
    );
    // Nothing holds the customer any more.
    let gone = app
        .call(&m, Method::DELETE, &format!("/customers/{cid}"), None)
        .await;
    assert_eq!(gone.status, 200, "{}", gone.body);
}

/// A customer whose stored address, or one of whose saved cards, no longer decodes (edited by
/// hand) is not deleted, nor is the card: the redaction could not know what to take out of
/// the customer's events, nor could the card be detached at its processor. 500, logged (`a
/// stored JSON value does not decode`), and nothing forgotten.
#[actix_web::test]
async fn a_customer_or_card_that_does_not_decode_is_not_deleted() {
    use payd_entity::{customer, payment_method};
    use sea_orm::{ConnectionTrait, EntityTrait, QuerySelect};
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let c = customer(
        &app,
        &m,
        json!({"name": "Ana", "address": {"line1": "Main St 1"}}),
    )
    .await;
    let cid = c["customer_id"].as_str().unwrap().to_owned();
    let on_session = json!({"setup_future_usage": "on_session"});
    save(&app, &m, &cid, "4242424242424242", on_session).await;
    let methods = get(&app, &m, &format!("/customers/{cid}/payment-methods")).await;
    let pm = methods.body["data"][0]["payment_method_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let edit = |sql: String| {
        let db = &app.state.db;
        async move { db.execute_unprepared(&sql).await.unwrap() }
    };
    let delete = |path: String| {
        let (app, m) = (&app, &m);
        async move { app.call(m, Method::DELETE, &path, None).await }
    };

    edit(format!(
        "UPDATE customers SET address = 'Main St 1' WHERE id = '{cid}'"
    ))
    .await;
    let r = delete(format!("/customers/{cid}")).await;
    assert_eq!(r.status, 500, "the address: {}", r.body);

    edit(format!(
        "UPDATE customers SET address = NULL WHERE id = '{cid}'"
    ))
    .await;
    edit(format!(
        "UPDATE payment_methods SET card = '{{' WHERE id = '{pm}'"
    ))
    .await;
    let r = delete(format!("/payment-methods/{pm}")).await;
    assert_eq!(r.status, 500, "the card alone: {}", r.body);
    let r = delete(format!("/customers/{cid}")).await;
    assert_eq!(r.status, 500, "the customer's card: {}", r.body);

    let db = &app.state.db;
    let kept = customer::Entity::find_by_id(payd::ids::CustomerId::parse(&cid).unwrap())
        .one(db)
        .await
        .unwrap();
    assert!(kept.is_some_and(|c| c.redacted_at.is_none() && c.name.as_deref() == Some("Ana")));
    // Its row no longer reads as a whole (the card does not decode): its id does.
    let card = payment_method::Entity::find_by_id(payd::ids::PaymentMethodId::parse(&pm).unwrap())
        .select_only()
        .column(payment_method::Column::Id)
        .into_tuple::<String>()
        .one(db)
        .await
        .unwrap();
    assert_eq!(card, Some(pm), "the card is kept");
}

//! The product catalog: products and immutable prices, categories, add-on groups, bundles,
//! images, catalog checks on payment lines, the sales report, and import from the sandbox
//! catalog processor.

use crate::common;

use std::sync::Arc;

use actix_web::http::Method;
use common::{card, spawn_app, spawn_with, Merchant, TestApp, TestDb};
use serde_json::{json, Value};

async fn create(app: &TestApp, m: &Merchant, body: Value) -> Value {
    let r = app.call(m, Method::POST, "/products", Some(body)).await;
    assert_eq!(r.status, 201, "{}", r.body);
    r.body
}

/// A product with one EUR price of `amount`.
async fn product(app: &TestApp, m: &Merchant, name: &str, amount: i64) -> Value {
    create(
        app,
        m,
        json!({"name": name, "prices": [{"unit_amount": amount, "currency": "EUR"}]}),
    )
    .await
}

fn id(v: &Value, field: &str) -> String {
    v[field]
        .as_str()
        .unwrap_or_else(|| panic!("no {field} in {v}"))
        .to_owned()
}

async fn post(app: &TestApp, m: &Merchant, path: &str, body: Value) -> common::Answer {
    app.call(m, Method::POST, path, Some(body)).await
}

async fn get(app: &TestApp, m: &Merchant, path: &str) -> common::Answer {
    app.call(m, Method::GET, path, None).await
}

#[actix_web::test]
async fn prices_never_change_and_the_default_price_stays_on_sale() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let p = create(
        &app,
        &m,
        json!({"name": "Coffee", "description": "1 kg", "metadata": {"sku": "C1"},
        "prices": [
            {"unit_amount": 2400, "currency": "eur", "nickname": "bag"},
            {"unit_amount": 2200, "currency": "EUR", "recurring": {"interval": "month"}},
            {"unit_amount": 300, "currency": "JPY"}
        ]}),
    )
    .await;
    let pid = id(&p, "product_id");
    assert!(pid.starts_with("prod_"));
    let prices = p["prices"].as_array().unwrap();
    assert_eq!(prices.len(), 3);
    assert_eq!(prices[0]["currency"], "EUR");
    assert_eq!(prices[0]["default"], true);
    assert_eq!(p["default_price_id"], prices[0]["price_id"]);
    assert_eq!(
        prices[1]["recurring"],
        json!({"interval": "month", "interval_count": 1})
    );
    assert_eq!(p["active"], true);
    let first = id(&prices[0], "price_id");
    let second = id(&prices[1], "price_id");

    // Bad prices name their field.
    for (body, param) in [
        (json!({"name": "X", "prices": []}), "prices"),
        (
            json!({"name": "", "prices": [{"unit_amount": 1, "currency": "EUR"}]}),
            "name",
        ),
        (
            json!({"name": "X", "prices": [{"unit_amount": -1, "currency": "EUR"}]}),
            "prices[0].unit_amount",
        ),
        (
            json!({"name": "X", "prices": [{"unit_amount": 1, "currency": "EURO"}]}),
            "prices[0].currency",
        ),
        (
            json!({"name": "X", "prices": [{"unit_amount": 1, "currency": "EUR",
            "recurring": {"interval": "fortnight"}}]}),
            "prices[0].recurring.interval",
        ),
        (
            json!({"name": "X", "prices": [{"unit_amount": 1, "currency": "EUR",
            "recurring": {"interval": "month", "interval_count": 13}}]}),
            "prices[0].recurring.interval_count",
        ),
        (
            json!({"name": "X", "prices": [{"unit_amount": 1, "currency": "EUR", "default": true},
            {"unit_amount": 2, "currency": "EUR", "default": true}]}),
            "prices[1].default",
        ),
    ] {
        let r = post(&app, &m, "/products", body.clone()).await;
        assert_eq!(
            (r.status, r.param()),
            (400, Some(param)),
            "{body}: {}",
            r.body
        );
    }

    // A price's amount, currency and recurrence never change: the update takes none of them.
    let path = format!("/products/{pid}/prices/{first}");
    for field in ["unit_amount", "currency", "recurring"] {
        let r = post(&app, &m, &path, json!({field: 5})).await;
        assert_eq!(r.status, 400, "{field}: {}", r.body);
        assert_eq!(r.param(), Some(field), "{}", r.body);
    }
    let r = post(
        &app,
        &m,
        &path,
        json!({"nickname": "big bag", "metadata": {"a": 1}}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        (r.body["nickname"].as_str(), r.body["unit_amount"].as_i64()),
        (Some("big bag"), Some(2400))
    );

    // The default price cannot be archived until another is the default.
    let archive = |price: &str| format!("/products/{pid}/prices/{price}/archive");
    let r = post(&app, &m, &archive(&first), json!({})).await;
    assert_eq!((r.status, r.code()), (409, "default_price"), "{}", r.body);
    let added = post(
        &app,
        &m,
        &format!("/products/{pid}/prices"),
        json!({"unit_amount": 2600, "currency": "EUR", "default": true}),
    )
    .await;
    assert_eq!(added.status, 201, "{}", added.body);
    assert_eq!(added.body["default"], true);
    let r = post(&app, &m, &archive(&first), json!({})).await;
    assert_eq!(
        (r.status, r.body["active"].as_bool()),
        (200, Some(false)),
        "{}",
        r.body
    );
    // An archived price cannot become the default again.
    let r = post(
        &app,
        &m,
        &format!("/products/{pid}/prices/{first}"),
        json!({"default": true}),
    )
    .await;
    assert_eq!((r.status, r.code()), (400, "archived"), "{}", r.body);
    let r = post(
        &app,
        &m,
        &format!("/products/{pid}"),
        json!({"default_price_id": first}),
    )
    .await;
    assert_eq!(
        (r.status, r.param()),
        (400, Some("default_price_id")),
        "{}",
        r.body
    );
    let r = post(
        &app,
        &m,
        &format!("/products/{pid}"),
        json!({"default_price_id": second, "name": "Coffee beans"}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        (r.body["name"].as_str(), r.body["default_price_id"].as_str()),
        (Some("Coffee beans"), Some(second.as_str()))
    );

    // The list shows active prices; the product shows every price.
    let list = get(&app, &m, "/products/list").await;
    assert_eq!(list.status, 200, "{}", list.body);
    let listed = &list.body["data"][0];
    assert_eq!(
        listed["prices"].as_array().unwrap().len(),
        3,
        "the archived price is left out"
    );
    let one = get(&app, &m, &format!("/products/{pid}")).await;
    assert_eq!(one.body["prices"].as_array().unwrap().len(), 4);

    // Archive and restore; filters.
    let r = post(&app, &m, &format!("/products/{pid}/archive"), json!({})).await;
    assert_eq!(r.body["active"], false);
    let active = get(&app, &m, "/products/list?active=true").await;
    assert_eq!(active.body["data"], json!([]));
    let r = post(&app, &m, &format!("/products/{pid}/restore"), json!({})).await;
    assert_eq!(r.body["active"], true);
    let named = get(&app, &m, "/products/list?name=BEANS").await;
    assert_eq!(named.body["data"].as_array().unwrap().len(), 1);
    let other = get(&app, &m, "/products/list?name=tea").await;
    assert_eq!(other.body["data"], json!([]));
}

#[actix_web::test]
async fn categories_nest_one_level() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let drinks = post(&app, &m, "/products/categories", json!({"name": "Drinks"})).await;
    assert_eq!(drinks.status, 201, "{}", drinks.body);
    let hot = post(
        &app,
        &m,
        "/products/categories",
        json!({"name": "Hot", "parent_id": drinks.body["category_id"]}),
    )
    .await;
    assert_eq!(hot.status, 201, "{}", hot.body);
    let deeper = post(
        &app,
        &m,
        "/products/categories",
        json!({"name": "Tea", "parent_id": hot.body["category_id"]}),
    )
    .await;
    assert_eq!(
        (deeper.status, deeper.param()),
        (400, Some("parent_id")),
        "{}",
        deeper.body
    );
    let list = get(&app, &m, "/products/categories/list").await;
    assert_eq!(list.body["data"].as_array().unwrap().len(), 2);
    let children = get(
        &app,
        &m,
        &format!(
            "/products/categories/list?parent_id={}",
            id(&drinks.body, "category_id")
        ),
    )
    .await;
    assert_eq!(children.body["data"].as_array().unwrap().len(), 1);

    let p = create(
        &app,
        &m,
        json!({"name": "Chai", "category_id": hot.body["category_id"],
        "prices": [{"unit_amount": 400, "currency": "EUR"}]}),
    )
    .await;
    assert_eq!(p["category_id"], hot.body["category_id"]);
    let filtered = get(
        &app,
        &m,
        &format!(
            "/products/list?category_id={}",
            id(&hot.body, "category_id")
        ),
    )
    .await;
    assert_eq!(filtered.body["data"].as_array().unwrap().len(), 1);

    let other = app.create_merchant("Other").await;
    let foreign = post(
        &app,
        &other,
        "/products",
        json!({"name": "X", "category_id": drinks.body["category_id"],
        "prices": [{"unit_amount": 1, "currency": "EUR"}]}),
    )
    .await;
    assert_eq!(
        (foreign.status, foreign.param()),
        (404, Some("category_id")),
        "{}",
        foreign.body
    );
}

#[actix_web::test]
async fn addon_groups_and_bundles_keep_their_bounds() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let burger = product(&app, &m, "Burger", 900).await;
    let fries = product(&app, &m, "Fries", 300).await;
    let sauce = product(&app, &m, "Sauce", 50).await;
    let (b, f, s) = (
        id(&burger, "product_id"),
        id(&fries, "product_id"),
        id(&sauce, "product_id"),
    );
    let sauce_price = id(&sauce["prices"][0], "price_id");
    let groups = format!("/products/{b}/addon-groups");

    let g = post(
        &app,
        &m,
        &groups,
        json!({"name": "Sides", "min_selections": 0, "max_selections": 2,
        "products": [f], "prices": [sauce_price]}),
    )
    .await;
    assert_eq!(g.status, 201, "{}", g.body);
    let group_id = id(&g.body, "group_id");
    assert!(group_id.starts_with("grp_"));
    for (body, param) in [
        (
            json!({"name": "X", "min_selections": 2, "max_selections": 1, "products": [f]}),
            "min_selections",
        ),
        (
            json!({"name": "X", "min_selections": 0, "max_selections": 2, "products": [f]}),
            "max_selections",
        ),
        (
            json!({"name": "X", "min_selections": 0, "max_selections": 1}),
            "products",
        ),
        (
            json!({"name": "X", "min_selections": 0, "max_selections": 1, "products": [b]}),
            "products[0]",
        ),
        (
            json!({"name": "X", "min_selections": 0, "max_selections": 1, "products": ["prod_00000000000000000000000000000000"]}),
            "products[0]",
        ),
    ] {
        let r = post(&app, &m, &groups, body.clone()).await;
        assert_eq!(r.param(), Some(param), "{body}: {} {}", r.status, r.body);
        assert!(r.status == 400 || r.status == 404, "{}", r.status);
    }
    // An archived member is refused (the sauce itself is held by the group through its price,
    // so it cannot be archived: another product is).
    let ketchup = id(&product(&app, &m, "Ketchup", 40).await, "product_id");
    let r = post(&app, &m, &format!("/products/{ketchup}/archive"), json!({})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = post(
        &app,
        &m,
        &groups,
        json!({"name": "X", "min_selections": 0, "max_selections": 1, "products": [ketchup]}),
    )
    .await;
    assert_eq!((r.status, r.code()), (400, "archived"), "{}", r.body);
    let r = post(&app, &m, &format!("/products/{s}/archive"), json!({})).await;
    assert_eq!((r.status, r.code()), (409, "product_in_use"), "{}", r.body);

    // Replace and remove.
    let r = post(
        &app,
        &m,
        &format!("{groups}/{group_id}"),
        json!({"name": "Side", "min_selections": 1,
        "max_selections": 1, "products": [f]}),
    )
    .await;
    assert_eq!(
        (r.status, r.body["name"].as_str()),
        (200, Some("Side")),
        "{}",
        r.body
    );
    let shown = get(&app, &m, &format!("/products/{b}")).await;
    assert_eq!(shown.body["addon_groups"][0]["group_id"], group_id.as_str());
    assert_eq!(shown.body["addon_groups"][0]["min_selections"], 1);
    let gone = app
        .call(&m, Method::DELETE, &format!("{groups}/{group_id}"), None)
        .await;
    assert_eq!(gone.status, 200, "{}", gone.body);
    let again = app
        .call(&m, Method::DELETE, &format!("{groups}/{group_id}"), None)
        .await;
    assert_eq!((again.status, again.param()), (404, Some("group_id")));

    // Bundles: components, no cycles, directly or through another bundle.
    let menu = product(&app, &m, "Menu", 1100).await;
    let menu_id = id(&menu, "product_id");
    let r = post(&app, &m, &format!("/products/{menu_id}/bundle"),
        json!({"components": [{"product_id": b, "quantity": 1}, {"price_id": fries["prices"][0]["price_id"], "quantity": 2}]})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["bundle"]["components"].as_array().unwrap().len(), 2);
    let cycle = post(
        &app,
        &m,
        &format!("/products/{b}/bundle"),
        json!({"components": [{"product_id": menu_id, "quantity": 1}]}),
    )
    .await;
    assert_eq!(
        (cycle.status, cycle.code(), cycle.param()),
        (400, "bundle_cycle", Some("components")),
        "{}",
        cycle.body
    );
    assert!(cycle.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains(&menu_id));
    let selfish = post(
        &app,
        &m,
        &format!("/products/{menu_id}/bundle"),
        json!({"components": [{"product_id": menu_id, "quantity": 1}]}),
    )
    .await;
    assert_eq!(selfish.code(), "bundle_cycle");
    let both = post(
        &app,
        &m,
        &format!("/products/{menu_id}/bundle"),
        json!({"components": [{"product_id": b, "price_id": sauce_price, "quantity": 1}]}),
    )
    .await;
    assert_eq!((both.status, both.param()), (400, Some("components[0]")));
    let zero = post(
        &app,
        &m,
        &format!("/products/{menu_id}/bundle"),
        json!({"components": [{"product_id": b, "quantity": 0}]}),
    )
    .await;
    assert_eq!(
        (zero.status, zero.param()),
        (400, Some("components[0].quantity"))
    );
}

/// A payment of these lines with this card, captured or not.
async fn pay(
    app: &TestApp,
    m: &Merchant,
    amount: i64,
    lines: Value,
    capture: &str,
) -> common::Answer {
    app.create_payment(
        m,
        json!({"amount": amount, "currency": "EUR", "confirm": true, "capture_method": capture,
            "payment_method_data": card("4242424242424242"), "lines": lines}),
    )
    .await
}

#[actix_web::test]
async fn payment_lines_are_checked_against_the_catalog_and_sold_products_stay() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let p = create(
        &app,
        &m,
        json!({"name": "Mug", "prices": [
        {"unit_amount": 1200, "currency": "EUR"}, {"unit_amount": 1000, "currency": "USD"},
        {"unit_amount": 900, "currency": "EUR", "recurring": {"interval": "month"}},
        {"unit_amount": 1100, "currency": "EUR"}]}),
    )
    .await;
    let pid = id(&p, "product_id");
    let price = |i: usize| id(&p["prices"][i], "price_id");
    let other = product(&app, &m, "Plate", 800).await;
    let line = |price_id: &str, unit: i64| {
        json!([{"name": "Mug", "quantity": 1, "unit_amount": unit,
        "product_id": pid, "price_id": price_id}])
    };

    post(
        &app,
        &m,
        &format!("/products/{pid}/prices/{}/archive", price(3)),
        json!({}),
    )
    .await;
    for (lines, amount, param, why) in [
        (
            line(&price(1), 1000),
            1000,
            "lines[0].price_id",
            "another currency",
        ),
        (line(&price(2), 900), 900, "lines[0].price_id", "recurring"),
        (line(&price(3), 1100), 1100, "lines[0].price_id", "archived"),
        (
            line(&price(0), 1000),
            1000,
            "lines[0].unit_amount",
            "another amount",
        ),
        (
            json!([{"name": "Plate", "quantity": 1, "unit_amount": 1200, "product_id": other["product_id"], "price_id": price(0)}]),
            1200,
            "lines[0].price_id",
            "the price of another product",
        ),
        (
            json!([{"name": "?", "quantity": 1, "unit_amount": 1200, "product_id": "prod_00000000000000000000000000000000"}]),
            1200,
            "lines[0].product_id",
            "unknown",
        ),
    ] {
        let r = pay(&app, &m, amount, lines, "automatic").await;
        assert_eq!(
            (r.status, r.param()),
            (400, Some(param)),
            "{why}: {}",
            r.body
        );
    }
    // Another merchant's product is unknown to this one.
    let stranger = app.create_merchant("Other").await;
    let theirs = product(&app, &stranger, "Theirs", 500).await;
    let r = pay(&app, &m, 500, json!([{"name": "T", "quantity": 1, "unit_amount": 500, "price_id": theirs["prices"][0]["price_id"]}]), "automatic").await;
    assert_eq!(
        (r.status, r.param()),
        (400, Some("lines[0].price_id")),
        "{}",
        r.body
    );

    let ok = pay(&app, &m, 1200, line(&price(0), 1200), "automatic").await;
    assert_eq!(ok.status, 201, "{}", ok.body);

    // Catalog lines are fixed once the payment is created: an update cannot bring or change them.
    let open = app
        .create_payment(
            &m,
            json!({"amount": 1200, "currency": "EUR", "lines": line(&price(0), 1200)}),
        )
        .await;
    assert_eq!(open.status, 201, "{}", open.body);
    let plain_lines = json!([{"name": "Mug", "quantity": 1, "unit_amount": 1200}]);
    let r = post(
        &app,
        &m,
        &format!("/payments/{}", id(&open.body, "payment_id")),
        json!({"lines": plain_lines}),
    )
    .await;
    assert_eq!((r.status, r.param()), (400, Some("lines")), "{}", r.body);
    let plain = app
        .create_payment(&m, json!({"amount": 1200, "currency": "EUR"}))
        .await;
    let r = post(
        &app,
        &m,
        &format!("/payments/{}", id(&plain.body, "payment_id")),
        json!({"lines": line(&price(0), 1200)}),
    )
    .await;
    assert_eq!(
        (r.status, r.param()),
        (400, Some("lines[0].product_id")),
        "{}",
        r.body
    );

    // Sold: it cannot be deleted, only archived; an archived product cannot be sold.
    let del = app
        .call(&m, Method::DELETE, &format!("/products/{pid}"), None)
        .await;
    assert_eq!(
        (del.status, del.code()),
        (409, "product_has_sales"),
        "{}",
        del.body
    );
    post(&app, &m, &format!("/products/{pid}/archive"), json!({})).await;
    let r = pay(&app, &m, 1200, line(&price(0), 1200), "automatic").await;
    assert_eq!(
        (r.status, r.param()),
        (400, Some("lines[0].product_id")),
        "{}",
        r.body
    );
    // A product never sold goes.
    let del = app
        .call(
            &m,
            Method::DELETE,
            &format!("/products/{}", id(&other, "product_id")),
            None,
        )
        .await;
    assert_eq!(
        (del.status, del.body["deleted"].as_bool()),
        (200, Some(true)),
        "{}",
        del.body
    );
    let gone = get(&app, &m, &format!("/products/{}", id(&other, "product_id"))).await;
    assert_eq!(gone.status, 404);
}

#[actix_web::test]
async fn the_sales_report_follows_partial_captures_and_line_refunds() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let p = create(
        &app,
        &m,
        json!({"name": "Tea", "prices": [
        {"unit_amount": 1000, "currency": "EUR"}, {"unit_amount": 500, "currency": "EUR"}]}),
    )
    .await;
    let pid = id(&p, "product_id");
    let (big, small) = (
        id(&p["prices"][0], "price_id"),
        id(&p["prices"][1], "price_id"),
    );

    // 4 × 1000 of this product and 1000 of something else; 2 500 of 5 000 captured.
    let held = pay(&app, &m, 5000, json!([
        {"line_id": "tea", "name": "Tea", "quantity": 4, "unit_amount": 1000, "product_id": pid, "price_id": big},
        {"line_id": "cup", "name": "Cup", "quantity": 1, "unit_amount": 1000}]), "manual").await;
    assert_eq!(held.status, 201, "{}", held.body);
    let pay_id = id(&held.body, "payment_id");
    let c = post(
        &app,
        &m,
        &format!("/payments/{pay_id}/capture"),
        json!({"amount": 2500}),
    )
    .await;
    assert_eq!(c.status, 200, "{}", c.body);
    // One unit of tea back.
    let r = post(
        &app,
        &m,
        "/refunds",
        json!({"payment_id": pay_id, "lines": [{"line_id": "tea", "quantity": 1}]}),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.body);
    let refunded = r.body["amount"].as_i64().unwrap();
    // And one small tea, captured whole.
    let whole = pay(
        &app,
        &m,
        500,
        json!([{"name": "Tea", "quantity": 1, "unit_amount": 500, "price_id": small}]),
        "automatic",
    )
    .await;
    assert_eq!(whole.status, 201, "{}", whole.body);

    let report = get(&app, &m, &format!("/products/{pid}/sales")).await;
    assert_eq!(report.status, 200, "{}", report.body);
    let t = &report.body["totals"];
    // The tea line's share of 2 500 is 2 000: two of its four units.
    assert_eq!(
        (t["units_sold"].as_i64(), t["amount_sold"].as_i64()),
        (Some(3), Some(2500)),
        "{}",
        report.body
    );
    assert_eq!(
        (t["units_refunded"].as_i64(), t["amount_refunded"].as_i64()),
        (Some(1), Some(refunded))
    );
    assert_eq!(report.body["currency"], "EUR");
    let by_price = report.body["by_price"].as_array().unwrap();
    assert_eq!(by_price.len(), 2);
    let of = |price: &str| {
        by_price
            .iter()
            .find(|b| b["price_id"] == price)
            .unwrap()
            .clone()
    };
    assert_eq!(of(&big)["amount_sold"], 2000);
    assert_eq!(of(&small)["units_sold"], 1);
    let days = report.body["by_day"].as_array().unwrap();
    assert_eq!(days.len(), 1);
    assert_eq!(days[0]["amount_sold"], 2500);

    // A window before everything is empty; a bad window names its field.
    let early = get(
        &app,
        &m,
        &format!("/products/{pid}/sales?to=2000-01-01T00:00:00Z"),
    )
    .await;
    assert_eq!(early.body["totals"]["units_sold"], 0);
    let bad = get(
        &app,
        &m,
        &format!("/products/{pid}/sales?from=2030-01-01T00:00:00Z&to=2029-01-01T00:00:00Z"),
    )
    .await;
    assert_eq!((bad.status, bad.param()), (400, Some("to")));
    let garbled = get(&app, &m, &format!("/products/{pid}/sales?from=yesterday")).await;
    assert_eq!((garbled.status, garbled.param()), (400, Some("from")));
}

const PNG: &[u8] =
    b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR\0\0\0\x01\0\0\0\x01\x08\x06\0\0\0\x1f\x15\xc4\x89";

#[actix_web::test]
async fn images_are_told_by_their_bytes_and_bounded() {
    let db = Arc::new(TestDb::new().await);
    let app = spawn_with(
        db,
        &[
            ("PAYD_LIMITS__MAX_IMAGE_BYTES", "64"),
            ("PAYD_LIMITS__MAX_PRODUCTS_PER_SHOP", "1"),
        ],
    )
    .await;
    let m = app.create_merchant("Acme").await;
    let upload = |name: &'static str, bytes: &'static [u8]| {
        let (content_type, body) = common::form(&[("file", Some(name), bytes)]);
        let key = m.secret_key.clone();
        let app = &app;
        async move {
            app.send_bytes(
                Method::POST,
                "/products/images",
                Some(&key),
                Some((&content_type, body)),
                &[],
            )
            .await
        }
    };
    let img = upload("pixel.txt", PNG).await;
    assert_eq!(img.status, 201, "{}", img.body);
    assert_eq!(
        img.body["content_type"], "image/png",
        "the bytes, not the name"
    );
    let image_id = id(&img.body, "image_id");
    assert!(image_id.starts_with("img_"));
    // Served without a key, byte for byte.
    let url = img.body["url"].as_str().unwrap();
    let path = &url[url.find("/products/images/").unwrap()..];
    let served = app.send(Method::GET, path, None, None, &[]).await;
    assert_eq!(
        (served.status, served.header("content-type")),
        (200, Some("image/png"))
    );
    assert_eq!(&served.raw[..], PNG);

    let text = upload("a.png", b"just some text").await;
    assert_eq!(
        (text.status, text.code(), text.param()),
        (400, "file_type_unsupported", Some("file")),
        "{}",
        text.body
    );
    let pdf = upload("a.png", b"%PDF-1.4 a document").await;
    assert_eq!(pdf.code(), "file_type_unsupported");
    let big: &'static [u8] = Box::leak(vec![0x89u8; 65].into_boxed_slice());
    let large = upload("big.png", big).await;
    assert_eq!(
        (large.status, large.code()),
        (413, "file_too_large"),
        "{}",
        large.body
    );
    let purpose = {
        let (content_type, body) =
            common::form(&[("file", Some("p.png"), PNG), ("purpose", None, b"x")]);
        app.send_bytes(
            Method::POST,
            "/products/images",
            Some(&m.secret_key),
            Some((&content_type, body)),
            &[],
        )
        .await
    };
    assert_eq!((purpose.status, purpose.param()), (400, Some("purpose")));

    // Products list their images; another merchant's image is unknown.
    let p = create(
        &app,
        &m,
        json!({"name": "Pixel", "images": [image_id],
        "prices": [{"unit_amount": 1, "currency": "EUR"}]}),
    )
    .await;
    assert_eq!(p["images"], json!([image_id]));
    assert_eq!(p["image_urls"][0], url);
    let other = app.create_merchant("Other").await;
    let r = post(
        &app,
        &other,
        "/products",
        json!({"name": "X", "images": [image_id],
        "prices": [{"unit_amount": 1, "currency": "EUR"}]}),
    )
    .await;
    assert_eq!((r.status, r.param()), (404, Some("images")), "{}", r.body);
    let missing = app
        .send(
            Method::GET,
            "/products/images/img_00000000000000000000000000000000",
            None,
            None,
            &[],
        )
        .await;
    assert_eq!(missing.status, 404);
}

#[actix_web::test]
async fn an_import_applies_exactly_its_preview_once() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let accounts = get(&app, &m, "/products/provider-accounts").await;
    assert_eq!(accounts.status, 200, "{}", accounts.body);
    assert_eq!(accounts.body["data"][0]["account"], "sandbox_catalog");
    assert_eq!(
        accounts.body["data"][0]["catalog_actions"],
        json!(["import"])
    );

    let preview = post(&app, &m, "/products/import/preview", json!({})).await;
    assert_eq!(preview.status, 201, "{}", preview.body);
    let created: Vec<&str> = preview.body["create"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["external_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        created,
        ["sbx_prod_coffee", "sbx_prod_mug", "sbx_prod_grinder"],
        "the discontinued teapot is not created"
    );
    assert_eq!(count(&app, &m).await, 0, "a preview changes nothing");

    let apply = post(
        &app,
        &m,
        "/products/import/apply",
        json!({"preview_id": preview.body["preview_id"]}),
    )
    .await;
    assert_eq!(apply.status, 200, "{}", apply.body);
    assert_eq!(apply.body["created"].as_array().unwrap().len(), 3);
    assert_eq!(count(&app, &m).await, 3);
    let again = post(
        &app,
        &m,
        "/products/import/apply",
        json!({"preview_id": preview.body["preview_id"]}),
    )
    .await;
    assert_eq!(again.status, 200);
    assert_eq!(again.body, apply.body, "the same answer");
    assert_eq!(count(&app, &m).await, 3, "nothing new");
    let coffee = apply.body["created"][0]["product_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let shown = get(&app, &m, &format!("/products/{coffee}")).await;
    assert_eq!(shown.body["external_id"], "sbx_prod_coffee");
    assert_eq!(shown.body["prices"].as_array().unwrap().len(), 2);

    // Imported again: nothing to do.
    let second = post(&app, &m, "/products/import/preview", json!({})).await;
    for part in ["create", "update", "archive"] {
        assert_eq!(second.body[part], json!([]), "{part}: {}", second.body);
    }
    assert_eq!(second.body["unchanged"], 3);

    // A renamed product is set back; a catalog changed after a preview makes it stale.
    post(
        &app,
        &m,
        &format!("/products/{coffee}"),
        json!({"name": "My coffee"}),
    )
    .await;
    let third = post(&app, &m, "/products/import/preview", json!({})).await;
    assert_eq!(
        third.body["update"][0]["product_id"],
        coffee.as_str(),
        "{}",
        third.body
    );
    product(&app, &m, "Something new", 100).await;
    let stale = post(
        &app,
        &m,
        "/products/import/apply",
        json!({"preview_id": third.body["preview_id"]}),
    )
    .await;
    assert_eq!(
        (stale.status, stale.code()),
        (409, "preview_stale"),
        "{}",
        stale.body
    );
    let fourth = post(&app, &m, "/products/import/preview", json!({})).await;
    let applied = post(
        &app,
        &m,
        "/products/import/apply",
        json!({"preview_id": fourth.body["preview_id"]}),
    )
    .await;
    assert_eq!(
        applied.body["updated"][0]["product_id"],
        coffee.as_str(),
        "{}",
        applied.body
    );
    assert_eq!(
        get(&app, &m, &format!("/products/{coffee}")).await.body["name"],
        "Coffee beans, 1 kg"
    );

    let unknown = post(
        &app,
        &m,
        "/products/import/preview",
        json!({"account": "nope"}),
    )
    .await;
    assert_eq!((unknown.status, unknown.param()), (404, Some("account")));
    let other = app.create_merchant("Other").await;
    let foreign = post(
        &app,
        &other,
        "/products/import/apply",
        json!({"preview_id": fourth.body["preview_id"]}),
    )
    .await;
    assert_eq!(foreign.status, 404);
}

async fn count(app: &TestApp, m: &Merchant) -> usize {
    get(app, m, "/products/list?limit=100").await.body["data"]
        .as_array()
        .unwrap()
        .len()
}

#[actix_web::test]
async fn a_free_price_is_accepted_and_a_negative_one_is_refused_saying_so() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let free = product(&app, &m, "Sticker", 0).await;
    assert_eq!(free["prices"][0]["unit_amount"], 0);
    let pid = id(&free, "product_id");

    for (path, body, param) in [
        (
            "/products".to_owned(),
            json!({"name": "X", "prices": [{"unit_amount": -1, "currency": "EUR"}]}),
            "prices[0].unit_amount",
        ),
        (
            format!("/products/{pid}/prices"),
            json!({"unit_amount": -250, "currency": "EUR"}),
            "unit_amount",
        ),
    ] {
        let r = post(&app, &m, &path, body).await;
        assert_eq!((r.status, r.param()), (400, Some(param)), "{}", r.body);
        // The message states the rule that holds: 0 is allowed.
        let message = r.body["error"]["message"].as_str().unwrap();
        assert!(message.contains("0 or more"), "{message}");
        assert!(!message.contains("greater than 0"), "{message}");
    }
    let added = post(
        &app,
        &m,
        &format!("/products/{pid}/prices"),
        json!({"unit_amount": 0, "currency": "USD"}),
    )
    .await;
    assert_eq!(added.status, 201, "{}", added.body);
}

#[actix_web::test]
async fn a_sandbox_catalog_shows_test_mode_on_prices_categories_and_groups() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let cat = post(&app, &m, "/products/categories", json!({"name": "Drinks"})).await;
    assert_eq!(cat.status, 201, "{}", cat.body);
    assert_eq!(cat.body["test_mode"], true, "{}", cat.body);
    let listed = get(&app, &m, "/products/categories/list").await;
    assert_eq!(listed.body["data"][0]["test_mode"], true, "{}", listed.body);

    let tea = product(&app, &m, "Tea", 400).await;
    let milk = product(&app, &m, "Milk", 50).await;
    let tea_id = id(&tea, "product_id");
    assert_eq!(tea["prices"][0]["test_mode"], true, "{tea}");
    let added = post(
        &app,
        &m,
        &format!("/products/{tea_id}/prices"),
        json!({"unit_amount": 500, "currency": "EUR"}),
    )
    .await;
    assert_eq!(added.body["test_mode"], true, "{}", added.body);
    let group = post(
        &app,
        &m,
        &format!("/products/{tea_id}/addon-groups"),
        json!({"name": "Extras", "min_selections": 0, "max_selections": 1,
        "products": [milk["product_id"]]}),
    )
    .await;
    assert_eq!(group.status, 201, "{}", group.body);
    assert_eq!(group.body["test_mode"], true, "{}", group.body);

    let shown = get(&app, &m, &format!("/products/{tea_id}")).await;
    assert_eq!(shown.body["addon_groups"][0]["test_mode"], true);
    for price in shown.body["prices"].as_array().unwrap() {
        assert_eq!(price["test_mode"], true, "{price}");
    }
    let list = get(&app, &m, "/products/list").await;
    for p in list.body["data"].as_array().unwrap() {
        assert_eq!(p["prices"][0]["test_mode"], true, "{p}");
    }
}

#[actix_web::test]
async fn concurrent_applies_of_one_preview_all_answer_the_first_apply() {
    let app = spawn_app().await;
    // The race is a matter of timing: several rounds, each a shop of its own.
    for round in 0..8 {
        let m = app.create_merchant(&format!("Shop {round}")).await;
        let preview = post(&app, &m, "/products/import/preview", json!({})).await;
        assert_eq!(preview.status, 201, "{}", preview.body);
        let body = json!({"preview_id": preview.body["preview_id"]});
        let answers = futures_util::future::join_all(
            (0..8).map(|_| post(&app, &m, "/products/import/apply", body.clone())),
        )
        .await;
        for a in &answers {
            assert_eq!(a.status, 200, "round {round}: {}", a.body);
            assert_eq!(a.raw, answers[0].raw, "every apply answers the first one");
        }
        assert_eq!(answers[0].body["created"].as_array().unwrap().len(), 3);
        assert_eq!(count(&app, &m).await, 3, "the products are created once");
    }
}

#[actix_web::test]
async fn what_a_bundle_or_an_addon_group_holds_stays_on_sale() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let menu = id(&product(&app, &m, "Menu", 1100).await, "product_id");
    let burger = id(&product(&app, &m, "Burger", 900).await, "product_id");
    let fries = product(&app, &m, "Fries", 300).await;
    let (fries_id, fries_price) = (
        id(&fries, "product_id"),
        id(&fries["prices"][0], "price_id"),
    );
    let sauce = id(&product(&app, &m, "Sauce", 50).await, "product_id");
    let dip = post(
        &app,
        &m,
        &format!("/products/{sauce}/prices"),
        json!({"unit_amount": 80, "currency": "EUR"}),
    )
    .await;
    let dip_price = id(&dip.body, "price_id");
    let r = post(&app, &m, &format!("/products/{menu}/bundle"),
        json!({"components": [{"product_id": burger, "quantity": 1}, {"price_id": fries_price, "quantity": 1}]})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    let g = post(
        &app,
        &m,
        &format!("/products/{burger}/addon-groups"),
        json!({"name": "Sauces", "min_selections": 0, "max_selections": 1, "prices": [dip_price]}),
    )
    .await;
    assert_eq!(g.status, 201, "{}", g.body);
    let group = id(&g.body, "group_id");

    // A component, by product or by one of its prices, and an add-on member are not archived
    // nor deleted: the answer names who holds them.
    let archive = |p: &str| format!("/products/{p}/archive");
    for (product_id, holder) in [
        (&burger, format!("bundle {menu}")),
        (&fries_id, format!("bundle {menu}")),
        (&sauce, format!("add-on group {group} of {burger}")),
    ] {
        let r = post(&app, &m, &archive(product_id), json!({})).await;
        assert_eq!(
            (r.status, r.code(), r.param()),
            (409, "product_in_use", Some("product_id")),
            "{}",
            r.body
        );
        let message = r.body["error"]["message"].as_str().unwrap();
        assert!(message.contains(&holder), "{message}");
        let d = app
            .call(&m, Method::DELETE, &format!("/products/{product_id}"), None)
            .await;
        assert_eq!((d.status, d.code()), (409, "product_in_use"), "{}", d.body);
    }
    let r = post(
        &app,
        &m,
        &format!("/products/{sauce}/prices/{dip_price}/archive"),
        json!({}),
    )
    .await;
    assert_eq!((r.status, r.code()), (409, "price_in_use"), "{}", r.body);
    assert!(r.body["error"]["message"]
        .as_str()
        .unwrap()
        .contains(&group));
    for p in [&burger, &fries_id, &sauce] {
        assert_eq!(
            get(&app, &m, &format!("/products/{p}")).await.body["active"],
            true
        );
    }

    // Taken out of them, they can be archived.
    let r = post(
        &app,
        &m,
        &format!("/products/{menu}/bundle"),
        json!({"components": []}),
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let r = app
        .call(
            &m,
            Method::DELETE,
            &format!("/products/{burger}/addon-groups/{group}"),
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.body);
    for p in [&burger, &fries_id, &sauce] {
        let r = post(&app, &m, &archive(p), json!({})).await;
        assert_eq!(r.status, 200, "{}", r.body);
    }
    // A price of an archived product is not a component or a member either.
    let r = post(
        &app,
        &m,
        &format!("/products/{menu}/bundle"),
        json!({"components": [{"price_id": fries_price, "quantity": 1}]}),
    )
    .await;
    assert_eq!(
        (r.status, r.code(), r.param()),
        (400, "archived", Some("components[0].price_id")),
        "{}",
        r.body
    );
    let r = post(
        &app,
        &m,
        &format!("/products/{menu}/addon-groups"),
        json!({"name": "Sauces", "min_selections": 0, "max_selections": 1, "prices": [dip_price]}),
    )
    .await;
    assert_eq!(
        (r.status, r.code(), r.param()),
        (400, "archived", Some("prices[0]")),
        "{}",
        r.body
    );
}

#[actix_web::test]
async fn an_archive_racing_a_bundle_or_group_edit_never_leaves_it_holding_an_archived_product() {
    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    for round in 0..6 {
        let holder = id(&product(&app, &m, "Holder", 1000).await, "product_id");
        let part = id(&product(&app, &m, "Part", 100).await, "product_id");
        let (edit_path, edit) = match round % 2 {
            0 => (
                format!("/products/{holder}/bundle"),
                json!({"components": [{"product_id": part, "quantity": 1}]}),
            ),
            _ => (
                format!("/products/{holder}/addon-groups"),
                json!({"name": "Extras", "min_selections": 0, "max_selections": 1, "products": [part]}),
            ),
        };
        let archive_path = format!("/products/{part}/archive");
        let (archived, edited) = futures_util::join!(
            post(&app, &m, &archive_path, json!({})),
            post(&app, &m, &edit_path, edit),
        );
        for r in [&archived, &edited] {
            assert!(
                [200, 201, 400, 409].contains(&r.status),
                "{} {}",
                r.status,
                r.body
            );
        }
        let part_active = get(&app, &m, &format!("/products/{part}")).await.body["active"] == true;
        let shown = get(&app, &m, &format!("/products/{holder}")).await.body;
        let holds =
            !shown["bundle"].is_null() || !shown["addon_groups"].as_array().unwrap().is_empty();
        assert!(
            part_active || !holds,
            "round {round}: archive {} {}, edit {} {}: {shown}",
            archived.status,
            archived.body,
            edited.status,
            edited.body
        );
        assert!(archived.status == 200 || edited.status < 300);
    }
}

/// A stored value that does not decode is a fault, never an empty default: the product reads
/// as a 500 whose body names no cause, and deleting one of its add-on groups answers 500 and
/// writes nothing (an empty default would have been stored over every group).
#[actix_web::test]
async fn a_corrupt_stored_value_answers_500_and_nothing_is_written() {
    use payd_entity::product;
    use sea_orm::{sea_query::Expr, ColumnTrait, EntityTrait, QueryFilter, QuerySelect};

    let app = spawn_app().await;
    let m = app.create_merchant("Acme").await;
    let burger = id(&product(&app, &m, "Burger", 900).await, "product_id");
    let fries = id(&product(&app, &m, "Fries", 300).await, "product_id");
    let g = post(
        &app,
        &m,
        &format!("/products/{burger}/addon-groups"),
        json!({"name": "Sides", "min_selections": 0, "max_selections": 1, "products": [fries]}),
    )
    .await;
    assert_eq!(g.status, 201, "{}", g.body);
    let group = id(&g.body, "group_id");
    // The column's text (the row as a whole does not read once it is corrupt).
    let stored = || async {
        product::Entity::find_by_id(payd::ids::ProductId::parse(&burger).unwrap())
            .select_only()
            .column(product::Column::AddonGroups)
            .into_tuple::<String>()
            .one(&app.state.db)
            .await
            .unwrap()
            .unwrap()
    };
    let corrupt = stored().await.replace('}', "");
    product::Entity::update_many()
        .col_expr(product::Column::AddonGroups, Expr::value(corrupt.clone()))
        .filter(product::Column::Id.eq(burger.as_str()))
        .exec(&app.state.db)
        .await
        .unwrap();

    let read = get(&app, &m, &format!("/products/{burger}")).await;
    assert_eq!(
        (read.status, read.code()),
        (500, "internal_error"),
        "{}",
        read.body
    );
    assert!(
        !read.body.to_string().contains("addon_groups"),
        "{}",
        read.body
    );
    let delete = app
        .call(
            &m,
            Method::DELETE,
            &format!("/products/{burger}/addon-groups/{group}"),
            None,
        )
        .await;
    assert_eq!(delete.status, 500, "{}", delete.body);
    assert_eq!(stored().await, corrupt, "nothing was written");
    app.stop().await;
}

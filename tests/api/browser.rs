//! The hosted checkout in a real browser: headless Chromium, driven through ChromeDriver, types
//! cards into the page, retries after a decline and passes a 3-D Secure challenge, and the API
//! agrees with what the page shows (the browser: tests/api/common/browser.rs).

use crate::common;

use std::{
    io::Write,
    panic::AssertUnwindSafe,
    path::Path,
    time::{Duration, Instant},
};

use actix_web::{http::Method, rt::time::timeout};
use common::{
    browser::{
        browser_available, open_browser, truthy, ChromeDriver, Page, ALL_SCENARIOS, POLL, WAIT,
    },
    spawn_app, Merchant, TestApp,
};
use futures_util::FutureExt;
use serde_json::{json, Value};

/// A payment of 500 USD with automatic capture and a hosted checkout, not confirmed: its id and
/// its `checkout_url`.
async fn checkout(app: &TestApp, m: &Merchant) -> (String, String) {
    let res = app
        .create_payment(
            m,
            json!({"amount": 500, "currency": "USD", "capture_method": "automatic", "hosted_checkout": true}),
        )
        .await;
    assert_eq!(res.status, 201, "{}", res.body);
    assert_eq!(
        res.body["status"], "requires_payment_method",
        "{}",
        res.body
    );
    let id = res.body["payment_id"]
        .as_str()
        .expect("payment_id")
        .to_owned();
    let url = res.body["checkout_url"]
        .as_str()
        .expect("checkout_url")
        .to_owned();
    assert!(
        app.path_of(&url)
            .is_some_and(|p| p.starts_with(&format!("/checkout/{id}?client_secret="))),
        "{url}"
    );
    (id, url)
}

async fn api_get(app: &TestApp, m: &Merchant, path: &str) -> Value {
    let res = app.call(m, Method::GET, path, None).await;
    assert_eq!(res.status, 200, "{path}: {}", res.body);
    res.body
}

async fn open(page: &Page<'_>, url: &str) {
    page.c.goto(url).await.expect("open the checkout page");
    page.wait_status("requires_payment_method").await;
    let amount = page.element("#amount").await;
    let minor = amount.attr("data-minor").await.expect("read data-minor");
    assert_eq!(minor.as_deref(), Some("500"));
    let currency = amount
        .attr("data-currency")
        .await
        .expect("read data-currency");
    assert_eq!(currency.as_deref(), Some("USD"));
    assert_eq!(page.text("#amount").await, "$5.00");
    assert_eq!(page.text("#submit").await, "Pay $5.00");
}

/// Pays, with the page's requests held back a moment (the test wraps `fetch`) so that the
/// button can be seen busy; then the receipt, and the buyer back at the shop's `return_url`
/// with the payment's id and status.
async fn pays_with_a_card(app: &TestApp, m: &Merchant, page: &Page<'_>) {
    let back = format!("{}/version?order=42", app.bases()[0]);
    let res = app
        .create_payment(
            m,
            json!({"amount": 500, "currency": "USD", "hosted_checkout": true, "return_url": back}),
        )
        .await;
    assert_eq!(res.status, 201, "{}", res.body);
    let id = res.body["payment_id"].as_str().expect("id").to_owned();
    open(
        page,
        res.body["checkout_url"].as_str().expect("checkout_url"),
    )
    .await;
    page.c
        .execute(
            "var f = window.fetch; window.fetch = function (u, o) {
               return new Promise(function (r) { setTimeout(r, 800); }).then(function () { return f(u, o); });
             }; return true;",
            vec![],
        )
        .await
        .expect("slow the page's requests down");
    page.pay_with("4242424242424242").await;
    assert_eq!(page.attr("#submit", "aria-busy").await, "true");
    assert!(!page
        .element("#submit")
        .await
        .is_enabled()
        .await
        .expect("enabled?"));
    assert!(page
        .element("#spinner")
        .await
        .is_displayed()
        .await
        .expect("displayed?"));
    assert_eq!(page.text("#submit").await, "Paying…");
    page.wait_status("succeeded").await;
    assert_eq!(page.text("#receipt-title").await, "Payment successful");
    assert_eq!(page.text("#receipt-reference").await, id);
    let link = page.attr("#return", "href").await;
    assert_eq!(link, format!("{back}&payment_id={id}&status=succeeded"));
    page.wait_path("/version").await;
    // Off the hosted pages (no policy) an inline script added to the page runs: the control of
    // the policy check below.
    assert!(
        page.inline_script_runs().await,
        "the control page runs inline scripts"
    );

    let p = api_get(app, m, &format!("/payments/{id}")).await;
    assert_eq!(p["status"], "succeeded", "{p}");
    assert_eq!(p["amount_captured"], 500, "{p}");
    assert_eq!(p["payment_method"]["last4"], "4242", "{p}");
}

async fn retries_after_a_decline(app: &TestApp, m: &Merchant, page: &Page<'_>) {
    let (id, url) = checkout(app, m).await;
    open(page, &url).await;
    page.pay_with("4000000000000002").await;
    page.wait_status("declined").await;
    // A plain-language message, the number and CVC cleared, the focus on the number.
    let message = page.text("#message").await;
    assert_eq!(message, "Your card was declined. Try another card.");
    assert_eq!(page.value("#number").await, "");
    assert_eq!(page.value("#cvc").await, "");
    assert_eq!(page.focused().await, "number");
    assert!(
        page.element("#submit")
            .await
            .is_enabled()
            .await
            .expect("is Pay enabled"),
        "Pay stays usable after a decline"
    );

    page.type_into("#number", "4242424242424242").await;
    page.type_into("#cvc", "123").await;
    page.element("#submit")
        .await
        .click()
        .await
        .expect("click Pay again");
    page.wait_status("succeeded").await;

    let p = api_get(app, m, &format!("/payments/{id}")).await;
    assert_eq!(p["status"], "succeeded", "{p}");
    let attempts = api_get(app, m, &format!("/payments/{id}/attempts")).await;
    let attempts = attempts["data"].as_array().expect("attempts");
    assert_eq!(attempts.len(), 2, "{attempts:?}");
    assert_eq!(
        attempts[0]["error"]["code"], "card_declined",
        "{attempts:?}"
    );
    assert_eq!(attempts[1]["status"], "captured", "{attempts:?}");
}

async fn passes_a_challenge(app: &TestApp, m: &Merchant, page: &Page<'_>) {
    let (id, url) = checkout(app, m).await;
    open(page, &url).await;
    page.pay_with("4000000000003220").await;
    page.wait_path(&format!("/checkout/{id}/challenge")).await;
    page.element("#approve")
        .await
        .click()
        .await
        .expect("click approve");
    page.wait_path(&format!("/checkout/{id}")).await;
    page.wait_status("succeeded").await;

    let p = api_get(app, m, &format!("/payments/{id}")).await;
    assert_eq!(p["status"], "succeeded", "{p}");
}

/// A subscription made for the hosted checkout: the buyer pays its first cycle in the page,
/// saving the card under a mandate, and the subscription is active with it.
async fn confirms_a_subscription(app: &TestApp, m: &Merchant, page: &Page<'_>) {
    let c = app
        .call(m, Method::POST, "/customers", Some(json!({"name": "Bo"})))
        .await;
    let price = app
        .call(
            m,
            Method::POST,
            "/products",
            Some(
                json!({"name": "Plan", "prices": [{"unit_amount": 500, "currency": "USD",
                "recurring": {"interval": "month"}}]}),
            ),
        )
        .await
        .body["prices"][0]["price_id"]
        .clone();
    let created = app
        .call(
            m,
            Method::POST,
            "/subscriptions/create",
            Some(json!({"customer_id": c.body["customer_id"], "items": [{"price_id": price}]})),
        )
        .await;
    assert_eq!(created.status, 201, "{}", created.body);
    let id = created.body["subscription_id"]
        .as_str()
        .expect("id")
        .to_owned();
    let url = created.body["checkout_url"]
        .as_str()
        .expect("checkout_url")
        .to_owned();
    open(page, &url).await;
    page.pay_with("4242424242424242").await;
    page.wait_status("succeeded").await;
    // The next tick (a minute on) reads the payment.
    app.clock.advance(chrono::Duration::seconds(61));
    let deadline = Instant::now() + WAIT;
    loop {
        let s = api_get(app, m, &format!("/subscriptions/{id}")).await;
        if s["status"] == "active" {
            assert!(
                s["mandate_id"]
                    .as_str()
                    .is_some_and(|m| m.starts_with("man_")),
                "{s}"
            );
            break;
        }
        assert!(Instant::now() < deadline, "never active: {s}");
        actix_web::rt::time::sleep(POLL).await;
    }
}

/// The fields browsers and password managers fill, and the checks the page makes as the
/// buyer types: grouping, brand, Luhn, expiry, a missing CVC. A number the page can tell is
/// wrong never reaches the server: the payment has no attempt afterwards.
async fn checks_the_card_as_it_is_typed(app: &TestApp, m: &Merchant, page: &Page<'_>) {
    let (id, url) = checkout(app, m).await;
    open(page, &url).await;
    // The page's policy holds in the browser: an inline script added to it does not run.
    assert!(
        !page.inline_script_runs().await,
        "the checkout runs an inline script"
    );
    for (name, autocomplete) in [
        ("number", "cc-number"),
        ("exp", "cc-exp"),
        ("cvc", "cc-csc"),
    ] {
        let input = page.element(&format!("#{name}")).await;
        let attr = |a: &'static str| {
            let input = input.clone();
            async move {
                input
                    .attr(a)
                    .await
                    .expect("read attribute")
                    .unwrap_or_default()
            }
        };
        assert_eq!(attr("autocomplete").await, autocomplete);
        assert_eq!(attr("inputmode").await, "numeric");
        page.element(&format!("label[for='{name}']")).await;
    }

    page.type_into("#number", "4242424242424242").await;
    assert_eq!(page.value("#number").await, "4242 4242 4242 4242");
    assert_eq!(page.attr("#brand", "data-brand").await, "visa");
    assert_eq!(page.text("#brand").await, "Visa");
    page.type_into("#number", "378282246310005").await;
    assert_eq!(page.value("#number").await, "3782 822463 10005");
    assert_eq!(page.attr("#brand", "data-brand").await, "amex");
    assert_eq!(page.attr("#cvc", "maxlength").await, "4");
    page.type_into("#number", "5555555555554444").await;
    assert_eq!(page.attr("#brand", "data-brand").await, "mastercard");

    // A mistyped number: stopped beside its field, the focus on it.
    page.type_into("#number", "4242424242424241").await;
    page.type_into("#exp", "1235").await;
    assert_eq!(page.value("#exp").await, "12 / 35");
    page.type_into("#cvc", "123").await;
    page.click("#submit").await;
    assert_eq!(
        page.text("#number-problem").await,
        "This card number is not valid. Check it and try again."
    );
    assert_eq!(page.attr("#number", "aria-invalid").await, "true");
    assert_eq!(page.focused().await, "number");

    // An expiry in the past, then a missing CVC.
    page.type_into("#number", "4242424242424242").await;
    page.type_into("#exp", "0120").await;
    page.click("#submit").await;
    assert_eq!(page.text("#number-problem").await, "");
    assert_eq!(page.text("#exp-problem").await, "This card has expired.");
    page.type_into("#exp", "1235").await;
    page.type_into("#cvc", "").await;
    page.click("#submit").await;
    assert_eq!(page.text("#exp-problem").await, "");
    assert_eq!(page.text("#cvc-problem").await, "Enter the security code.");

    let attempts = api_get(app, m, &format!("/payments/{id}/attempts")).await;
    assert_eq!(attempts["data"], json!([]), "nothing reached the server");
    let p = api_get(app, m, &format!("/payments/{id}")).await;
    assert_eq!(p["status"], "requires_payment_method", "{p}");
}

/// A 48 × 48 PNG: the shop's logo.
const LOGO: &[u8] = include_bytes!("../../docs/images/logo-example.png");

/// axe-core's script (`PAYD_AXE_CORE`, the path of `axe.min.js` from npm's `axe-core`), or
/// `None` where it is not installed and not required.
fn axe_core() -> Option<String> {
    let required = truthy("CI") || truthy("PAYD_BROWSER_TESTS");
    match std::env::var("PAYD_AXE_CORE") {
        Ok(path) => Some(std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))),
        Err(_) => {
            assert!(
                !required,
                "set PAYD_AXE_CORE to axe-core's axe.min.js (npm install axe-core)"
            );
            let _ = writeln!(
                std::io::stderr(),
                "axe-core checks skipped: PAYD_AXE_CORE is not set"
            );
            None
        }
    }
}

/// The page at a width: no sideways scrolling, no serious or critical axe-core violation, and a
/// screenshot in `PAYD_SCREENSHOTS` (a folder) when set.
async fn looks_right_at(page: &Page<'_>, width: u32, height: u32, axe: Option<&str>, shot: &str) {
    page.c
        .set_window_size(width, height)
        .await
        .expect("resize the window");
    let sideways = page
        .c
        .execute(
            "return document.documentElement.scrollWidth - document.documentElement.clientWidth;",
            vec![],
        )
        .await
        .expect("measure the page");
    assert_eq!(
        sideways.as_i64(),
        Some(0),
        "{shot}: the page scrolls sideways"
    );
    if let Some(axe) = axe {
        page.c
            .execute(&format!("{axe}\nreturn true;"), vec![])
            .await
            .expect("load axe-core into the page");
        let found = page
            .c
            .execute_async(
                "var done = arguments[arguments.length - 1];
                 axe.run(document).then(function (r) {
                   done(r.violations
                     .filter(function (v) { return v.impact === 'serious' || v.impact === 'critical'; })
                     .map(function (v) { return v.id + ': ' + v.help; }));
                 }, function (e) { done(['axe failed: ' + e]); });",
                vec![],
            )
            .await
            .expect("run axe-core");
        assert_eq!(
            found,
            json!([]),
            "{shot}: serious or critical axe-core violations"
        );
    }
    if let Ok(dir) = std::env::var("PAYD_SCREENSHOTS") {
        let png = page.c.screenshot().await.expect("screenshot");
        std::fs::write(Path::new(&dir).join(format!("{shot}.png")), png).expect("save screenshot");
    }
}

/// A checkout with a description and product lines, on a phone and a desktop, before and after
/// the page has found a problem with the card.
async fn fits_a_phone_and_a_desktop(app: &TestApp, m: &Merchant, page: &Page<'_>) {
    let axe = axe_core();
    let logo = app.upload(m, "logo.png", LOGO).await;
    assert_eq!(logo.status, 201, "{}", logo.body);
    let branded = app
        .call(
            m,
            Method::PUT,
            &format!("/account/shops/{}", m.profile_id),
            Some(json!({"branding": {"display_name": "Acme Coffee Roasters",
                "logo_file_id": logo.body["file_id"], "accent_color": "#7a1f5c"}})),
        )
        .await;
    assert_eq!(branded.status, 200, "{}", branded.body);
    let res = app
        .create_payment(
            m,
            json!({"amount": 4599, "currency": "EUR", "hosted_checkout": true,
            "description": "Order 1042",
            "lines": [
                {"name": "Espresso beans, 1 kg", "quantity": 2, "unit_amount": 1800},
                {"name": "Shipping", "quantity": 1, "unit_amount": 999}
            ]}),
        )
        .await;
    assert_eq!(res.status, 201, "{}", res.body);
    let url = res.body["checkout_url"].as_str().expect("checkout_url");
    page.c.goto(url).await.expect("open the checkout page");
    page.wait_status("requires_payment_method").await;
    assert_eq!(page.text("#submit").await, "Pay €45.99");
    // Whom the buyer pays: the shop's name, its logo (loaded under the page's policy) and its
    // colour on the Pay button.
    assert_eq!(page.text("#shop-name").await, "Acme Coffee Roasters");
    assert_eq!(page.attr("#logo", "alt").await, "Acme Coffee Roasters");
    let look = page
        .c
        .execute(
            "return [document.getElementById('logo').naturalWidth,
                     getComputedStyle(document.getElementById('submit')).backgroundColor];",
            vec![],
        )
        .await
        .expect("read the page's look");
    assert_eq!(
        look,
        json!([48, "rgb(122, 31, 92)"]),
        "the logo shows, the accent applies"
    );
    let lines = page.text("#lines").await;
    assert!(lines.contains("Espresso beans, 1 kg × 2"), "{lines}");
    assert!(lines.contains("€36.00"), "{lines}");
    looks_right_at(page, 375, 740, axe.as_deref(), "checkout-phone").await;
    looks_right_at(page, 1280, 900, axe.as_deref(), "checkout-desktop").await;
    page.type_into("#number", "4242424242424241").await;
    page.click("#submit").await;
    assert!(!page.text("#number-problem").await.is_empty());
    looks_right_at(page, 375, 740, axe.as_deref(), "checkout-phone-errors").await;
    page.c
        .set_window_size(1280, 900)
        .await
        .expect("resize the window");
}

#[actix_web::test]
async fn hosted_checkout_in_a_browser() {
    if !browser_available() {
        return;
    }
    let app = spawn_app().await;
    let m = app.create_merchant("Browser shop").await;

    let profile = tempfile::tempdir().expect("browser profile dir");
    let driver = ChromeDriver::start();
    let client = open_browser(&driver, profile.path()).await;
    let page = Page { c: &client };
    let started = Instant::now();
    let outcome = AssertUnwindSafe(timeout(ALL_SCENARIOS, async {
        let t = Instant::now();
        pays_with_a_card(&app, &m, &page).await;
        eprintln!("success: {:?}", t.elapsed());
        let t = Instant::now();
        retries_after_a_decline(&app, &m, &page).await;
        eprintln!("decline then success: {:?}", t.elapsed());
        let t = Instant::now();
        passes_a_challenge(&app, &m, &page).await;
        eprintln!("3-D Secure challenge: {:?}", t.elapsed());
        let t = Instant::now();
        confirms_a_subscription(&app, &m, &page).await;
        eprintln!("a subscription confirmed: {:?}", t.elapsed());
        let t = Instant::now();
        checks_the_card_as_it_is_typed(&app, &m, &page).await;
        eprintln!("checks as typed: {:?}", t.elapsed());
        let t = Instant::now();
        fits_a_phone_and_a_desktop(&app, &m, &page).await;
        eprintln!("phone and desktop: {:?}", t.elapsed());
    }))
    .catch_unwind()
    .await;
    eprintln!("browser scenarios: {:?}", started.elapsed());

    // End the session (and so the browser) whatever happened, then ChromeDriver.
    let _ = timeout(Duration::from_secs(10), client.close()).await;
    drop(driver);
    match outcome {
        Err(panic) => std::panic::resume_unwind(panic),
        Ok(Err(_)) => panic!("the browser scenarios took longer than {ALL_SCENARIOS:?}"),
        Ok(Ok(())) => {}
    }
    app.stop().await;
}

/// A shop whose Stripe account takes cards from Stripe.js only (no raw card data): the hosted
/// checkout mounts Stripe.js's card field (localstripe's stand-in for Stripe.js, served
/// through the strict Stripe layer), the buyer pays after a declined card on the same page, and
/// no card number ever crosses payd: Stripe.js sends it to Stripe, and payd hands Stripe only
/// the token it made (docs.stripe.com/payments/accept-a-payment-charges, "tokenize the card").
#[actix_web::test]
async fn a_stripe_account_takes_the_card_through_stripe_js() {
    if !browser_available() {
        return;
    }
    let Some(ls) = common::strict_stripe::StrictStripe::start().await else {
        return;
    };
    ls.strict
        .raw_cards
        .store(false, std::sync::atomic::Ordering::SeqCst);
    let js = format!("{}/js.stripe.com/v3/", ls.base);
    let db = std::sync::Arc::new(common::TestDb::new().await);
    let app = common::spawn_with(db, &[("PAYD_PROCESSORS__STRIPE_JS_URL", js.as_str())]).await;
    let m = app.create_merchant("Stripe shop").await;
    common::stripe::connect_via(&app, &m, &ls, &ls.base, json!({"raw_card_data": false})).await;
    let (id, url) = checkout(&app, &m).await;

    // The page's policy lets Stripe.js's origin in, and nothing inline.
    let path = app.path_of(&url).expect("a URL of this app").to_owned();
    let res = app.send(Method::GET, &path, None, None, &[]).await;
    let csp = res.header("content-security-policy").expect("a policy");
    assert!(
        csp.contains(&format!("script-src 'self' {}", ls.base)) && !csp.contains("unsafe"),
        "{csp}"
    );

    let profile = tempfile::tempdir().expect("browser profile dir");
    let driver = ChromeDriver::start();
    let client = open_browser(&driver, profile.path()).await;
    let page = Page { c: &client };
    let outcome = AssertUnwindSafe(timeout(ALL_SCENARIOS, async {
        open(&page, &url).await;
        assert!(!page.inline_script_runs().await);
        let pay = |number: &'static str| {
            let page = &page;
            async move {
                let field = |name: &str| format!("#stripe-card input[placeholder={name}]");
                page.type_into(&field("number"), number).await;
                page.type_into(&field("exp_month"), "12").await;
                page.type_into(&field("exp_year"), "35").await;
                page.type_into(&field("cvc"), "123").await;
                page.type_into(&field("postal_code"), "42424").await;
                page.click("#submit").await;
            }
        };
        pay("4000000000000002").await;
        page.wait_status("declined").await;
        assert!(!page.text("#message").await.is_empty());
        pay("4242424242424242").await;
        page.wait_status("succeeded").await;

        // 3-D Secure: from the page to Stripe's page and back (docs.stripe.com/payments/3d-secure).
        let (_, url) = checkout(&app, &m).await;
        open(&page, &url).await;
        pay("4000000000003220").await;
        // Stripe's 3-D Secure page (the strict layer's stand-in for it).
        page.click("#complete").await;
        page.wait_status("succeeded").await;

        // The page with Stripe.js's field: as accessible as payd's own (the field itself is
        // Stripe's, in Stripe's frame on the real Stripe.js: not checked here), and shown in
        // docs/processors/stripe.md.
        let axe = axe_core();
        let (_, url) = checkout(&app, &m).await;
        open(&page, &url).await;
        page.element("#stripe-card input").await;
        looks_right_at(&page, 375, 740, axe.as_deref(), "checkout-stripe-phone").await;
        looks_right_at(&page, 1280, 900, axe.as_deref(), "checkout-stripe-desktop").await;

        // An off-session charge Stripe wants authenticated: the buyer follows the merchant's
        // link, goes on to their bank from payd's page, passes 3-D Secure there, and is back on
        // a paid page.
        let link = awaiting_the_buyer(&app, &m, &page).await;
        page.c
            .goto(&link)
            .await
            .expect("follow the merchant's link");
        page.element("#approve").await;
        looks_right_at(&page, 375, 740, axe.as_deref(), "to-the-bank-phone").await;
        page.click("#approve").await;
        page.click("#complete").await;
        page.wait_status("succeeded").await;
    }))
    .catch_unwind()
    .await;
    let _ = timeout(Duration::from_secs(10), client.close()).await;
    drop(driver);
    match outcome {
        Err(panic) => std::panic::resume_unwind(panic),
        Ok(Err(_)) => panic!("the Stripe.js checkout took longer than {ALL_SCENARIOS:?}"),
        Ok(Ok(())) => {}
    }

    let p = api_get(&app, &m, &format!("/payments/{id}")).await;
    assert_eq!(
        (p["status"].as_str(), p["payment_method"]["last4"].as_str()),
        (Some("succeeded"), Some("4242")),
        "{p}"
    );
    let attempts = api_get(&app, &m, &format!("/payments/{id}/attempts")).await;
    assert_eq!(attempts["data"].as_array().unwrap().len(), 2, "{attempts}");
    assert_eq!(ls.tokens_made(), 3, "Stripe.js made a token per card");
    // payd sent Stripe tokens, never a card number.
    let seen = ls.seen();
    assert!(
        seen.iter().all(|s| s
            .params
            .iter()
            .all(|(k, _)| k != "card[number]" && k != "card[cvc]")),
        "{seen:?}"
    );
    assert!(seen
        .iter()
        .any(|s| s.params.iter().any(|(k, _)| k == "card[token]")));
    app.stop().await;
}

/// An off-session charge Stripe declined `authentication_required`, its payment waiting for
/// the buyer: the link the merchant sends them. Its card was saved by a payment whose 3-D
/// Secure the buyer passed in the browser.
async fn awaiting_the_buyer(app: &TestApp, m: &Merchant, page: &Page<'_>) -> String {
    let c = app
        .call(m, Method::POST, "/customers", Some(json!({"name": "Ana"})))
        .await;
    let cid = c.body["customer_id"].as_str().unwrap();
    let method = json!({"stripe": {"payment_method": "pm_card_authenticationRequired"}});
    let saving = app
        .create_payment(
            m,
            json!({"amount": 500, "currency": "USD", "confirm": true, "customer_id": cid,
                "setup_future_usage": "off_session", "payment_method_data": method}),
        )
        .await;
    let link = saving.body["next_action"]["redirect_to_url"]["url"]
        .as_str()
        .unwrap_or_else(|| panic!("3-D Secure first: {}", saving.body));
    page.c.goto(link).await.expect("follow the 3-D Secure link");
    page.click("#complete").await;
    page.wait_status("succeeded").await;
    let id = saving.body["payment_id"].as_str().unwrap();
    let saved = api_get(app, m, &format!("/payments/{id}")).await;
    let charge = app
        .create_payment(
            m,
            json!({"amount": 700, "currency": "USD", "confirm": true, "customer_id": cid,
                "mandate_id": saved["mandate_id"], "off_session": true}),
        )
        .await;
    assert_eq!(
        charge.body["status"], "requires_customer_action",
        "{}",
        charge.body
    );
    charge.body["next_action"]["redirect_to_url"]["url"]
        .as_str()
        .unwrap()
        .to_owned()
}

/// What the browser scenarios take on trust, checked over plain HTTP: the page's policy allows
/// no inline script or style, its script and stylesheet are payd's own with matching
/// `integrity` hashes, and it speaks the buyer's language.
#[actix_web::test]
async fn the_checkout_page_is_strict_and_speaks_the_buyers_language() {
    use base64::Engine;
    use sha2::{Digest, Sha384};

    let app = spawn_app().await;
    let m = app.create_merchant("Strict shop").await;
    let res = app
        .create_payment(
            &m,
            json!({"amount": 123456, "currency": "EUR", "hosted_checkout": true,
                   "lines": [{"name": "Chair", "quantity": 2, "unit_amount": 61728}]}),
        )
        .await;
    assert_eq!(res.status, 201, "{}", res.body);
    let path = app
        .path_of(res.body["checkout_url"].as_str().expect("checkout_url"))
        .expect("a URL of this app")
        .to_owned();
    let page = |lang: &'static str| {
        let path = path.clone();
        let app = &app;
        async move {
            let res = app
                .send(Method::GET, &path, None, None, &[("accept-language", lang)])
                .await;
            assert_eq!(res.status, 200);
            res
        }
    };

    let en = page("en-GB,en;q=0.9").await;
    let csp = en.header("content-security-policy").expect("a policy");
    assert!(!csp.contains("unsafe"), "{csp}");
    for directive in [
        "default-src 'none'",
        "script-src 'self'",
        "style-src 'self'",
        "frame-ancestors 'none'",
    ] {
        assert!(csp.contains(directive), "{directive} in {csp}");
    }
    let html = String::from_utf8(en.raw.to_vec()).expect("UTF-8");
    assert!(!html.contains("<style"), "{html}");
    assert!(!html.contains(" style="), "{html}");
    assert!(html.contains("<html lang=\"en\">"), "{html}");
    assert!(html.contains("Pay €1,234.56"), "{html}");
    assert!(html.contains("Chair × 2"), "{html}");
    // Every script and stylesheet the page names is served with the hash the page names.
    let tags: Vec<(String, String)> = html
        .split(['<', '>'])
        .filter(|tag| tag.starts_with("script src=") || tag.starts_with("link rel=\"stylesheet\""))
        .map(|tag| {
            let attr = |name: &str| {
                let start = tag.find(&format!("{name}=\"")).expect(name) + name.len() + 2;
                tag[start..][..tag[start..].find('"').expect("closing quote")].to_owned()
            };
            let url = if tag.starts_with("script") {
                attr("src")
            } else {
                attr("href")
            };
            (url.replace("&#38;", "&"), attr("integrity"))
        })
        .collect();
    assert_eq!(tags.len(), 2, "{tags:?}");
    for (url, integrity) in tags {
        let asset = app.send(Method::GET, &url, None, None, &[]).await;
        assert_eq!(asset.status, 200, "{url}");
        let hash = base64::engine::general_purpose::STANDARD.encode(Sha384::digest(&asset.raw));
        assert_eq!(integrity, format!("sha384-{hash}"), "{url}");
        assert_eq!(
            asset.header("cache-control"),
            Some("public, max-age=31536000, immutable"),
            "{url}"
        );
    }
    let missing = app
        .send(Method::GET, "/assets/evil.js", None, None, &[])
        .await;
    assert_eq!((missing.status, missing.param()), (404, Some("name")));

    let de = String::from_utf8(page("de-AT,de;q=0.9,en;q=0.5").await.raw.to_vec()).unwrap();
    assert!(de.contains("<html lang=\"de\">"), "{de}");
    assert!(de.contains("1.234,56\u{a0}€ zahlen"), "{de}");
    assert!(de.contains("Kartennummer"), "{de}");
    let fr = String::from_utf8(page("fr").await.raw.to_vec()).unwrap();
    assert!(fr.contains("Payer 1\u{202f}234,56\u{a0}€"), "{fr}");
    assert!(fr.contains("Numéro de carte"), "{fr}");

    // A payment's own `locale` wins over the buyer's `Accept-Language`.
    let french = app
        .create_payment(
            &m,
            json!({"amount": 4599, "currency": "EUR", "hosted_checkout": true, "locale": "fr-BE"}),
        )
        .await;
    assert_eq!(french.status, 201, "{}", french.body);
    assert_eq!(french.body["locale"], "fr");
    let path = app
        .path_of(french.body["checkout_url"].as_str().expect("checkout_url"))
        .expect("a URL of this app")
        .to_owned();
    let page = app
        .send(Method::GET, &path, None, None, &[("accept-language", "de")])
        .await;
    let html = String::from_utf8(page.raw.to_vec()).expect("UTF-8");
    assert!(html.contains("<html lang=\"fr\">"), "{html}");
    assert!(html.contains("Payer 45,99\u{a0}€"), "{html}");
    let spanish = app
        .create_payment(
            &m,
            json!({"amount": 100, "currency": "EUR", "locale": "es"}),
        )
        .await;
    assert_eq!(
        (spanish.status, spanish.param()),
        (400, Some("locale")),
        "{}",
        spanish.body
    );
    app.stop().await;
}

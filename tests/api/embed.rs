//! The embedded card form in a real browser: a merchant's page, served from another loopback
//! origin than payd's, loads `/js/payd.js`, mounts a payment's checkout page in an iframe, and
//! the buyer pays inside it; the merchant's page learns the outcome by `postMessage` (and
//! ignores a message that is not from payd's frame), and the frame resizes to its content. A
//! page on an origin the shop did not register cannot frame the checkout page at all
//! (`frame-ancestors`), and an `embed_origin` it names is refused.

use crate::common;

use std::{
    panic::AssertUnwindSafe,
    time::{Duration, Instant},
};

use actix_web::{
    dev::ServerHandle,
    http::Method,
    rt::time::{sleep, timeout},
    web, App, HttpResponse, HttpServer,
};
use common::{
    browser::{browser_available, open_browser, ChromeDriver, Page, POLL, WAIT},
    spawn_app, Merchant, TestApp,
};
use fantoccini::Locator;
use futures_util::FutureExt;
use serde_json::{json, Value};

/// A merchant's site on its own loopback port (so its own origin): `/shop?checkout=<url>`
/// mounts the card form with payd.js (from the payd that made the URL); `/frame?src=<url>`
/// frames a URL with a bare iframe.
struct Site {
    origin: String,
    handle: ServerHandle,
}

impl Site {
    async fn start() -> Self {
        let server = HttpServer::new(|| {
            App::new()
                .route(
                    "/shop",
                    web::get().to(|| async {
                        HttpResponse::Ok().content_type("text/html").body(SHOP_PAGE)
                    }),
                )
                .route(
                    "/frame",
                    web::get().to(|| async {
                        HttpResponse::Ok()
                            .content_type("text/html")
                            .body(FRAME_PAGE)
                    }),
                )
        })
        .workers(1)
        .bind(("127.0.0.1", 0))
        .expect("bind the merchant's site");
        let port = server.addrs()[0].port();
        let server = server.run();
        let handle = server.handle();
        actix_web::rt::spawn(server);
        Self {
            origin: format!("http://127.0.0.1:{port}"),
            handle,
        }
    }
}

/// The merchant's page: its script records what payd.js tells it.
const SHOP_PAGE: &str = r##"<!doctype html>
<html><head><meta charset="utf-8"><title>A shop</title></head>
<body>
<h1>Your order</h1>
<div id="pay"></div>
<p id="outcome"></p>
<script>
  // payd.js from the payd that made the checkout URL (with several instances, any of them).
  window.statuses = [];
  var checkout = new URLSearchParams(location.search).get("checkout");
  document.getElementById("pay").addEventListener("payd:status", function (e) {
    window.statuses.push(e.detail.status);
  });
  var script = document.createElement("script");
  script.src = new URL(checkout).origin + "/js/payd.js";
  script.onload = function () {
    window.mounted = Payd.mount("#pay", {
      checkoutUrl: checkout,
      onComplete: function (p) {
        document.getElementById("outcome").textContent = p.payment_id + " " + p.status;
      }
    });
  };
  document.body.appendChild(script);
</script>
</body></html>"##;

/// A page that frames `?src=` with a bare iframe.
const FRAME_PAGE: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>Framing</title></head>
<body><script>
  var f = document.createElement("iframe");
  f.src = new URLSearchParams(location.search).get("src");
  document.body.appendChild(f);
</script></body></html>"#;

fn encoded(url: &str) -> String {
    form_urlencoded::byte_serialize(url.as_bytes()).collect()
}

async fn checkout(app: &TestApp, m: &Merchant) -> (String, String) {
    let res = app
        .create_payment(
            m,
            json!({"amount": 500, "currency": "USD", "hosted_checkout": true,
                   "return_url": "https://shop.example/back"}),
        )
        .await;
    assert_eq!(res.status, 201, "{}", res.body);
    let id = res.body["payment_id"].as_str().expect("id").to_owned();
    let url = res.body["checkout_url"].as_str().expect("url").to_owned();
    (id, url)
}

/// Waits until a script's answer on the current page is `want`.
async fn wait_js(page: &Page<'_>, script: &str, want: Value) {
    let deadline = Instant::now() + WAIT;
    loop {
        let seen = page.c.execute(script, vec![]).await.ok();
        if seen.as_ref() == Some(&want) {
            return;
        }
        if Instant::now() >= deadline {
            panic!("{script} never gave {want} within {WAIT:?}: {seen:?}");
        }
        sleep(POLL).await;
    }
}

/// The iframe's height as its style sets it, in pixels.
async fn frame_height(page: &Page<'_>) -> String {
    page.c
        .execute("return window.mounted.frame.style.height;", vec![])
        .await
        .expect("read the frame's height")
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

/// Enters the card form's frame on the shop's page, ready for a card.
async fn enter_form(page: &Page<'_>) {
    let frame = page.element("#pay iframe").await;
    frame
        .enter_frame()
        .await
        .expect("enter the card form's frame");
    page.wait_status("requires_payment_method").await;
}

/// Back on the shop's page, which payd.js told `"{id} {status}"` (its onComplete).
async fn shop_told(page: &Page<'_>, id: &str, status: &str) {
    page.c
        .enter_parent_frame()
        .await
        .expect("back to the shop's page");
    wait_js(
        page,
        "return document.getElementById('outcome').textContent;",
        json!(format!("{id} {status}")),
    )
    .await;
}

/// From the registered origin: mounted, resized, a forged message ignored, paid in the frame,
/// and the outcome told to the merchant's page.
async fn pays_in_the_frame(app: &TestApp, m: &Merchant, page: &Page<'_>, site: &Site) {
    let (id, url) = checkout(app, m).await;
    let shop = format!("{}/shop?checkout={}", site.origin, encoded(&url));
    page.c.goto(&shop).await.expect("open the shop's page");
    // The frame's page told the parent its status and its height (the default is 520px).
    wait_js(
        page,
        "return window.statuses[0] || null;",
        json!("requires_payment_method"),
    )
    .await;
    let deadline = Instant::now() + WAIT;
    while frame_height(page).await == "520px" {
        assert!(
            Instant::now() < deadline,
            "the frame never resized to its content"
        );
        sleep(POLL).await;
    }
    // A message from anywhere but payd's frame (here the shop's own window) is ignored. A
    // listener added after payd.js's runs after it, on the same message: once it has seen
    // the forged message, payd.js has handled it, so no fixed wait is needed.
    page.c
        .execute(
            "window.addEventListener('message', function (e) { \
               if (e.data && e.data.payment_id === 'pay_forged') window.forgedSeen = true; }); \
             window.postMessage({payd: '1', type: 'status', payment_id: 'pay_forged', \
             status: 'succeeded'}, '*'); return true;",
            vec![],
        )
        .await
        .expect("post a forged message");
    wait_js(page, "return window.forgedSeen === true;", json!(true)).await;
    assert_eq!(
        page.text("#outcome").await,
        "",
        "a forged message completed the payment"
    );

    enter_form(page).await;
    page.pay_with("4242424242424242").await;
    page.wait_status("succeeded").await;
    // Framed, the page does not take the buyer to the shop's return_url itself (the link
    // would leave after 2.5 s; the merchant's page decides).
    assert!(
        page.attr("#return", "hidden").await == "true",
        "the frame offers the return link"
    );
    shop_told(page, &id, "succeeded").await;
    let p = app
        .call(m, Method::GET, &format!("/payments/{id}"), None)
        .await;
    assert_eq!(p.body["status"], "succeeded", "{}", p.body);
    assert_eq!(p.body["payment_method"]["last4"], "4242", "{}", p.body);
}

/// The sandbox's 3-D Secure challenge stays in the frame, and the outcome still reaches the
/// merchant's page.
async fn passes_a_challenge_in_the_frame(
    app: &TestApp,
    m: &Merchant,
    page: &Page<'_>,
    site: &Site,
) {
    let (id, url) = checkout(app, m).await;
    let shop = format!("{}/shop?checkout={}", site.origin, encoded(&url));
    page.c.goto(&shop).await.expect("open the shop's page");
    enter_form(page).await;
    page.pay_with("4000000000003220").await;
    // WebDriver's URL is the top page's: the frame's own location says where it is.
    let challenge = format!("/checkout/{id}/challenge");
    wait_js(page, "return location.pathname;", json!(challenge)).await;
    page.click("#approve").await;
    page.wait_status("succeeded").await;
    shop_told(page, &id, "succeeded").await;
}

/// From an origin the shop did not register: the checkout page does not load in a bare frame
/// (the browser enforces `frame-ancestors`), and payd.js's `embed_origin` is refused.
async fn is_refused_elsewhere(app: &TestApp, m: &Merchant, page: &Page<'_>, other: &Site) {
    let (_, url) = checkout(app, m).await;
    page.c
        .goto(&format!("{}/frame?src={}", other.origin, encoded(&url)))
        .await
        .expect("open the other site's page");
    let frame = page.element("iframe").await;
    frame.enter_frame().await.expect("enter the frame");
    // The browser shows its own error page in the frame instead of payd's.
    let deadline = Instant::now() + WAIT;
    let at = loop {
        let at = page
            .c
            .execute("return location.href;", vec![])
            .await
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        if at != "about:blank" && !at.is_empty() {
            break at;
        }
        assert!(Instant::now() < deadline, "the frame never loaded anything");
        sleep(POLL).await;
    };
    assert!(
        !at.contains("/checkout/"),
        "framed from another origin: {at}"
    );
    assert!(
        page.c.find(Locator::Css("#amount")).await.is_err(),
        "the checkout page rendered in a frame of an unregistered origin"
    );
    page.c.enter_parent_frame().await.expect("back");

    let path = app.path_of(&url).expect("payd's URL");
    let named = format!("{path}&embed_origin={}", encoded(&other.origin));
    let res = app.send(Method::GET, &named, None, None, &[]).await;
    assert_eq!(
        (res.status, res.param()),
        (400, Some("embed_origin")),
        "{}",
        res.body
    );
}

/// What the browser is told, checked over HTTP (with or without a browser): the script, and
/// which origins may frame which shop's checkout page. The shop's origins as registered.
async fn framing_rules(app: &TestApp, m: &Merchant, site: &Site) {
    let script = app.send(Method::GET, "/js/payd.js", None, None, &[]).await;
    assert_eq!(script.status, 200);
    assert!(script
        .header("content-type")
        .unwrap_or_default()
        .starts_with("text/javascript"));
    assert_eq!(script.header("cache-control"), Some("no-cache"));
    assert!(String::from_utf8_lossy(&script.raw).contains("window.Payd"));

    let shop_path = format!("/account/shops/{}", m.profile_id);
    let put = |body: Value| {
        let path = shop_path.clone();
        async move {
            app.send(Method::PUT, &path, Some(&m.secret_key), Some(&body), &[])
                .await
        }
    };
    for (bad, param) in [
        (json!(["https://shop.example/pay"]), "embed_origins[0]"),
        (
            json!(["https://ok.example", "http://shop.example"]),
            "embed_origins[1]",
        ),
        (json!(["https://*.shop.example"]), "embed_origins[0]"),
        (json!(vec!["https://a.example"; 11]), "embed_origins"),
    ] {
        let r = put(json!({ "embed_origins": bad })).await;
        assert_eq!(
            (r.status, r.param()),
            (400, Some(param)),
            "{bad}: {}",
            r.body
        );
    }
    let r = put(json!({"embed_origins": [format!("{}/", site.origin)]})).await;
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.body["embed_origins"], json!([site.origin]), "{}", r.body);
    let shop = app.call(m, Method::GET, &shop_path, None).await;
    assert_eq!(
        shop.body["embed_origins"],
        json!([site.origin]),
        "{}",
        shop.body
    );

    // The shop's origin may frame its checkout page (and nothing else may).
    let (_, url) = checkout(app, m).await;
    let path = app.path_of(&url).unwrap();
    let page = app.send(Method::GET, path, None, None, &[]).await;
    let policy = page.header("content-security-policy").unwrap_or_default();
    assert!(
        policy.ends_with(&format!("frame-ancestors {}", site.origin)),
        "{policy}"
    );
    assert_eq!(page.header("x-frame-options"), None);
    let named = format!("{path}&embed_origin={}", encoded(&site.origin));
    assert_eq!(
        app.send(Method::GET, &named, None, None, &[]).await.status,
        200
    );
    // A shop without origins: its pages stay unframeable.
    let other_shop = app.create_merchant("Shop without origins").await;
    let (_, url) = checkout(app, &other_shop).await;
    let closed = app
        .send(Method::GET, app.path_of(&url).unwrap(), None, None, &[])
        .await;
    let policy = closed.header("content-security-policy").unwrap_or_default();
    assert!(policy.ends_with("frame-ancestors 'none'"), "{policy}");
    assert_eq!(closed.header("x-frame-options"), Some("DENY"));
}

#[actix_web::test]
async fn the_embedded_card_form_pays_from_a_registered_origin_and_nowhere_else() {
    let app = spawn_app().await;
    let m = app.create_merchant("Embedding shop").await;
    let site = Site::start().await;
    let other = Site::start().await;
    framing_rules(&app, &m, &site).await;
    if !browser_available() {
        return;
    }

    let profile = tempfile::tempdir().expect("browser profile dir");
    let driver = ChromeDriver::start();
    let client = open_browser(&driver, profile.path()).await;
    let page = Page { c: &client };
    let outcome = AssertUnwindSafe(timeout(Duration::from_secs(120), async {
        pays_in_the_frame(&app, &m, &page, &site).await;
        passes_a_challenge_in_the_frame(&app, &m, &page, &site).await;
        is_refused_elsewhere(&app, &m, &page, &other).await;
    }))
    .catch_unwind()
    .await;
    let _ = timeout(Duration::from_secs(10), client.close()).await;
    drop(driver);
    site.handle.stop(false).await;
    other.handle.stop(false).await;
    match outcome {
        Err(panic) => std::panic::resume_unwind(panic),
        Ok(Err(_)) => panic!("the embedded checkout took longer than 120 s"),
        Ok(Ok(())) => {}
    }
    app.stop().await;
}

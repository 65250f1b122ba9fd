//! Health, metrics, version, the OpenAPI document and the docs page.

mod common;

use actix_web::http::Method;
use common::spawn_app;

#[actix_web::test]
async fn health_metrics_and_version() {
    let app = spawn_app().await;
    let live = app.send(Method::GET, "/health/live", None, None, &[]).await;
    assert_eq!(
        (live.status, live.body["status"].as_str()),
        (200, Some("ok"))
    );
    let ready = app
        .send(Method::GET, "/health/ready", None, None, &[])
        .await;
    assert_eq!(ready.status, 200);
    let version = app.send(Method::GET, "/version", None, None, &[]).await;
    assert_eq!(version.body["version"], env!("CARGO_PKG_VERSION"));

    let _ = app.send(Method::GET, "/account", None, None, &[]).await;
    let metrics = app.send(Method::GET, "/metrics", None, None, &[]).await;
    assert_eq!(metrics.status, 200);
    let text = String::from_utf8_lossy(&metrics.raw);
    assert!(
        text.contains("payd_http_requests_total{method=\"GET\",route=\"/account\",status=\"401\"}"),
        "{text}"
    );
    assert!(
        text.contains("payd_http_request_duration_seconds_bucket"),
        "{text}"
    );
    assert!(text.contains("payd_scheduler_lag_seconds"), "{text}");
}

#[actix_web::test]
async fn docs_page_is_served_from_the_binary() {
    let app = spawn_app().await;
    let redirect = app.send(Method::GET, "/docs", None, None, &[]).await;
    assert_eq!(redirect.status, 308);
    let page = app.send(Method::GET, "/docs/", None, None, &[]).await;
    assert_eq!(page.status, 200);
    let html = String::from_utf8_lossy(&page.raw);
    assert!(html.contains("swagger-ui"), "{html}");
    assert!(
        !html.contains("src=\"http"),
        "no asset is fetched from the network"
    );
    let script = app
        .send(Method::GET, "/docs/swagger-ui-bundle.js", None, None, &[])
        .await;
    assert_eq!(script.status, 200);
    assert!(script.raw.len() > 100_000);
}

#[actix_web::test]
async fn openapi_document_matches_its_reviewed_snapshot() {
    let app = spawn_app().await;
    let doc = app
        .send(Method::GET, "/openapi.json", None, None, &[])
        .await;
    assert_eq!(doc.status, 200);
    let paths = doc.body["paths"].as_object().unwrap();
    for path in [
        "/admin/merchants",
        "/account",
        "/account/shops",
        "/account/api-keys",
        "/account/api-keys/{key_id}",
        "/health/ready",
        "/metrics",
    ] {
        assert!(paths.contains_key(path), "{path} documented");
    }
    insta::assert_json_snapshot!("openapi", doc.body, {".info.version" => "[version]"});
}

//! Health, metrics, version, the OpenAPI document and the docs page.

use crate::common;

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

/// Every label comes from a fixed set or a route template: a thousand requests with made-up
/// methods (no key needed) add the `other` series once, not a series each.
#[actix_web::test]
async fn made_up_methods_do_not_grow_the_metrics() {
    let app = spawn_app().await;
    let series = |raw: &[u8]| -> std::collections::BTreeSet<String> {
        String::from_utf8_lossy(raw)
            .lines()
            .filter(|l| l.starts_with("payd_http_"))
            .filter_map(|l| l.rsplit_once(' ').map(|(name, _)| name.to_owned()))
            .collect()
    };
    let send_made_up = |i: usize| {
        let method = Method::from_bytes(format!("ZQ{i:04}X").as_bytes()).expect("a method");
        app.send(method, "/payments", None, None, &[])
    };
    // Once first, so that the `other` series (and those of a scrape) exist before the
    // baseline is read.
    let _ = send_made_up(0).await;
    let _ = app.send(Method::GET, "/metrics", None, None, &[]).await;
    let before = series(&app.send(Method::GET, "/metrics", None, None, &[]).await.raw);
    for i in 1..=1000 {
        let answer = send_made_up(i).await;
        assert!(answer.status >= 400, "a made-up method is refused");
    }
    let after = series(&app.send(Method::GET, "/metrics", None, None, &[]).await.raw);
    // Other tests of this binary share the process's metrics, so only the made-up requests'
    // own series are compared: those labelled `other`.
    let other = |set: &std::collections::BTreeSet<String>| -> Vec<String> {
        set.iter()
            .filter(|s| s.contains("method=\"other\""))
            .cloned()
            .collect()
    };
    assert_eq!(
        other(&after),
        other(&before),
        "made-up methods added series"
    );
    assert!(
        !other(&before).is_empty(),
        "the made-up requests are counted as `other`"
    );
    let allowed = [
        "GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS", "other",
    ];
    for series in &after {
        if let Some(rest) = series.split("method=\"").nth(1) {
            let method = rest.split('"').next().unwrap_or_default();
            assert!(
                allowed.contains(&method),
                "a client's method became a label: {series}"
            );
        }
    }
    app.stop().await;
}

/// OpenAPI schemas are named after their Rust type, and utoipa keeps only the last of two
/// types with one name: the other's routes would then document the wrong body (an endpoint's
/// `Health` once replaced the health check's). Every `ToSchema` type's name (or its
/// `#[schema(as = …)]`) is unique across `src/`.
#[test]
fn every_schema_name_is_unique() {
    fn files(dir: &std::path::Path, out: &mut Vec<std::path::PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                files(&path, out);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    let mut all = Vec::new();
    files(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src"),
        &mut all,
    );
    let mut seen: std::collections::BTreeMap<String, String> = Default::default();
    let mut clashes = Vec::new();
    for path in all {
        let text = std::fs::read_to_string(&path).unwrap();
        let lines: Vec<&str> = text.lines().collect();
        for (i, line) in lines.iter().enumerate() {
            if !(line.trim_start().starts_with("#[derive(") && line.contains("ToSchema")) {
                continue;
            }
            // The attributes and the item after the derive: a rename, then the type's name.
            let mut renamed = None;
            for next in lines.iter().skip(i + 1).take(12) {
                let t = next.trim_start();
                if let Some(rest) = t.strip_prefix("#[schema(as = ") {
                    renamed = rest.split(')').next().map(str::to_owned);
                }
                let item = t
                    .strip_prefix("pub struct ")
                    .or_else(|| t.strip_prefix("pub enum "))
                    .or_else(|| t.strip_prefix("struct "))
                    .or_else(|| t.strip_prefix("enum "));
                if let Some(item) = item {
                    let name = item
                        .split(|c: char| !c.is_alphanumeric() && c != '_')
                        .next()
                        .unwrap_or_default()
                        .to_owned();
                    let name = renamed.take().unwrap_or(name);
                    let at = format!("{}:{}", path.display(), i + 1);
                    if let Some(first) = seen.insert(name.clone(), at.clone()) {
                        clashes.push(format!("{name}: {first} and {at}"));
                    }
                    break;
                }
            }
        }
    }
    assert!(
        clashes.is_empty(),
        "schema names used twice (rename one, or #[schema(as = …)]):\n{}",
        clashes.join("\n")
    );
}

/// `http.operator_listen`: `/metrics` and `/admin/…` answer only on the operator's address,
/// the API only on `listen`, the health checks and `/version` on both (docs/operations.md).
#[actix_web::test]
async fn the_operator_routes_answer_only_on_the_operator_listener() {
    let db = common::TestDb::new().await;
    let settings = common::settings(&db, &[("PAYD_HTTP__OPERATOR_LISTEN", "127.0.0.1:0")]);
    let app = payd::Application::build(settings, payd::clock::ManualClock::new())
        .await
        .unwrap();
    let (public, operator) = (app.port(), app.operator_port().expect("an operator port"));
    assert_ne!(public, operator);
    let handle = app.handle();
    actix_web::rt::spawn(app.run_until_stopped());
    let ask = |port: u16, method: Method, path: &'static str| async move {
        let mut req =
            common::client().request(method.clone(), format!("http://127.0.0.1:{port}{path}"));
        req = req.insert_header(("api-key", common::ADMIN_KEY));
        let res = if method == Method::POST {
            req.send_json(&serde_json::json!({"name": "Operator"}))
                .await
        } else {
            req.send().await
        };
        res.unwrap().status().as_u16()
    };
    for (method, path, on_public, on_operator) in [
        (Method::GET, "/metrics", 404, 200),
        (Method::POST, "/admin/merchants", 404, 201),
        (Method::GET, "/admin/processors", 404, 200),
        (Method::GET, "/health/ready", 200, 200),
        (Method::GET, "/version", 200, 200),
        (Method::GET, "/openapi.json", 200, 404),
        (Method::GET, "/account", 401, 404),
    ] {
        assert_eq!(
            ask(public, method.clone(), path).await,
            on_public,
            "{method} {path} on listen"
        );
        assert_eq!(
            ask(operator, method.clone(), path).await,
            on_operator,
            "{method} {path} on operator_listen"
        );
    }
    handle.stop(true).await;
}

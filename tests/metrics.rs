//! A fresh server's `/metrics` names every actor and webhook series at 0, before anything
//! happened: dashboards and alerts read 0, not "no data". The only test of its binary, so no
//! other test's traffic can have made the series appear.

mod common;

use actix_web::http::Method;
use common::spawn_app;

#[actix_web::test]
async fn every_actor_and_webhook_series_exists_at_zero_from_start_up() {
    let app = spawn_app().await;
    let metrics = app.send(Method::GET, "/metrics", None, None, &[]).await;
    assert_eq!(metrics.status, 200);
    let text = String::from_utf8_lossy(&metrics.raw);
    let value = |series: &str| {
        text.lines()
            .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
            .map(|l| l[series.len()..].trim().to_owned())
    };
    for kind in ["payment", "dispute", "webhook"] {
        for name in [
            "payd_actors_live",
            "payd_actor_mailbox_depth",
            "payd_actor_messages_total",
            "payd_actor_restarts_total",
            "payd_actor_overloaded_total",
            "payd_actor_load_failures_total",
        ] {
            let series = format!("{name}{{kind=\"{kind}\"}}");
            assert_eq!(value(&series).as_deref(), Some("0"), "{series} in:\n{text}");
        }
        let count = format!("payd_actor_message_seconds_count{{kind=\"{kind}\"}}");
        assert_eq!(value(&count).as_deref(), Some("0"), "{count} in:\n{text}");
    }
    for series in [
        "payd_webhook_queue_depth",
        "payd_webhook_oldest_pending_seconds",
        "payd_webhook_deliveries_total{outcome=\"delivered\"}",
        "payd_webhook_deliveries_total{outcome=\"retrying\"}",
        "payd_webhook_deliveries_total{outcome=\"failed\"}",
        "payd_webhook_attempt_seconds_count",
    ] {
        assert_eq!(value(series).as_deref(), Some("0"), "{series} in:\n{text}");
    }
    app.stop().await;
}

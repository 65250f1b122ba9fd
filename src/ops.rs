//! Operator routes: liveness, readiness, Prometheus metrics and the release version.

use std::sync::OnceLock;

use actix_web::{web, HttpResponse};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use serde::Serialize;
use utoipa::ToSchema;

use crate::{commit::PoolSize, db, error::ApiError, state::AppState};

/// Histogram buckets, in seconds, for every `*_seconds` metric.
const BUCKETS: [f64; 14] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 15.0,
];

/// The process-wide Prometheus recorder (installed once, whatever the number of servers).
pub fn prometheus() -> PrometheusHandle {
    static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
    HANDLE
        .get_or_init(|| {
            let builder = || {
                PrometheusBuilder::new()
                    .set_buckets(&BUCKETS)
                    .unwrap_or_else(|_| PrometheusBuilder::new())
            };
            builder()
                .install_recorder()
                .unwrap_or_else(|_| builder().build_recorder().handle())
        })
        .clone()
}

crate::http::routes! {
    "/health/live" => { get: live },
    "/health/ready" => { get: ready },
    "/metrics" => { get: metrics },
    "/version" => { get: version },
}

#[derive(Serialize, ToSchema)]
pub struct Health {
    pub status: &'static str,
}

#[derive(Serialize, ToSchema)]
pub struct Version {
    pub name: &'static str,
    pub version: &'static str,
}

/// The process is up.
///
/// Answers 200 while the process serves HTTP, without asking the database: for a liveness
/// probe. No key.
///
/// Fails: none beyond the common errors.
///
/// Events: none.
#[utoipa::path(get, path = "/health/live", tag = "operations", responses((status = 200, body = Health)))]
pub async fn live() -> HttpResponse {
    HttpResponse::Ok().json(Health { status: "ok" })
}

/// The process can serve: its database answers.
///
/// Pings the database (within 900 ms) and answers 200 when it takes writes, else 503, so that
/// a load balancer or an orchestrator stops sending requests to this instance. No key.
///
/// Fails: `database_unavailable` (503).
///
/// Events: none.
#[utoipa::path(get, path = "/health/ready", tag = "operations",
    responses((status = 200, body = Health), (status = 503, description = "the database does not answer")))]
pub async fn ready(state: web::Data<AppState>) -> Result<HttpResponse, ApiError> {
    let within = std::time::Duration::from_millis(900);
    match db::ping(state.db.conn(), &state.settings.database.url, within).await {
        Ok(()) => Ok(HttpResponse::Ok().json(Health { status: "ok" })),
        Err(cause) => Err(ApiError::new(
            actix_web::http::StatusCode::SERVICE_UNAVAILABLE,
            crate::error::ErrorType::Unavailable,
            "database_unavailable",
            format!("the database does not take writes: {cause}"),
        )),
    }
}

/// Prometheus's standard `process_*` families (CPU seconds, resident memory, open and maximum
/// file descriptors, threads, start time), read from `/proc` at each scrape.
fn process_metrics() -> &'static metrics_process::Collector {
    static COLLECTOR: OnceLock<metrics_process::Collector> = OnceLock::new();
    COLLECTOR.get_or_init(|| {
        let collector = metrics_process::Collector::default();
        collector.describe();
        collector
    })
}

/// How long a scrape waits for a pool's connection: a pool that makes it wait longer reads as
/// this long (`payd_database_acquire_seconds`), and the scrape still answers.
const ACQUIRE_PROBE_LIMIT: std::time::Duration = std::time::Duration::from_secs(1);

/// Prometheus text exposition.
///
/// payd's metrics in Prometheus's text format, with the database pools' connections and
/// acquire times and the standard `process_*` families read at each scrape. No key.
///
/// Fails: none beyond the common errors.
///
/// Events: none.
#[utoipa::path(get, path = "/metrics", tag = "operations",
    responses((status = 200, description = "Prometheus text format", content_type = "text/plain")))]
pub async fn metrics(
    state: web::Data<AppState>,
    dispatcher: Option<web::Data<crate::webhooks::dispatcher::Dispatcher>>,
) -> HttpResponse {
    let handle = prometheus();
    metrics::counter!("payd_database_statements_total").absolute(crate::db::statements());
    let mut sizes = state.db.pool_sizes();
    let mut acquired = state.db.acquire_times(ACQUIRE_PROBE_LIMIT).await;
    // On PostgreSQL the webhook side has a pool of its own (`webhooks::mount`).
    let own_pool = state.db.conn().get_database_backend() == sea_orm::DbBackend::Postgres;
    if let Some(webhooks) = dispatcher.filter(|_| own_pool) {
        let db = webhooks.db();
        let pool = "webhooks";
        sizes.extend(db.pool_sizes().into_iter().map(|s| PoolSize { pool, ..s }));
        let times = db.acquire_times(ACQUIRE_PROBE_LIMIT).await;
        acquired.extend(times.into_iter().map(|(_, took)| (pool, took)));
    }
    for size in sizes {
        let in_use = (size.open as usize).saturating_sub(size.idle);
        let pool = size.pool;
        for (value, count) in [
            ("in_use", in_use),
            ("idle", size.idle),
            ("max", size.max as usize),
        ] {
            metrics::gauge!("payd_database_connections", "pool" => pool, "state" => value)
                .set(count as f64);
        }
    }
    for (pool, took) in acquired {
        metrics::gauge!("payd_database_acquire_seconds", "pool" => pool).set(took.as_secs_f64());
    }
    process_metrics().collect();
    handle.run_upkeep();
    HttpResponse::Ok()
        .content_type("text/plain; version=0.0.4")
        .body(handle.render())
}

/// The deployed release: endpoint and field availability follow it.
///
/// The service's name and its release version. No key.
///
/// Fails: none beyond the common errors.
///
/// Events: none.
#[utoipa::path(get, path = "/version", tag = "operations", responses((status = 200, body = Version)))]
pub async fn version() -> HttpResponse {
    HttpResponse::Ok().json(Version {
        name: "payd",
        version: env!("CARGO_PKG_VERSION"),
    })
}

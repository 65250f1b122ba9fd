//! The baselines payd is compared with, measured by the same load generator: raw single-row
//! INSERTs at the pool size that gives the most of them, an empty actix-web route, and raw awc
//! POSTs of an event-sized body to the in-bench receiver.

use std::{rc::Rc, time::Duration};

use actix_web::{web, App, HttpResponse, HttpServer};
use awc::http::Method;
use payd::clock::{Clock, SystemClock};
use sea_orm::{ConnectionTrait, DbBackend, Statement, TransactionTrait};
use serde_json::json;

use crate::{
    cpu::Meter,
    load::{drive, metered, outcome, payment_body, send, Stats},
    server::serve_local,
};

const RAW_TABLE: &str = "payd_bench_raw";

/// The pool sizes the raw-insert baseline tries on each database.
fn pool_sizes(url: &str) -> &'static [u32] {
    if url.starts_with("sqlite:") {
        &[1, 2, 4, 8]
    } else {
        &[1, 4, 10, 16, 32]
    }
}

/// The raw-insert baseline at its best: each pool size of [`pool_sizes`] for `limit`; the
/// fastest run, its pool size, and every size's rate.
pub(crate) struct RawInserts {
    pub(crate) best: Stats,
    pub(crate) pool: u32,
    pub(crate) tried: Vec<(u32, f64)>,
}

pub(crate) async fn raw_inserts_best(
    url: &str,
    concurrency: usize,
    limit: Duration,
) -> anyhow::Result<RawInserts> {
    let mut best: Option<(Stats, u32)> = None;
    let mut tried = Vec::new();
    for &pool in pool_sizes(url) {
        let stats = raw_inserts(url, pool, concurrency, limit).await?;
        eprintln!("payd-bench:   pool of {pool}: {:.0}/s", stats.rate());
        tried.push((pool, stats.rate()));
        if best.as_ref().is_none_or(|(b, _)| stats.rate() > b.rate()) {
            best = Some((stats, pool));
        }
    }
    let (best, pool) = best.expect("at least one pool size");
    Ok(RawInserts { best, pool, tried })
}

/// Single-row INSERTs into a throwaway table, one per transaction, with payd's connection
/// settings (WAL, `synchronous = NORMAL`, busy timeout) and a pool of `pool`.
async fn raw_inserts(
    url: &str,
    pool: u32,
    concurrency: usize,
    limit: Duration,
) -> anyhow::Result<Stats> {
    let conn = payd::db::connect(url, Some(pool)).await?;
    let backend = conn.get_database_backend();
    conn.execute_raw(Statement::from_string(
        backend,
        format!(
            "CREATE TABLE {RAW_TABLE} (id VARCHAR(64) PRIMARY KEY, merchant_id VARCHAR(64) NOT NULL, \
             amount BIGINT NOT NULL, status VARCHAR(32) NOT NULL, payload TEXT NOT NULL, \
             created_at VARCHAR(40) NOT NULL)"
        ),
    ))
    .await?;
    let sql = match backend {
        DbBackend::Postgres => format!(
            "INSERT INTO {RAW_TABLE} (id, merchant_id, amount, status, payload, created_at) VALUES ($1, $2, $3, $4, $5, $6)"
        ),
        _ => format!(
            "INSERT INTO {RAW_TABLE} (id, merchant_id, amount, status, payload, created_at) VALUES (?, ?, ?, ?, ?, ?)"
        ),
    };
    let payload = Rc::new("x".repeat(600));
    let (conn2, sql) = (conn.clone(), Rc::new(sql));
    // The inserting client is this process: its CPU is the baseline's own (the load
    // generator's column), beside the database's.
    let meter = Meter::new(None, url).await?;
    let phase = drive(concurrency, limit, None, move |_| {
        let (conn, sql, payload) = (conn2.clone(), sql.clone(), payload.clone());
        async move {
            let stmt = Statement::from_sql_and_values(
                backend,
                sql.as_str(),
                [
                    format!("raw_{}", uuid::Uuid::now_v7().simple()).into(),
                    "mer_bench".into(),
                    1000i64.into(),
                    "succeeded".into(),
                    payload.as_str().into(),
                    SystemClock.now().to_rfc3339().into(),
                ],
            );
            let r = async {
                let txn = conn.begin().await?;
                txn.execute_raw(stmt).await?;
                txn.commit().await
            }
            .await;
            outcome(r.map_err(|e| e.to_string()))
        }
    });
    let stats = metered(&meter, phase).await;
    conn.execute_raw(Statement::from_string(
        backend,
        format!("DROP TABLE {RAW_TABLE}"),
    ))
    .await?;
    conn.close().await?;
    Ok(stats)
}

/// An empty actix-web route (one worker per core), driven like payd (same body as
/// create+confirm).
pub(crate) async fn empty_route(
    client: &awc::Client,
    c: usize,
    secs: Duration,
) -> anyhow::Result<Stats> {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let local = serve_local!(HttpServer::new(|| {
        App::new().default_service(web::to(|| async { HttpResponse::Ok().finish() }))
    })
    .workers(cores));
    let (client2, url, body) = (client.clone(), local.url.clone(), payment_body(true, false));
    // Server and client are both this process: its CPU is the whole baseline's.
    let phase = drive(c, secs, None, move |_| {
        let (client, url, body) = (client2.clone(), url.clone(), body.clone());
        async move { outcome(send(&client, Method::POST, &url, &[], Some(body)).await) }
    });
    let stats = metered(&Meter::load_only(), phase).await;
    local.stop().await;
    Ok(stats)
}

/// Raw awc POSTs of an event-sized body to the receiver's `/raw`: `c` in flight for `secs`,
/// then 4 in flight (payd's per-endpoint cap) for half as long.
pub(crate) async fn raw_awc(
    client: &awc::Client,
    receiver: &str,
    c: usize,
    secs: Duration,
) -> anyhow::Result<(Stats, Stats)> {
    let body: web::Bytes = serde_json::to_vec(&json!({
        "merchant_id": "mer_0", "event_id": "evt_0", "event_type": "payment_succeeded",
        "timestamp": "2026-01-01T00:00:00.000000Z",
        "content": {"type": "payment_details", "object": {"pad": "x".repeat(1400)}}
    }))?
    .into();
    let url = format!("{receiver}/raw");
    let run = |n: usize, limit: Duration| {
        let (client2, url, body) = (client.clone(), url.clone(), body.clone());
        drive(n, limit.max(Duration::from_secs(1)), None, move |_| {
            let (client, url, body) = (client2.clone(), url.clone(), body.clone());
            async move {
                let headers = [
                    ("webhook-id", "evt_0"),
                    ("webhook-timestamp", "1767225600"),
                    (
                        "webhook-signature",
                        "v1,AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=",
                    ),
                ];
                outcome(send(&client, Method::POST, &url, &headers, Some(body)).await)
            }
        })
    };
    // The receiver runs in this process: its CPU is the whole baseline's.
    let meter = Meter::load_only();
    let full = metered(&meter, run(c, secs)).await;
    let four = metered(&meter, run(4, secs / 2)).await;
    Ok((full, four))
}

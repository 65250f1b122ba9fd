//! PostgreSQL behind a failover pair: a multi-host URL, as `pg_autoctl show uri` prints it
//! (`postgres://user@h1:5432,h2:5432/payd?target_session_attrs=read-write`), is served by the
//! first host that takes writes, and by the next one after a failover.
//!
//! The hosts are tried in order; with `target_session_attrs=read-write` (or `primary`) a host
//! that answers but is in recovery or read-only is passed over. The pool connects to the chosen
//! host only. Every half second a watcher asks the pool, on one of its own connections,
//! whether its host still takes writes; when it does not (or gives no connection, or the
//! instance is in a database outage, `telemetry`), the watcher looks for the writable host.
//! When that is another, the pool's new connections go there, and every connection opened
//! before the switch is closed when it is next taken (it may still reach the demoted primary,
//! which answers but refuses writes). Each pool watches for itself: an instance's other pools
//! (the webhook side's) recovering says nothing of this one. An instance follows a failover
//! without a restart or a new configuration.
//!
//! Invariant: with `read-write`, payd never serves writes from a host it found in recovery or
//! read-only; a host found writable later (the old primary come back) is used again only after
//! the chosen one fails.

use std::{
    sync::{
        atomic::{AtomicU64, Ordering},
        Arc, OnceLock,
    },
    time::{Duration, Instant},
};

use sea_orm::{
    sqlx::{
        pool::PoolConnectionMetadata,
        postgres::{PgConnectOptions, PgConnection, PgPoolOptions},
        ConnectOptions as _, Connection, PgPool,
    },
    DbErr, RuntimeErr,
};

/// How the hosts of a URL are chosen (libpq's `target_session_attrs`, the values payd serves).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Target {
    /// The first host that answers.
    Any,
    /// The first host that takes writes (`read-write`, `primary`).
    Writable,
}

/// A PostgreSQL URL's hosts, each as a single-host URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hosts {
    pub urls: Vec<String>,
    pub target: Target,
}

impl Hosts {
    /// Reads a `postgres://` URL with one host or several (`h1:p1,h2:p2`);
    /// `target_session_attrs` is taken out of the query (sqlx does not know it). An error
    /// names what is wrong, never the URL.
    pub fn parse(url: &str) -> Result<Hosts, String> {
        let (scheme, rest) = url
            .split_once("://")
            .ok_or_else(|| "expected postgres://".to_owned())?;
        let split = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(split);
        let (userinfo, hostlist) = match authority.rfind('@') {
            Some(at) => (&authority[..=at], &authority[at + 1..]),
            None => ("", authority),
        };
        let (path, query) = tail.split_once('?').unwrap_or((tail, ""));
        let mut target = Target::Any;
        let mut kept = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=') {
                Some(("target_session_attrs", value)) => {
                    target = match value {
                        "any" => Target::Any,
                        "read-write" | "primary" => Target::Writable,
                        other => {
                            return Err(format!(
                                "target_session_attrs={other} is not served: payd writes (read-write, primary or any)"
                            ))
                        }
                    }
                }
                _ => kept.push(pair),
            }
        }
        let query = if kept.is_empty() {
            String::new()
        } else {
            format!("?{}", kept.join("&"))
        };
        let hosts: Vec<&str> = hostlist.split(',').collect();
        if hosts.iter().any(|h| h.is_empty()) {
            return Err("an empty host in the host list".to_owned());
        }
        let urls = hosts
            .iter()
            .map(|host| format!("{scheme}://{userinfo}{host}{path}{query}"))
            .collect();
        Ok(Hosts { urls, target })
    }

    /// The first host to serve: in order, the first that answers within `timeout` (and, for
    /// [`Target::Writable`], takes writes). A single host with no target is not probed.
    pub async fn choose(&self, timeout: Duration) -> Result<String, DbErr> {
        if self.urls.len() == 1 && self.target == Target::Any {
            return Ok(self.urls[0].clone());
        }
        self.first(self.target, timeout)
            .await
            .map_err(|e| DbErr::Conn(RuntimeErr::Internal(e)))
    }

    /// The first host that answers for `target`, each asked within `timeout`; else each host's
    /// answer.
    async fn first(&self, target: Target, timeout: Duration) -> Result<String, String> {
        let mut seen = Vec::new();
        for (i, url) in self.urls.iter().enumerate() {
            match probe(url, timeout).await {
                Ok(writable) if writable || target == Target::Any => return Ok(url.clone()),
                Ok(_) => seen.push(format!("host {}: in recovery or read-only", i + 1)),
                Err(e) => seen.push(format!("host {}: {e}", i + 1)),
            }
        }
        Err(format!(
            "no writable PostgreSQL reachable ({})",
            seen.join("; ")
        ))
    }
}

/// Why no host of `url` takes writes, asking each directly within `timeout`; `None` when one
/// does (the trouble is then the caller's own connection, not the servers).
pub async fn diagnose(url: &str, timeout: Duration) -> Option<String> {
    match Hosts::parse(url) {
        Ok(hosts) => hosts.first(Target::Writable, timeout).await.err(),
        Err(e) => Some(e),
    }
}

/// A connection error as logs and readiness name it: credentials redacted, and what
/// `sslmode=prefer` makes of a TCP front (HAProxy) with no server behind it said plainly. The
/// front accepts and closes the connection; sqlx, which asks for TLS first, reports the missing
/// answer as "unexpected response from SSLRequest: 0x00".
pub fn cause(error: &str) -> String {
    const SSL_ANSWER: &str = "unexpected response from SSLRequest: 0x";
    let error = crate::telemetry::redact_credentials(error);
    let Some(byte) = error
        .find(SSL_ANSWER)
        .map(|at| &error[at + SSL_ANSWER.len()..])
    else {
        return error;
    };
    match byte.get(..2) {
        Some("00") => CLOSED_UNANSWERED.to_owned(),
        Some(byte) => format!("something other than PostgreSQL answered (first byte 0x{byte})"),
        None => error,
    }
}

/// The question whether a PostgreSQL server takes writes: not in recovery (a standby, a
/// primary being demoted) and its sessions not read-only. One column, `writable`.
pub const WRITABLE: &str =
    "SELECT NOT pg_is_in_recovery() AND current_setting('transaction_read_only') = 'off' AS writable";

/// Whether a host takes writes (it answered within `timeout`).
async fn probe(url: &str, timeout: Duration) -> Result<bool, String> {
    let check = async {
        let mut conn = PgConnection::connect(url).await.map_err(|e| {
            // Closed or reset before the server said anything: whether the front's close
            // came before or after the driver's first bytes decides which the driver sees.
            let closed = matches!(&e, sea_orm::sqlx::Error::Io(io) if matches!(io.kind(),
                std::io::ErrorKind::ConnectionReset
                    | std::io::ErrorKind::UnexpectedEof
                    | std::io::ErrorKind::BrokenPipe));
            if closed {
                CLOSED_UNANSWERED.to_owned()
            } else {
                cause(&e.to_string())
            }
        })?;
        let writable: bool = sea_orm::sqlx::query_scalar(WRITABLE)
            .fetch_one(&mut conn)
            .await
            .map_err(|e| cause(&e.to_string()))?;
        let _ = conn.close().await;
        Ok::<bool, String>(writable)
    };
    match tokio::time::timeout(timeout, check).await {
        Ok(answer) => answer,
        Err(_) => Err(format!("no answer within {timeout:?}")),
    }
}

/// What a connection closed before PostgreSQL said anything is named.
const CLOSED_UNANSWERED: &str =
    "the connection was closed before PostgreSQL answered (a TCP front with no server behind it?)";

/// The instant pools measure switches of host from (the first call).
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

/// A PostgreSQL pool on the URL's chosen host; with several hosts, one that follows a
/// failover to the next writable host (see the module).
pub async fn pool(
    url: &str,
    max_connections: u32,
    acquire_timeout: Duration,
) -> Result<PgPool, DbErr> {
    let hosts = Hosts::parse(url).map_err(|e| DbErr::Conn(RuntimeErr::Internal(e)))?;
    let chosen = hosts.choose(acquire_timeout).await?;
    // When the pool last switched host, in milliseconds since `epoch`: a connection opened
    // before it may reach the previous host, and is closed when it is next taken.
    let switched = Arc::new(AtomicU64::new(epoch().elapsed().as_millis() as u64));
    let opened_before_switch = switched.clone();
    let mut options_of_pool = PgPoolOptions::new()
        .max_connections(max_connections)
        .acquire_timeout(acquire_timeout);
    // Only a pool that can switch host checks its connections' age (one host: no hook at all).
    if hosts.urls.len() > 1 {
        options_of_pool = options_of_pool.before_acquire(move |_, meta: PoolConnectionMetadata| {
            let switched_at = Duration::from_millis(opened_before_switch.load(Ordering::Acquire));
            let opened_at = epoch().elapsed().saturating_sub(meta.age);
            Box::pin(async move { Ok(opened_at >= switched_at) })
        });
    }
    let pool = options_of_pool
        .connect_with(options(&chosen)?)
        .await
        .map_err(|e| {
            DbErr::Conn(RuntimeErr::Internal(crate::telemetry::redact_credentials(
                &e.to_string(),
            )))
        })?;
    if hosts.urls.len() > 1 {
        tokio::spawn(follow(
            pool.clone(),
            hosts,
            chosen,
            switched,
            acquire_timeout,
        ));
    }
    Ok(pool)
}

fn options(url: &str) -> Result<PgConnectOptions, DbErr> {
    url.parse::<PgConnectOptions>()
        .map(|o| o.disable_statement_logging())
        .map_err(|e| {
            DbErr::Conn(RuntimeErr::Internal(crate::telemetry::redact_credentials(
                &e.to_string(),
            )))
        })
}

/// Whether the pool's host takes writes, asked on one of the pool's connections within
/// `timeout`.
async fn still_writable(pool: &PgPool, timeout: Duration) -> bool {
    let check = async {
        let mut conn = pool.acquire().await?;
        sea_orm::sqlx::query_scalar::<_, bool>(WRITABLE)
            .fetch_one(&mut *conn)
            .await
    };
    matches!(tokio::time::timeout(timeout, check).await, Ok(Ok(true)))
}

/// Every half second, unless the pool's host still takes writes, looks for the writable host
/// and moves the pool to it; ends with the pool.
async fn follow(
    pool: PgPool,
    hosts: Hosts,
    mut current: String,
    switched: Arc<AtomicU64>,
    timeout: Duration,
) {
    while !pool.is_closed() {
        tokio::time::sleep(Duration::from_millis(500)).await;
        if !crate::telemetry::database_unavailable_now() && still_writable(&pool, timeout).await {
            continue;
        }
        let Ok(chosen) = hosts.choose(timeout).await else {
            continue;
        };
        if chosen == current {
            continue;
        }
        let Ok(options) = options(&chosen) else {
            continue;
        };
        let to = hosts.urls.iter().position(|u| *u == chosen).unwrap_or(0) + 1;
        tracing::warn!(
            host = to,
            "PostgreSQL failed over: new connections go to host {to} of the URL"
        );
        pool.set_connect_options(options);
        switched.store(epoch().elapsed().as_millis() as u64, Ordering::Release);
        current = chosen;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_multi_host_url_is_one_url_per_host_and_its_target() {
        let hosts = Hosts::parse(
            "postgres://payd:pw@h1:5432,h2:6432/payd?sslmode=prefer&target_session_attrs=read-write",
        )
        .unwrap();
        assert_eq!(hosts.target, Target::Writable);
        assert_eq!(
            hosts.urls,
            [
                "postgres://payd:pw@h1:5432/payd?sslmode=prefer",
                "postgres://payd:pw@h2:6432/payd?sslmode=prefer"
            ]
        );
        let one = Hosts::parse("postgres://payd@db/payd").unwrap();
        assert_eq!((one.urls.len(), one.target), (1, Target::Any));
        assert!(Hosts::parse("postgres://h1,,h2/payd").is_err());
        assert!(Hosts::parse("postgres://h1/payd?target_session_attrs=standby").is_err());
    }

    #[test]
    fn a_tcp_front_closing_the_connection_is_named_not_reported_as_an_ssl_answer() {
        assert_eq!(
            cause("error communicating with database: unexpected response from SSLRequest: 0x00"),
            "the connection was closed before PostgreSQL answered (a TCP front with no server behind it?)"
        );
        assert_eq!(
            cause("unexpected response from SSLRequest: 0x48"),
            "something other than PostgreSQL answered (first byte 0x48)"
        );
        assert_eq!(
            cause("connection to postgres://payd:s3cret@h1/payd refused"),
            "connection to postgres://payd:[redacted]@h1/payd refused"
        );
    }
}

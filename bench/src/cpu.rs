//! CPU time per operation, the yardstick that does not move with the VM's neighbours: the
//! user + system time (`/proc/<pid>/stat`) that payd's process, the database's processes and
//! this load generator spent during a phase, divided by its operations.
//!
//! The database's processes are PostgreSQL's backends connected to the bench's database
//! (`pg_stat_activity`, the meter's own backend left out); a backend that ends during a phase
//! takes its time with it, which payd's pooled connections do not. PostgreSQL's shared
//! processes (WAL writer, checkpointer) are not counted. On SQLite the database runs inside
//! payd and its time is payd's.

use sea_orm::{ConnectionTrait, DatabaseConnection, DbBackend, Statement};

/// Clock ticks a second in `/proc/<pid>/stat` (`USER_HZ`, 100 on Linux everywhere).
const TICKS_PER_SECOND: u64 = 100;

/// CPU time a process has used so far; `None` when it is gone (or this is not Linux).
fn used(pid: u32) -> Option<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces: the fields counted from its closing `)`.
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let user: u64 = fields.get(11)?.parse().ok()?;
    let system: u64 = fields.get(12)?.parse().ok()?;
    Some(user + system)
}

/// Which processes a phase's CPU is read from.
#[derive(Clone)]
pub(crate) struct Meter {
    payd: Option<u32>,
    /// A connection to the bench's PostgreSQL database, to find its backends.
    database: Option<DatabaseConnection>,
    /// payd's `/metrics`, whose `payd_database_statements_total` counts the statements it
    /// sent.
    metrics_url: Option<String>,
}

/// The processes' CPU time at a phase's start, in ticks, and payd's statements so far.
pub(crate) struct Mark {
    payd: Option<u64>,
    backends: Vec<(u32, u64)>,
    load: Option<u64>,
    statements: Option<u64>,
}

/// CPU time per operation of a phase, in microseconds, and payd's statements per operation.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct PerOp {
    pub(crate) payd: Option<f64>,
    pub(crate) database: Option<f64>,
    pub(crate) load: f64,
    pub(crate) statements: Option<f64>,
}

impl PerOp {
    /// payd's and the database's together: what an operation costs the service.
    pub(crate) fn service(&self) -> f64 {
        self.payd.unwrap_or(0.0) + self.database.unwrap_or(0.0)
    }

    pub(crate) fn summary(&self) -> String {
        let part = |v: Option<f64>| v.map_or("-".to_owned(), |us| format!("{us:.0}"));
        let statements = self
            .statements
            .map_or("-".to_owned(), |s| format!("{s:.1}"));
        format!(
            "CPU per op: payd {} µs, database {} µs, load generator {:.0} µs; {statements} statements per op",
            part(self.payd),
            part(self.database),
            self.load
        )
    }
}

impl Meter {
    /// A meter of this process only (baselines with no payd and no database server).
    pub(crate) fn load_only() -> Self {
        Self {
            payd: None,
            database: None,
            metrics_url: None,
        }
    }

    /// Also counts the statements payd (at `base`) sends.
    pub(crate) fn with_statements(mut self, base: &str) -> Self {
        self.metrics_url = Some(format!("{base}/metrics"));
        self
    }

    /// `payd_database_statements_total` now.
    async fn statements(&self) -> Option<u64> {
        let url = self.metrics_url.as_deref()?;
        let mut res = awc::Client::default().get(url).send().await.ok()?;
        let body = res.body().limit(16 << 20).await.ok()?;
        String::from_utf8_lossy(&body)
            .lines()
            .find_map(|l| l.strip_prefix("payd_database_statements_total "))
            .and_then(|v| v.trim().parse::<f64>().ok())
            .map(|v| v as u64)
    }

    /// A meter of payd's process (if any) and of the backends of the database at `url` (on
    /// PostgreSQL).
    pub(crate) async fn new(payd: Option<u32>, url: &str) -> anyhow::Result<Self> {
        let database = if url.starts_with("postgres") {
            Some(sea_orm::Database::connect(url).await?)
        } else {
            None
        };
        Ok(Self {
            payd,
            database,
            metrics_url: None,
        })
    }

    async fn backends(&self) -> Vec<u32> {
        let Some(db) = &self.database else {
            return Vec::new();
        };
        let sql = "SELECT pid FROM pg_stat_activity \
                   WHERE datname = current_database() AND pid <> pg_backend_pid()";
        let rows = db
            .query_all_raw(Statement::from_string(DbBackend::Postgres, sql))
            .await
            .unwrap_or_default();
        rows.iter()
            .filter_map(|r| r.try_get::<i32>("", "pid").ok())
            .filter_map(|pid| u32::try_from(pid).ok())
            .collect()
    }

    pub(crate) async fn mark(&self) -> Mark {
        Mark {
            payd: self.payd.and_then(used),
            backends: self
                .backends()
                .await
                .into_iter()
                .filter_map(|pid| Some((pid, used(pid)?)))
                .collect(),
            load: used(std::process::id()),
            statements: self.statements().await,
        }
    }

    /// The CPU per operation since `start`, over `ops` operations.
    pub(crate) async fn per_op(&self, start: &Mark, ops: u64) -> PerOp {
        let end = self.mark().await;
        let us = |ticks: u64| ticks as f64 * 1e6 / TICKS_PER_SECOND as f64 / ops.max(1) as f64;
        let payd = start
            .payd
            .zip(end.payd)
            .map(|(a, b)| us(b.saturating_sub(a)));
        // A backend that began during the phase counts from zero.
        let database = self.database.as_ref().map(|_| {
            let spent = end
                .backends
                .iter()
                .map(|(pid, now)| {
                    let before = start
                        .backends
                        .iter()
                        .find(|(p, _)| p == pid)
                        .map_or(0, |(_, t)| *t);
                    now.saturating_sub(before)
                })
                .sum();
            us(spent)
        });
        let load = start
            .load
            .zip(end.load)
            .map_or(0.0, |(a, b)| us(b.saturating_sub(a)));
        let statements = start
            .statements
            .zip(end.statements)
            .map(|(a, b)| b.saturating_sub(a) as f64 / ops.max(1) as f64);
        PerOp {
            payd,
            database,
            load,
            statements,
        }
    }
}

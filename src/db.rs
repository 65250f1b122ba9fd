//! Database connections and migrations, for SQLite (embedded) and PostgreSQL alike.

use std::time::Duration;

use payd_migration::{Migrator, MigratorTrait};

use crate::{
    schema::{self, Found, MigrateError},
    settings::DatabaseSettings,
};
use sea_orm::{
    sea_query::OnConflict,
    sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqliteSynchronous},
    ActiveModelTrait, ConnectOptions, ConnectionTrait, Database, DatabaseConnection, DbBackend,
    DbErr, EntityTrait, RuntimeErr, SqlxPostgresConnector, Statement,
};

use crate::telemetry::redact_credentials;

/// At most this many rows in one multi-row `INSERT`: well under the bound parameters either
/// database takes in a statement (32 766 for SQLite, 65 535 for PostgreSQL) at any width of
/// payd's tables.
pub const ROWS_PER_INSERT: usize = 500;

/// Inserts `rows` as multi-row `INSERT`s of at most [`ROWS_PER_INSERT`] rows, each with
/// `on_conflict` when given; nothing when there are none.
pub async fn insert_rows<A>(
    db: &impl ConnectionTrait,
    rows: &[A],
    on_conflict: Option<&OnConflict>,
) -> Result<(), DbErr>
where
    A: ActiveModelTrait + Clone,
{
    for chunk in rows.chunks(ROWS_PER_INSERT) {
        let mut insert = A::Entity::insert_many(chunk.to_vec());
        if let Some(conflict) = on_conflict {
            insert = insert.on_conflict(conflict.clone());
        }
        insert.exec_without_returning(db).await?;
    }
    Ok(())
}

/// Any fixed number: the key of the advisory lock that serializes migrations across instances.
const MIGRATION_LOCK: i64 = 0x0070_6179_646d_6967; // "paydmig"

/// Connects to the configured database (`database.*`) with a pool of `max_connections`
/// (`database.max_connections` when `None`).
pub async fn connect_to(
    settings: &DatabaseSettings,
    max_connections: Option<u32>,
) -> Result<DatabaseConnection, DbErr> {
    connect_with(
        &settings.url,
        max_connections.or(settings.max_connections),
        Duration::from_millis(settings.acquire_timeout_ms),
    )
    .await
}

/// Connects as `connect_with` does, waiting at most 5 s for a connection.
pub async fn connect(url: &str, max_connections: Option<u32>) -> Result<DatabaseConnection, DbErr> {
    connect_with(url, max_connections, Duration::from_secs(5)).await
}

/// Statements sent to the database by this process so far, through any pool
/// (`payd_database_statements_total`, read by `/metrics`; `payd-bench` divides it by a phase's
/// operations).
static STATEMENTS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

/// How many statements this process has sent to the database.
pub fn statements() -> u64 {
    STATEMENTS.load(std::sync::atomic::Ordering::Relaxed)
}

/// Counts statements sea-orm's hook does not see: a transaction's `BEGIN` and `COMMIT`, a
/// savepoint's pair.
pub fn count_statements(n: u64) {
    STATEMENTS.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
}

/// Counts each statement a connection of the pool runs (its transactions' too, but not their
/// `BEGIN` and `COMMIT`: see [`count_statements`]).
fn counted(mut conn: DatabaseConnection) -> DatabaseConnection {
    conn.set_metric_callback(|_| count_statements(1));
    conn
}

/// Connects with the settings payd relies on: SQLite in WAL mode with a busy timeout and
/// foreign keys, its directory created; PostgreSQL with a bounded pool on the writable host of
/// its URL (`failover`). A statement waits at most `acquire_timeout` for a connection (then
/// the request answers 503).
pub async fn connect_with(
    url: &str,
    max_connections: Option<u32>,
    acquire_timeout: Duration,
) -> Result<DatabaseConnection, DbErr> {
    if !url.starts_with("sqlite:") {
        // One host or several (a failover pair): `failover` chooses, and follows a failover.
        let pool =
            crate::failover::pool(url, max_connections.unwrap_or(10), acquire_timeout).await?;
        return Ok(counted(SqlxPostgresConnector::from_sqlx_postgres_pool(
            pool,
        )));
    }
    ensure_sqlite_dir(url);
    let mut opts = ConnectOptions::new(url.to_owned());
    opts.sqlx_logging(false)
        .connect_timeout(acquire_timeout)
        .acquire_timeout(acquire_timeout)
        // One connection unless asked: `commit::Db` writes through one and reads through others.
        .max_connections(max_connections.unwrap_or(1))
        .map_sqlx_sqlite_opts(|o: SqliteConnectOptions| {
            o.journal_mode(SqliteJournalMode::Wal)
                .synchronous(SqliteSynchronous::Normal)
                .busy_timeout(Duration::from_secs(10))
                .foreign_keys(true)
                .create_if_missing(true)
        });
    // An error may quote the connection string: never its password.
    Database::connect(opts)
        .await
        .map(counted)
        .map_err(|e| match e {
            DbErr::Conn(RuntimeErr::Internal(text)) => {
                DbErr::Conn(RuntimeErr::Internal(redact_credentials(&text)))
            }
            DbErr::Conn(other) => {
                DbErr::Conn(RuntimeErr::Internal(redact_credentials(&other.to_string())))
            }
            other => other,
        })
}

/// Creates the directory of a file-backed SQLite URL (`sqlite://data/payd.db?mode=rwc`).
fn ensure_sqlite_dir(url: &str) {
    let path = url
        .trim_start_matches("sqlite://")
        .trim_start_matches("sqlite:")
        .split('?')
        .next()
        .unwrap_or("");
    if path.is_empty() || path.contains(":memory:") || path.starts_with("file:") {
        return;
    }
    if let Some(dir) = std::path::Path::new(path).parent() {
        if !dir.as_os_str().is_empty() {
            let _ = std::fs::create_dir_all(dir);
        }
    }
}

/// Whether a SQLite URL names an in-memory database (which only its own pool sees).
pub fn is_in_memory(url: &str) -> bool {
    url.contains(":memory:") || url.contains("mode=memory")
}

/// Applies pending migrations, on one dedicated connection. On PostgreSQL it holds an
/// advisory lock, so instances starting together take turns instead of racing. On SQLite one
/// connection is what a migration that rebuilds a table (create, copy, drop, rename) needs:
/// spread over a pool's connections, the rename was refused as if the dropped table were
/// still there (`tests/api/migrations.rs`). An in-memory database is only the pool's own.
pub async fn migrate(url: &str, db: &DatabaseConnection) -> Result<Migrated, MigrateError> {
    if db.get_database_backend() != DbBackend::Postgres {
        if is_in_memory(url) {
            return migrate_on(db).await;
        }
        let one = connect(url, Some(1)).await?;
        let result = migrate_on(&one).await;
        one.close().await?;
        return result;
    }
    let lock_conn = connect(url, Some(1)).await?;
    let lock = |sql: &str| {
        Statement::from_sql_and_values(DbBackend::Postgres, sql, [MIGRATION_LOCK.into()])
    };
    lock_conn
        .execute_raw(lock("SELECT pg_advisory_lock($1)"))
        .await?;
    let result = migrate_on(&lock_conn).await;
    let unlocked = lock_conn
        .execute_raw(lock("SELECT pg_advisory_unlock($1)"))
        .await;
    lock_conn.close().await?;
    let migrated = result?;
    unlocked?;
    Ok(migrated)
}

/// What [`migrate`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Migrated {
    /// This many pending migrations applied (none: the schema was this build's already).
    Applied(usize),
    /// The schema is a newer release's, every newer migration one this build runs beside:
    /// nothing was applied.
    NewerCompatible,
}

impl std::fmt::Display for Migrated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Migrated::Applied(0) => write!(f, "the schema is up to date"),
            Migrated::Applied(n) => write!(f, "{n} migrations applied"),
            Migrated::NewerCompatible => write!(
                f,
                "the schema is a newer release's, which this build runs beside: nothing applied"
            ),
        }
    }
}

/// On one connection: the schema checked against this build's ([`schema::check`]), then the
/// pending migrations applied and what older releases may do beside them recorded; or, on a
/// database a newer release migrated, nothing written (refused, or run as it is).
async fn migrate_on(conn: &DatabaseConnection) -> Result<Migrated, MigrateError> {
    match schema::check(conn).await? {
        Found::Known { pending } => {
            Migrator::up(conn, None).await?;
            schema::record(conn).await?;
            if pending > 0 {
                tracing::info!(pending, release = schema::RELEASE, "migrations applied");
            }
            Ok(Migrated::Applied(pending))
        }
        Found::NewerCompatible(newer) => {
            tracing::warn!("{}", newer.warning());
            Ok(Migrated::NewerCompatible)
        }
    }
}

/// Writes a consistent copy of a SQLite database to `to`, a new file, while payd serves:
/// SQLite's `VACUUM INTO` reads one snapshot (every commit before it began) and writes it
/// whole, where a copy of the file under writes could be torn or miss the WAL's commits.
/// PostgreSQL has its own tools (docs/backups.md). Returns the backup's size in bytes.
pub async fn backup(url: &str, to: &std::path::Path) -> anyhow::Result<u64> {
    if !url.starts_with("sqlite:") {
        anyhow::bail!("payd backup copies SQLite databases; back PostgreSQL up with pg_dump or point-in-time recovery (docs/backups.md)");
    }
    if is_in_memory(url) {
        anyhow::bail!("database.url names an in-memory database: there is nothing to back up");
    }
    if to.exists() {
        anyhow::bail!(
            "{} exists: payd backup writes a new file, it never overwrites one",
            to.display()
        );
    }
    let target = to
        .to_str()
        .ok_or_else(|| anyhow::anyhow!("the backup's path is not UTF-8: {}", to.display()))?;
    let conn = connect(url, Some(1)).await?;
    let vacuum =
        Statement::from_sql_and_values(DbBackend::Sqlite, "VACUUM INTO ?", [target.into()]);
    let result = conn.execute_raw(vacuum).await;
    conn.close().await?;
    result?;
    Ok(std::fs::metadata(to)?.len())
}

/// Whether the database takes writes, answering within `within`: on PostgreSQL a server that
/// is not in recovery and whose sessions are not read-only (a standby or a demoted primary
/// answers, but takes no write); on SQLite a write of its one probe row, since a file on a
/// full or read-only disk still answers reads. Readiness asks this; an outage's start and end
/// are logged once each (`telemetry::database_outage`). `Err` names the cause: on PostgreSQL,
/// when no host of `url` takes writes, each host's own answer (the pool's error says only that
/// it timed out).
pub async fn ping(db: &DatabaseConnection, url: &str, within: Duration) -> Result<(), String> {
    let check = async {
        match db.get_database_backend() {
            DbBackend::Sqlite => db
                .execute_unprepared("UPDATE readiness_probe SET checks = checks + 1 WHERE id = 1")
                .await
                .map(|_| true),
            _ => {
                let writable =
                    Statement::from_string(DbBackend::Postgres, crate::failover::WRITABLE);
                let row = db.query_one_raw(writable).await?;
                Ok(row.and_then(|r| r.try_get::<bool>("", "writable").ok()) == Some(true))
            }
        }
    };
    let failed = match tokio::time::timeout(within, check).await {
        Ok(Ok(true)) => {
            crate::telemetry::database_answered();
            return Ok(());
        }
        Ok(Ok(false)) => {
            "no writable PostgreSQL: the server is in recovery or read-only".to_owned()
        }
        Ok(Err(e)) => e.to_string(),
        Err(_) => format!("no answer within {within:?}"),
    };
    let cause = match db.get_database_backend() {
        DbBackend::Postgres => crate::failover::diagnose(url, DIAGNOSIS_TIMEOUT)
            .await
            .unwrap_or(failed),
        _ => failed,
    };
    let cause = crate::failover::cause(&cause);
    crate::telemetry::database_outage(&cause);
    Err(cause)
}

/// How long each host is given to answer when readiness asks why the database does not.
const DIAGNOSIS_TIMEOUT: Duration = Duration::from_millis(300);

/// The PostgreSQL channel on which a commit that queued webhook deliveries tells every
/// instance (`NOTIFY payd_deliveries`), so that another instance's dispatcher starts them at
/// once rather than at its next poll.
pub const WAKE_CHANNEL: &str = "payd_deliveries";

/// Listens on PostgreSQL on [`WAKE_CHANNEL`] on a thread of its own and calls `heard` for each
/// announcement; after a lost connection (whose announcements are lost) it calls `heard` once,
/// then listens again. Stops when the returned handle is dropped. (Its own thread and runtime:
/// the listener's connection must be dropped inside the runtime that opened it.)
pub fn listen_for_wakes(
    url: String,
    heard: impl Fn() + Send + 'static,
) -> std::io::Result<WakeListener> {
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    std::thread::Builder::new()
        .name("payd-wakes".into())
        .spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("the wake listener's runtime");
            runtime.block_on(async move {
                tokio::select! {
                    _ = stopped => {}
                    _ = listen(&url, &heard) => {}
                }
            });
        })?;
    Ok(WakeListener { _stop: stop })
}

/// Keeps [`listen_for_wakes`] listening while held.
pub struct WakeListener {
    _stop: tokio::sync::oneshot::Sender<()>,
}

async fn listen(url: &str, heard: &impl Fn()) {
    let mut failures = 0u32;
    loop {
        let e = listen_once(url, heard, &mut failures).await;
        failures += 1;
        let error = redact_credentials(&e);
        tracing::warn!(%error, "listening for other instances' deliveries failed; polling meanwhile");
        heard();
        tokio::time::sleep(Duration::from_millis(200 * u64::from(failures.min(25)))).await;
    }
}

async fn listen_once(url: &str, heard: &impl Fn(), failures: &mut u32) -> String {
    // On the writable host of a failover pair's URL, as the pools are.
    let hosts = match crate::failover::Hosts::parse(url) {
        Ok(hosts) => hosts,
        Err(e) => return e,
    };
    let url = match hosts.choose(Duration::from_secs(5)).await {
        Ok(url) => url,
        Err(e) => return e.to_string(),
    };
    let mut listener = match sea_orm::sqlx::postgres::PgListener::connect(&url).await {
        Ok(listener) => listener,
        Err(e) => return e.to_string(),
    };
    if let Err(e) = listener.listen(WAKE_CHANNEL).await {
        return e.to_string();
    }
    // `try_recv`, not `recv`: on a lost connection `recv` reconnects by itself, to the same
    // host, and after a failover waits out its pool's timeout; this looks for the writable
    // host again instead.
    loop {
        match listener.try_recv().await {
            Ok(Some(_)) => {
                *failures = 0;
                heard();
            }
            Ok(None) => return "the connection was lost".to_owned(),
            Err(e) => return e.to_string(),
        }
    }
}

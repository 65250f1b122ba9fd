//! The one commit path. Every state change of every aggregate — a payment, a refund, a
//! dispute, a customer, a mandate, a merchant and its keys, a webhook delivery's outcome — is
//! built by its store as a [`Change`]: plain data holding the compare-and-set update of the
//! aggregate's row, the rows it inserts, updates or deletes, the conditions it needs, its
//! outbox events and its scheduled jobs. [`commit`] writes a change in one transaction; nothing
//! else in payd opens one.
//!
//! Invariant: a change is written whole or not at all. A compare-and-set that touches no row
//! (another writer got there first) rolls it back as [`CommitError::LostRace`]; a failed
//! [`Write::Require`] rolls it back as [`CommitError::Refused`], naming the
//! [`Conflict`](crate::conflict::Conflict) it found; what that answers is not the commit
//! path's to say (the error module maps it, or the caller matches on it).
//!
//! Changes are written by group writers (`group.rs`): the changes of many actors that arrive
//! together share one transaction, each answered with its own outcome after that transaction
//! commits. Stores reach the database through [`Db`]: queries go to the readers, changes to
//! the writers. What a change is, and how one is written, is `change.rs`; the rows the
//! changes of a transaction append, their events and their jobs are written after them, a
//! table's rows together (`later.rs`).

use sea_orm::{
    ConnectionTrait, DatabaseConnection, DbBackend, DbErr, ExecResult, QueryResult, Statement,
};
use std::time::Duration;
use tokio::sync::oneshot;

mod change;
mod direct;
mod group;
mod later;

pub use change::{
    append, append_upsert, bounded, decide_fresh, insert, or_retry, retrying, Change, CommitError,
    Event, Job, Versioned, Write,
};
pub use group::Writers;
pub use later::{Committed, Row};

/// The database as the stores use it: changes go to the group writers ([`commit`]), queries
/// to the readers, other single statements to the writers' pool. On PostgreSQL the readers
/// are the same pool; on SQLite the writers' pool is one connection (the one writer: a single
/// statement waits there for the writer's transaction instead of for SQLite's lock) and the
/// readers are the others, reading alongside it (WAL). Cloned freely; the writers stop when
/// the last clone is dropped.
#[derive(Clone)]
pub struct Db {
    conn: DatabaseConnection,
    reads: DatabaseConnection,
    writers: group::Queues,
}

impl Db {
    /// Starts the group writers on `conn`, which also serves the queries.
    pub fn new(conn: DatabaseConnection, writers: Writers) -> std::io::Result<Self> {
        Self::with_readers(conn.clone(), conn, writers)
    }

    fn with_readers(
        conn: DatabaseConnection,
        reads: DatabaseConnection,
        writers: Writers,
    ) -> std::io::Result<Self> {
        let writers = group::start(conn.clone(), writers)?;
        Ok(Self {
            conn,
            reads,
            writers,
        })
    }

    /// Connects to the configured database (`database.*`) and starts its writers; the
    /// migrations run on [`Db::conn`].
    pub async fn connect(settings: &crate::settings::DatabaseSettings) -> anyhow::Result<Self> {
        let in_memory = crate::db::is_in_memory(&settings.url);
        if !settings.is_sqlite() || in_memory {
            let conn = crate::db::connect_to(settings, None).await?;
            return Ok(Self::new(conn, Writers::of(settings))?);
        }
        let conn = crate::db::connect_to(settings, Some(1)).await?;
        let readers = settings
            .max_connections
            .unwrap_or(4)
            .saturating_sub(1)
            .max(1);
        let reads = crate::db::connect_to(settings, Some(readers)).await?;
        Ok(Self::with_readers(conn, reads, Writers::of(settings))?)
    }

    /// The writers' pool (migrations, pings, the scheduler's claims).
    pub fn conn(&self) -> &DatabaseConnection {
        &self.conn
    }

    /// Each pool by name: `writes` (the writers, migrations and claims), and on SQLite `reads`
    /// (PostgreSQL reads through the one pool).
    fn pools(&self) -> Vec<(&'static str, &DatabaseConnection)> {
        let mut pools = vec![("writes", &self.conn)];
        if self.conn.get_database_backend() != sea_orm::DbBackend::Postgres {
            pools.push(("reads", &self.reads));
        }
        pools
    }

    /// Each pool's open, idle and most connections, for `payd_database_connections`.
    pub fn pool_sizes(&self) -> Vec<PoolSize> {
        self.pools()
            .into_iter()
            .map(|(name, conn)| match conn.get_database_backend() {
                sea_orm::DbBackend::Postgres => {
                    let pool = conn.get_postgres_connection_pool();
                    PoolSize::of(name, pool)
                }
                _ => PoolSize::of(name, conn.get_sqlite_connection_pool()),
            })
            .collect()
    }

    /// How long each pool takes to hand out a connection now, waited for at most `limit`
    /// (`payd_database_acquire_seconds`): sqlx does not say how many statements wait, and this
    /// is what each of them waits before it runs.
    pub async fn acquire_times(&self, limit: Duration) -> Vec<(&'static str, Duration)> {
        let mut times = Vec::new();
        for (name, conn) in self.pools() {
            let started = std::time::Instant::now();
            let acquired = match conn.get_database_backend() {
                sea_orm::DbBackend::Postgres => {
                    let pool = conn.get_postgres_connection_pool();
                    tokio::time::timeout(limit, pool.acquire()).await.is_ok()
                }
                _ => {
                    let pool = conn.get_sqlite_connection_pool();
                    tokio::time::timeout(limit, pool.acquire()).await.is_ok()
                }
            };
            times.push((name, if acquired { started.elapsed() } else { limit }));
        }
        times
    }
}

/// One pool's connections at a moment.
pub struct PoolSize {
    pub pool: &'static str,
    pub open: u32,
    pub idle: usize,
    pub max: u32,
}

impl PoolSize {
    fn of<DB: sea_orm::sqlx::Database>(pool: &'static str, p: &sea_orm::sqlx::Pool<DB>) -> Self {
        Self {
            pool,
            open: p.size(),
            idle: p.num_idle(),
            max: p.options().get_max_connections(),
        }
    }
}

impl Db {
    /// The readers for a `SELECT`; the writers' pool for a statement that writes and returns
    /// rows (`UPDATE … RETURNING`, an insert that returns its row).
    fn pool_for(&self, stmt: &Statement) -> &DatabaseConnection {
        let sql = stmt.sql.trim_start();
        match sql.get(..6) {
            Some(head) if head.eq_ignore_ascii_case("SELECT") => &self.reads,
            _ => &self.conn,
        }
    }
}

#[async_trait::async_trait]
impl ConnectionTrait for Db {
    fn get_database_backend(&self) -> DbBackend {
        self.conn.get_database_backend()
    }

    async fn execute_raw(&self, stmt: Statement) -> Result<ExecResult, DbErr> {
        self.conn.execute_raw(stmt).await
    }

    async fn execute_unprepared(&self, sql: &str) -> Result<ExecResult, DbErr> {
        self.conn.execute_unprepared(sql).await
    }

    async fn query_one_raw(&self, stmt: Statement) -> Result<Option<QueryResult>, DbErr> {
        self.pool_for(&stmt).query_one_raw(stmt).await
    }

    async fn query_all_raw(&self, stmt: Statement) -> Result<Vec<QueryResult>, DbErr> {
        self.pool_for(&stmt).query_all_raw(stmt).await
    }

    fn support_returning(&self) -> bool {
        self.conn.support_returning()
    }
}

/// Writes a change, whole or not at all, in a transaction it may share with the changes of
/// other actors (group commit); answers once that transaction has committed.
pub async fn commit(db: &Db, change: Change) -> Result<Committed, CommitError> {
    let (reply, outcome) = oneshot::channel();
    let stopped = || CommitError::Db(DbErr::Custom("the database writers have stopped".into()));
    db.writers
        .send(group::Pending {
            change,
            timeline: crate::clock::current(),
            reply,
        })
        .map_err(|()| stopped())?;
    outcome.await.map_err(|_| stopped())?
}

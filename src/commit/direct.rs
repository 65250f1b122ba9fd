//! SQLite only: a writer that holds its connection for a whole transaction (#47, item 6).
//!
//! sqlx runs every SQLite statement on its connection's own thread: each statement is a
//! message to that thread and an answer back, two wake-ups. [`Direct`] instead locks the
//! connection out of its thread (`lock_handle`) once per transaction and runs the statements on
//! the writer's thread, with sqlx's own statement cache and binding (`vendor/sqlx-sqlite`'s
//! `LockedSqliteHandle::run`), so that values are written exactly as through the pool.

use std::sync::Mutex;

use sea_orm::{
    sqlx::{
        pool::PoolConnection,
        sqlite::{LockedSqliteHandle, Sqlite, SqlitePool, SqliteQueryResult, SqliteRow},
        AssertSqlSafe, Either, IntoArguments,
    },
    ConnectionTrait, DbBackend, DbErr, ExecResult, QueryResult, RuntimeErr, Statement,
};
use sea_query_sqlx::SqlxValues;

// The error kinds sea-orm's own SQLite driver gives (its converters are not exported).
fn exec_err(e: sea_orm::sqlx::Error) -> DbErr {
    DbErr::Exec(RuntimeErr::SqlxError(e.into()))
}

fn query_err(e: sea_orm::sqlx::Error) -> DbErr {
    DbErr::Query(RuntimeErr::SqlxError(e.into()))
}

fn conn_err(e: sea_orm::sqlx::Error) -> DbErr {
    DbErr::Conn(RuntimeErr::SqlxError(e.into()))
}

/// A connection taken from the pool for one transaction.
pub(super) struct Held(PoolConnection<Sqlite>);

impl Held {
    pub async fn acquire(pool: &SqlitePool) -> Result<Self, DbErr> {
        pool.acquire().await.map(Self).map_err(conn_err)
    }

    /// Takes the connection from its thread until the [`Direct`] is dropped.
    pub async fn lock(&mut self) -> Result<Direct<'_>, DbErr> {
        let handle = self.0.lock_handle().await.map_err(conn_err)?;
        Ok(Direct(Mutex::new(handle)))
    }
}

/// The connection, run on this thread. Dropping it rolls back a transaction left open.
pub(super) struct Direct<'c>(Mutex<LockedSqliteHandle<'c>>);

impl Direct<'_> {
    fn run(
        &self,
        sql: &str,
        values: Option<sea_orm::Values>,
        limit: Option<usize>,
    ) -> Result<Vec<Either<SqliteQueryResult, SqliteRow>>, sea_orm::sqlx::Error> {
        crate::db::count_statements(1);
        let args =
            values.map(|v| <SqlxValues as IntoArguments<Sqlite>>::into_arguments(SqlxValues(v)));
        let mut handle = self.0.lock().unwrap_or_else(|e| e.into_inner());
        handle.run(AssertSqlSafe(sql.to_owned()), args, limit)
    }

    /// `BEGIN IMMEDIATE`: the write lock at once, as the pooled writer takes it.
    pub fn begin(&self) -> Result<(), DbErr> {
        self.run("BEGIN IMMEDIATE", None, None)
            .map(drop)
            .map_err(exec_err)
    }

    pub fn commit(&self) -> Result<(), DbErr> {
        self.run("COMMIT", None, None).map(drop).map_err(exec_err)
    }

    pub fn rollback(&self) -> Result<(), DbErr> {
        self.run("ROLLBACK", None, None).map(drop).map_err(exec_err)
    }

    fn rows(&self, stmt: Statement, limit: Option<usize>) -> Result<Vec<QueryResult>, DbErr> {
        let results = self.run(&stmt.sql, stmt.values, limit).map_err(query_err)?;
        Ok(results
            .into_iter()
            .filter_map(|r| r.right().map(QueryResult::from))
            .collect())
    }
}

impl Drop for Direct<'_> {
    fn drop(&mut self) {
        let handle = self.0.get_mut().unwrap_or_else(|e| e.into_inner());
        if handle.in_transaction() {
            let _ = handle.run(AssertSqlSafe("ROLLBACK"), None, None);
        }
    }
}

#[async_trait::async_trait]
impl ConnectionTrait for Direct<'_> {
    fn get_database_backend(&self) -> DbBackend {
        DbBackend::Sqlite
    }

    async fn execute_raw(&self, stmt: Statement) -> Result<ExecResult, DbErr> {
        let results = self.run(&stmt.sql, stmt.values, None).map_err(exec_err)?;
        let done = results.into_iter().filter_map(Either::left).fold(
            Default::default(),
            |mut all: SqliteQueryResult, one| {
                all.extend([one]);
                all
            },
        );
        Ok(done.into())
    }

    async fn execute_unprepared(&self, sql: &str) -> Result<ExecResult, DbErr> {
        self.execute_raw(Statement::from_string(DbBackend::Sqlite, sql))
            .await
    }

    async fn query_one_raw(&self, stmt: Statement) -> Result<Option<QueryResult>, DbErr> {
        Ok(self.rows(stmt, Some(1))?.into_iter().next())
    }

    async fn query_all_raw(&self, stmt: Statement) -> Result<Vec<QueryResult>, DbErr> {
        self.rows(stmt, None)
    }
}

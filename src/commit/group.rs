//! Group commit: the writers behind [`super::commit`]. A writer takes the changes that arrived
//! while its previous transaction ran (at most `max_batch`), writes them in one transaction
//! and answers each caller with its own outcome once that transaction has committed: nothing
//! is acknowledged before its commit.
//!
//! A batch is first written plainly, every change after the other. If one of them fails (a
//! lost race, a refusal, a database error) the transaction is rolled back and the batch is
//! written again with each change under a savepoint, so that the failed one rolls back alone
//! and the others commit. A transaction that breaks as a whole before its `COMMIT` (a lost
//! connection) is retried one change per transaction; a failed `COMMIT` is answered to every
//! caller, as a single commit's would be, since whether it committed is unknown.
//!
//! A lone change is written in a transaction of its own, as it always was: at low load there
//! is no savepoint and no extra statement, and no wait unless another writer is mid-transaction
//! (below).
//!
//! **Writers join as the queue grows.** With several writers (PostgreSQL's default), a writer
//! that finds another mid-transaction and fewer than [`SPILL`] changes waiting does not start
//! a transaction beside it: it gathers what arrives until that transaction ends (or enough
//! has arrived), then writes it all in one. At a steady rate one writer keeps up, and each
//! transaction more costs its `BEGIN`, `COMMIT`, WAL flush and statements (docs/performance.md,
//! "paced"); in a burst the queue outgrows [`SPILL`] and the writers write side by side.
//!
//! **One writer takes the contended locks.** A change marked [`Change::serial`] (a payout's
//! reservation, which takes its shop's lock row) waits on a queue of its own that only the
//! first writer takes from, besides the common one. Written by several writers, such changes
//! would each hold a transaction open while waiting for the lock row of another's, and the
//! changes sharing those transactions with them would wait too; written by one, those that
//! arrive together share one transaction and take the lock once. Across instances the lock
//! row still orders them.

use std::{
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc,
    },
    time::{Duration, Instant},
};

use sea_orm::{
    sqlx::sqlite::SqlitePool, ConnectionTrait, DatabaseConnection, DatabaseTransaction, DbBackend,
    DbErr, SqliteTransactionMode, TransactionOptions, TransactionTrait,
};
use tokio::sync::{mpsc, oneshot, Mutex, Notify};

use super::{
    change::{write, Change, CommitError},
    direct::Held,
    later::{Committed, Later},
};
use crate::{
    clock::{self, Timeline},
    db,
};

pub(super) type Outcome = Result<Committed, CommitError>;

/// How many group writers a [`super::Db`] starts, and how they write.
#[derive(Debug, Clone, Copy)]
pub struct Writers {
    pub count: usize,
    /// At most this many changes share a transaction.
    pub max_batch: usize,
    /// On PostgreSQL, tell every instance when a transaction queued deliveries (`NOTIFY`).
    pub announce: bool,
    /// On SQLite, hold the connection for a whole transaction (`direct.rs`).
    pub direct: bool,
}

impl Writers {
    pub fn of(settings: &crate::settings::DatabaseSettings) -> Self {
        Self {
            count: settings.writers(),
            max_batch: settings.max_batch,
            announce: settings.notify,
            direct: settings.sqlite_direct,
        }
    }
}

/// A change waiting for its writer, the timeline of the task that made it (its jobs are
/// scheduled on it), and where its outcome goes.
pub(super) struct Pending {
    pub change: Change,
    pub timeline: Timeline,
    pub reply: oneshot::Sender<Outcome>,
}

/// Where changes wait for the writers: most on the queue every writer takes from, a
/// [`Change::serial`] one on the first writer's own.
#[derive(Clone)]
pub(super) struct Queues {
    any: mpsc::UnboundedSender<Pending>,
    serial: mpsc::UnboundedSender<Pending>,
}

impl Queues {
    /// `Err` when the writers have stopped.
    pub(super) fn send(&self, pending: Pending) -> Result<(), ()> {
        let queue = match pending.change.serial {
            true => &self.serial,
            false => &self.any,
        };
        queue.send(pending).map_err(drop)
    }
}

/// Starts the writers on threads of their own (a connection a writer opens is bound to its
/// runtime, which lives as long as the channel does) and returns their queues. They stop when
/// the last sender is dropped.
pub(super) fn start(conn: DatabaseConnection, writers: Writers) -> std::io::Result<Queues> {
    let (tx, rx) = mpsc::unbounded_channel();
    let rx = Arc::new(Mutex::new(rx));
    let (serial_tx, serial_rx) = mpsc::unbounded_channel();
    let mut serial_rx = Some(serial_rx);
    let announce = writers.announce && conn.get_database_backend() == DbBackend::Postgres;
    let direct = (writers.direct && conn.get_database_backend() == DbBackend::Sqlite)
        .then(|| conn.get_sqlite_connection_pool().clone());
    let w = Writer {
        conn,
        announce,
        direct,
        busy: Arc::default(),
        done: Arc::default(),
    };
    for i in 0..writers.count.max(1) {
        let queues = Taken {
            any: rx.clone(),
            serial: serial_rx.take(),
        };
        let w = w.clone();
        std::thread::Builder::new()
            .name(format!("payd-writer-{i}"))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("a writer's runtime");
                runtime.block_on(run(w, queues, writers.max_batch.max(1)));
            })?;
    }
    Ok(Queues {
        any: tx,
        serial: serial_tx,
    })
}

/// The queues a writer takes from: the common one, and (the first writer) the serial one.
struct Taken {
    any: Arc<Mutex<mpsc::UnboundedReceiver<Pending>>>,
    serial: Option<mpsc::UnboundedReceiver<Pending>>,
}

/// The common queue, held by the writer taking from it.
type Common<'q> = tokio::sync::MutexGuard<'q, mpsc::UnboundedReceiver<Pending>>;

/// The next change of either queue, with the common queue when this writer holds it (the first
/// writer takes a serial change without waiting for the common queue, which another writer may
/// be holding); `None` once the senders are gone.
async fn next<'q>(
    serial: &mut Option<mpsc::UnboundedReceiver<Pending>>,
    any: &'q Mutex<mpsc::UnboundedReceiver<Pending>>,
) -> Option<(Pending, Option<Common<'q>>)> {
    let Some(serial) = serial else {
        let mut any = any.lock().await;
        return any.recv().await.map(|p| (p, Some(any)));
    };
    let mut common = tokio::select! {
        biased;
        Some(p) = serial.recv() => return Some((p, any.try_lock().ok())),
        common = any.lock() => common,
    };
    let next = tokio::select! {
        biased;
        Some(p) = serial.recv() => Some(p),
        p = common.recv() => p,
    };
    next.map(|p| (p, Some(common)))
}

/// What a writer writes with.
#[derive(Clone)]
struct Writer {
    conn: DatabaseConnection,
    /// `NOTIFY` when a transaction queued deliveries (PostgreSQL, `database.notify`).
    announce: bool,
    /// SQLite with `database.sqlite_direct`: the pool whose connection a transaction holds
    /// and runs on this thread (`direct.rs`).
    direct: Option<SqlitePool>,
    /// How many writers are writing a batch now.
    busy: Arc<AtomicUsize>,
    /// Told when a writer's batch is written.
    done: Arc<Notify>,
}

/// How many waiting changes make a writer start a transaction beside one already running.
const SPILL: usize = 4;

/// How often a writer gathering changes beside a running transaction looks at the queue, and
/// how many times at most before it writes what it has.
const GATHER_TICK: Duration = Duration::from_millis(1);
const GATHER_TICKS: u32 = 10;

async fn run(w: Writer, mut queues: Taken, max_batch: usize) {
    loop {
        let (batch, writing) = {
            let Some((first, mut any)) = next(&mut queues.serial, &queues.any).await else {
                return;
            };
            let mut batch = vec![first];
            // Another writer is mid-transaction and few changes wait: gather until it ends
            // (the queues are looked at again then, or each `GATHER_TICK`, not at each
            // arrival), for `GATHER_TICKS` at most: a transaction that hangs (a lost
            // connection) holds no change back for long.
            for _ in 0..GATHER_TICKS {
                let serial = queues.serial.as_ref().map_or(0, |s| s.len());
                let waiting = batch.len() + any.as_ref().map_or(0, |q| q.len()) + serial;
                if w.busy.load(Ordering::Acquire) == 0 || waiting >= SPILL.min(max_batch) {
                    break;
                }
                tokio::select! {
                    _ = w.done.notified() => break,
                    _ = tokio::time::sleep(GATHER_TICK) => {}
                }
            }
            if let Some(serial) = &mut queues.serial {
                take_waiting(serial, &mut batch, max_batch);
            }
            if let Some(any) = &mut any {
                take_waiting(any, &mut batch, max_batch);
            }
            // Counted before the common queue is let go: the next writer to look sees it.
            (batch, Writing::start(&w))
        };
        let started = Instant::now();
        let size = batch.len();
        let (changes, replies): (Vec<_>, Vec<_>) = batch
            .into_iter()
            .map(|p| ((p.change, p.timeline), p.reply))
            .unzip();
        let outcomes = write_batch(&w, &changes).await;
        metrics::histogram!("payd_commit_batch_size").record(size as f64);
        metrics::histogram!("payd_commit_batch_seconds").record(started.elapsed().as_secs_f64());
        drop(writing);
        for (reply, outcome) in replies.into_iter().zip(outcomes) {
            // A caller that went away (its request cancelled) still had its change committed.
            let _ = reply.send(outcome);
        }
    }
}

/// A writer writing a batch: counted in `busy` until dropped (also when the write panics), then
/// the writers gathering beside it are told.
struct Writing<'w>(&'w Writer);

impl<'w> Writing<'w> {
    fn start(w: &'w Writer) -> Self {
        w.busy.fetch_add(1, Ordering::AcqRel);
        Self(w)
    }
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        self.0.busy.fetch_sub(1, Ordering::AcqRel);
        // A permit when no writer gathers: the next one to gather looks at `busy` again.
        self.0.done.notify_one();
    }
}

/// Moves the changes already queued into `batch`, up to `max_batch`.
fn take_waiting(
    queue: &mut mpsc::UnboundedReceiver<Pending>,
    batch: &mut Vec<Pending>,
    max_batch: usize,
) {
    while batch.len() < max_batch {
        match queue.try_recv() {
            Ok(next) => batch.push(next),
            Err(_) => break,
        }
    }
}

/// How a batch written in one transaction ended.
enum Together {
    /// Committed; each change's outcome, in order.
    Done(Vec<Outcome>),
    /// A change failed while written plainly: rolled back, to be written again under
    /// savepoints.
    ChangeFailed,
    /// The transaction broke before its `COMMIT` and was rolled back: nothing was written.
    Broken,
    /// Its `COMMIT` failed: whether it committed is unknown.
    CommitFailed(DbErr),
}

async fn write_batch(w: &Writer, changes: &[(Change, Timeline)]) -> Vec<Outcome> {
    if let [change] = changes {
        return vec![alone(w, change).await];
    }
    let together = match write_together(w, changes, false).await {
        Together::ChangeFailed => write_together(w, changes, true).await,
        other => other,
    };
    match together {
        Together::Done(outcomes) => outcomes,
        // The database's own error, so that a database gone is a 503 for every caller.
        Together::CommitFailed(e) => changes
            .iter()
            .map(|_| Err(CommitError::Db(e.clone())))
            .collect(),
        Together::ChangeFailed | Together::Broken => {
            let mut outcomes = Vec::with_capacity(changes.len());
            for change in changes {
                outcomes.push(alone(w, change).await);
            }
            outcomes
        }
    }
}

/// How many times a change alone is written when PostgreSQL rolls it back to break a
/// deadlock with another writer's transaction.
const CONFLICT_TRIES: u32 = 3;

/// One change in a transaction of its own; written again (a few times, after a short pause)
/// when the database rolled it back for a deadlock or a serialization failure, which leaves
/// nothing of it written. Changes of many objects in one transaction can take row locks in
/// different orders: the database breaks the cycle by failing one of them.
async fn alone(w: &Writer, change: &(Change, Timeline)) -> Outcome {
    let mut tries = 1;
    loop {
        match alone_once(w, change).await {
            Err(CommitError::Db(e))
                if tries < CONFLICT_TRIES && crate::error::transaction_conflict(&e) =>
            {
                tokio::time::sleep(std::time::Duration::from_millis(5 * u64::from(tries))).await;
                tries += 1;
            }
            outcome => return outcome,
        }
    }
}

async fn alone_once(w: &Writer, change: &(Change, Timeline)) -> Outcome {
    if let Some(pool) = &w.direct {
        let mut held = Held::acquire(pool).await?;
        let txn = held.lock().await?;
        txn.begin()?;
        let committed = by_itself(&txn, change).await?;
        txn.commit()?;
        return Ok(committed);
    }
    let txn = begin(w).await?;
    match by_itself(&txn, change).await {
        Ok(committed) => {
            if w.announce && committed.deliveries > 0 {
                announce(&txn).await?;
            }
            txn.commit().await?;
            Ok(committed)
        }
        Err(e) => {
            txn.rollback().await?;
            Err(e)
        }
    }
}

async fn write_together(w: &Writer, changes: &[(Change, Timeline)], savepoints: bool) -> Together {
    if let (Some(pool), false) = (&w.direct, savepoints) {
        return held_together(pool, changes).await;
    }
    let Ok(txn) = begin(w).await else {
        return Together::Broken;
    };
    let mut outcomes = Vec::with_capacity(changes.len());
    if savepoints {
        for change in changes {
            match under_savepoint(&txn, change).await {
                Ok(outcome) => outcomes.push(outcome),
                Err(_) => return rolled_back(txn, Together::Broken).await,
            }
        }
    } else {
        match plainly(&txn, changes).await {
            Ok(written) => outcomes = written,
            Err(()) => return rolled_back(txn, Together::ChangeFailed).await,
        }
    }
    let deliveries = outcomes.iter().flatten().any(|c| c.deliveries > 0);
    if w.announce && deliveries && announce(&txn).await.is_err() {
        return rolled_back(txn, Together::Broken).await;
    }
    match txn.commit().await {
        Ok(()) => committed_together(outcomes, changes.len()),
        Err(e) => Together::CommitFailed(e),
    }
}

/// [`write_together`] without savepoints on a SQLite connection held by this thread.
async fn held_together(pool: &SqlitePool, changes: &[(Change, Timeline)]) -> Together {
    let Ok(mut held) = Held::acquire(pool).await else {
        return Together::Broken;
    };
    let Ok(txn) = held.lock().await else {
        return Together::Broken;
    };
    if txn.begin().is_err() {
        return Together::Broken;
    }
    let Ok(outcomes) = plainly(&txn, changes).await else {
        return match txn.rollback() {
            Ok(()) => Together::ChangeFailed,
            Err(_) => Together::Broken,
        };
    };
    match txn.commit() {
        Ok(()) => committed_together(outcomes, changes.len()),
        Err(e) => Together::CommitFailed(e),
    }
}

/// Every change's writes, then all their appended rows, events and jobs together; `Err` when
/// one of them failed (the transaction is to be rolled back).
async fn plainly(
    txn: &impl ConnectionTrait,
    changes: &[(Change, Timeline)],
) -> Result<Vec<Outcome>, ()> {
    let mut later = Later::default();
    for (i, change) in changes.iter().enumerate() {
        later.at(i);
        on_timeline(txn, change, &mut later).await.map_err(drop)?;
    }
    let committed = later.write(txn, changes.len()).await.map_err(drop)?;
    Ok(committed.into_iter().map(Ok).collect())
}

fn committed_together(mut outcomes: Vec<Outcome>, shared: usize) -> Together {
    crate::telemetry::database_answered();
    for committed in outcomes.iter_mut().flatten() {
        committed.shared = shared;
    }
    Together::Done(outcomes)
}

/// One change under a savepoint: its failure rolls back only what it wrote. `Err` when the
/// savepoint itself could not be made or undone (the transaction is broken).
async fn under_savepoint(
    txn: &DatabaseTransaction,
    change: &(Change, Timeline),
) -> Result<Outcome, DbErr> {
    crate::db::count_statements(2);
    let savepoint = txn.begin().await?;
    match by_itself(&savepoint, change).await {
        Ok(committed) => {
            savepoint.commit().await?;
            Ok(Ok(committed))
        }
        Err(e) => {
            savepoint.rollback().await?;
            Ok(Err(e))
        }
    }
}

/// On PostgreSQL, tells every instance's dispatcher that this transaction queued deliveries
/// (`NOTIFY`, sent at `COMMIT` and dropped with a rollback; [`crate::db::listen_for_wakes`]
/// hears it), so that another instance starts them at once; polls stay the fallback. Jobs are
/// not announced: a job due at once is the safety net of work its caller does inline, and
/// another instance's scheduler taking it at once would race that work.
async fn announce(txn: &impl ConnectionTrait) -> Result<(), DbErr> {
    txn.execute_unprepared(&format!("NOTIFY {}", db::WAKE_CHANNEL))
        .await
        .map(drop)
}

async fn rolled_back(txn: DatabaseTransaction, then: Together) -> Together {
    match txn.rollback().await {
        Ok(()) => then,
        Err(_) => Together::Broken,
    }
}

/// A writer's transaction. On SQLite it takes the write lock at `BEGIN` (`IMMEDIATE`), so
/// that a transaction that reads before it writes cannot find the database changed under it
/// by another connection's single statement (a dispatcher's or scheduler's claim): the busy
/// timeout makes it wait for the lock instead.
async fn begin(w: &Writer) -> Result<DatabaseTransaction, DbErr> {
    // `BEGIN` and the `COMMIT` or `ROLLBACK` that ends it (sea-orm's statement hook sees
    // neither).
    crate::db::count_statements(2);
    w.conn
        .begin_with_options(TransactionOptions {
            sqlite_transaction_mode: Some(SqliteTransactionMode::Immediate),
            ..Default::default()
        })
        .await
}

/// Writes a change on the timeline of the task that made it, keeping its appended rows,
/// events and jobs in `later`.
async fn on_timeline(
    txn: &impl ConnectionTrait,
    (change, timeline): &(Change, Timeline),
    later: &mut Later,
) -> Result<(), CommitError> {
    clock::scoped(timeline.clone(), write(txn, change, true, later))
        .await
        .map(drop)
}

/// Writes a change whole, its appended rows, events and jobs included.
async fn by_itself(
    txn: &impl ConnectionTrait,
    change: &(Change, Timeline),
) -> Result<Committed, CommitError> {
    let mut later = Later::default();
    on_timeline(txn, change, &mut later).await?;
    let committed = later.write(txn, 1).await?;
    Ok(committed[0])
}

//! What nearly every request reads and rarely changes, kept per process: an API key by its
//! hash (with its merchant's test-clock offset, `AppState::keys`), and a shop's processor
//! accounts with its routing rules (`PaymentDeps::routing`). In the steady state a payment
//! reads neither.
//!
//! **How a change reaches every instance.** A change to a cached row (a key revoked, a test
//! clock advanced, an account added or approved, routing rules put, a master key rotated)
//! adds one to `lookup_generation` in its own transaction ([`bump`]). Each instance reads that
//! count every quarter of the staleness bound ([`Generation::watch`]) and drops its caches when
//! it moved. A cache is used only while the instance's last read of the count *began* within
//! the bound: so at `commit + bound`, every instance that answers from its cache has read the
//! count after the commit, and a slow or failing read of the count makes requests read the
//! database again rather than trust an old cache. The route that made the change drops its own
//! instance's caches at once and answers only after the bound ([`Generation::changed`]): when
//! its answer arrives, the change is in force on every instance.
//!
//! Dropping is an epoch: every entry carries the epoch its read *began* in and answers only in
//! that epoch, so a read that began before a change never answers after it.
//!
//! Not PostgreSQL's `LISTEN`: a notification lost with a dropped connection would leave no
//! bound, while the count read every quarter bound costs one single-row read per instance on
//! both databases and bounds every case.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use dashmap::DashMap;
use payd_entity::lookup_generation;
use sea_orm::{
    sea_query::{Expr, ExprTrait, Query, UpdateStatement},
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait,
};

use crate::commit::{Db, Write};

/// Entries a cache holds at most (reaching it empties the cache).
const CAPACITY: usize = 100_000;

/// This instance's reading of `lookup_generation`: when the caches may be trusted, and their
/// epoch.
pub struct Generation {
    /// How stale an entry may be on another instance; zero turns caching off.
    bound: Duration,
    /// The instant the confirmations count from.
    start: Instant,
    /// When the last read of the count that confirmed the caches began: nanoseconds after
    /// `start`, plus one (0: never).
    confirmed: AtomicU64,
    /// Moves with every drop of the caches.
    epoch: AtomicU64,
    /// The count last read.
    seen: Mutex<Option<i64>>,
}

impl Generation {
    pub fn new(bound: Duration) -> Arc<Self> {
        Arc::new(Self {
            bound,
            start: Instant::now(),
            confirmed: AtomicU64::new(0),
            epoch: AtomicU64::new(0),
            seen: Mutex::new(None),
        })
    }

    /// The epoch to tag a read with, when the caches may be used now.
    fn trusted(&self) -> Option<u64> {
        // The confirmation first: a confirmation after a drop is stored after its epoch.
        let confirmed = self.confirmed.load(SeqCst).checked_sub(1)?;
        let epoch = self.epoch.load(SeqCst);
        let age = self.since_start().saturating_sub(confirmed);
        (!self.bound.is_zero() && age < self.bound.as_nanos() as u64).then_some(epoch)
    }

    fn since_start(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }

    /// Reads the count once: drops the caches if it moved, and trusts them for another bound
    /// from when the read began.
    pub async fn check(&self, db: &impl ConnectionTrait) -> Result<(), DbErr> {
        let began = self.since_start();
        let generation = lookup_generation::Entity::find_by_id(1)
            .one(db)
            .await?
            .map_or(0, |row| row.generation);
        let mut seen = self.seen.lock().unwrap_or_else(|e| e.into_inner());
        if *seen != Some(generation) {
            self.epoch.fetch_add(1, SeqCst);
            *seen = Some(generation);
        }
        self.confirmed.fetch_max(began + 1, SeqCst);
        Ok(())
    }

    /// Reads the count every quarter of the bound until the task is dropped. A failed read is
    /// logged; the caches go untrusted once the bound passes without a read.
    pub async fn watch(self: Arc<Self>, db: Db) {
        if self.bound.is_zero() {
            return;
        }
        let mut every = tokio::time::interval(self.bound / 4);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            every.tick().await;
            if let Err(e) = self.check(&db).await {
                tracing::warn!(error = %e, "reading the lookup generation failed; cached keys and routing go unused until it answers");
            }
        }
    }

    /// After a committed change that [`bump`]ed the count: drops this instance's caches now,
    /// and returns once every other instance has dropped its own or stopped trusting them.
    pub async fn changed(&self) {
        self.epoch.fetch_add(1, SeqCst);
        tokio::time::sleep(self.bound).await;
    }
}

/// A key found by its hash, with what a request on it needs of its merchant (read in the same
/// query).
#[derive(Debug)]
pub struct FoundKey {
    pub key: payd_entity::api_key::Model,
    /// Seconds the merchant's sandbox test clock is ahead: every request on a sandbox key runs
    /// on that clock.
    pub clock_offset: i64,
    /// The operator suspended the merchant: its keys are refused.
    pub suspended: bool,
}

/// One lookup's cache, keyed by a string, trusted as its [`Generation`] says. Its clones
/// share the entries.
pub struct Cache<V> {
    /// `lookup` in `payd_lookups_total{lookup, outcome}`.
    name: &'static str,
    entries: Arc<DashMap<String, (u64, Arc<V>)>>,
    generation: Arc<Generation>,
}

impl<V> Clone for Cache<V> {
    fn clone(&self) -> Self {
        Self {
            name: self.name,
            entries: self.entries.clone(),
            generation: self.generation.clone(),
        }
    }
}

impl<V> Cache<V> {
    pub fn new(name: &'static str, generation: &Arc<Generation>) -> Self {
        Self {
            name,
            entries: Arc::default(),
            generation: generation.clone(),
        }
    }

    /// What `key` names: from the cache when it may be trusted, else what `read` finds (kept
    /// when it found something).
    pub async fn get_or_read<E>(
        &self,
        key: &str,
        read: impl Future<Output = Result<Option<V>, E>>,
    ) -> Result<Option<Arc<V>>, E> {
        let epoch = self.generation.trusted();
        if let Some(epoch) = epoch {
            if let Some(hit) = self.entries.get(key).filter(|e| e.0 == epoch) {
                self.count("hit");
                return Ok(Some(hit.1.clone()));
            }
        }
        self.count("miss");
        let Some(found) = read.await? else {
            return Ok(None);
        };
        let found = Arc::new(found);
        if let Some(epoch) = epoch {
            if self.entries.len() >= CAPACITY {
                self.entries.clear();
            }
            self.entries.insert(key.to_owned(), (epoch, found.clone()));
        }
        Ok(Some(found))
    }

    fn count(&self, outcome: &'static str) {
        metrics::counter!("payd_lookups_total", "lookup" => self.name, "outcome" => outcome)
            .increment(1);
    }
}

/// The write that tells every instance a cached row changed: part of the change's commit.
pub fn bump() -> Write {
    Write::Update(bump_statement())
}

/// [`bump`] as a statement, for a write made outside a [`crate::commit::Change`].
pub fn bump_statement() -> UpdateStatement {
    Query::update()
        .table(lookup_generation::Entity)
        .value(
            lookup_generation::Column::Generation,
            Expr::col(lookup_generation::Column::Generation).add(1),
        )
        .and_where(lookup_generation::Column::Id.eq(1))
        .to_owned()
}

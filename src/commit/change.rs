//! What a change is — the writes, events and jobs of one state change — and how one is written
//! inside a transaction ([`write`]). [`super::commit`] decides which transaction.

use chrono::{DateTime, Utc};
use sea_orm::{
    sea_query::{DeleteStatement, InsertStatement, OnConflict, SelectStatement, UpdateStatement},
    ActiveModelTrait, ConnectionTrait, DbErr, EntityTrait, IntoActiveModel, QueryTrait, Statement,
};

use serde_json::Value::Null;
use std::future::Future;

use super::later::{Later, Row};
use crate::{
    conflict::Conflict,
    outbox::{self, NewEvent},
    scheduler::{self, JobWrite},
};

/// One statement of a change, in the order written.
#[derive(Debug, Clone)]
pub enum Write {
    /// An update under a version compare-and-set: it must touch exactly one row, or the
    /// whole change is a lost race.
    Cas(UpdateStatement),
    /// An insert: history, attempts, child objects. With `ON CONFLICT DO NOTHING` or an
    /// `INSERT … SELECT`, it may add nothing.
    Insert(InsertStatement),
    /// A row nothing in its transaction reads or refers to (history, attempts, ledger
    /// entries), or whose absence a reader may only see as an earlier moment (a credit's
    /// balance delta: see `ledger::store::writes`): written after every change of the
    /// transaction, with the other changes' rows of its table, as one multi-row `INSERT`
    /// (`later.rs`). It may refer only to rows written before it.
    Append(Row),
    /// An insert with `ON CONFLICT DO NOTHING` that must add its row: none added means
    /// another writer took its key first, and the whole change is a lost race.
    InsertNew(InsertStatement),
    /// An update whose row count does not matter (a default set only if none is).
    Update(UpdateStatement),
    Delete(DeleteStatement),
    /// A statement written for one database, where sea-query cannot say it for both (a
    /// `DELETE … RETURNING` inside a `WITH` on PostgreSQL); its row count does not matter.
    Raw(Statement),
    /// A condition the change needs: the query must find a row (`exists`) or none; if it
    /// does not hold, the change is refused with `refusal`.
    Require {
        query: SelectStatement,
        exists: bool,
        refusal: Conflict,
    },
}

/// An event to record through the outbox. `object` is the object's JSON as the API renders
/// it.
#[derive(Debug, Clone)]
pub struct Event {
    pub merchant_id: crate::ids::MerchantId,
    pub profile_id: Option<crate::ids::ProfileId>,
    pub test_mode: bool,
    pub event_type: String,
    pub object_id: String,
    /// `payment_details`, `refund_details`, …
    pub content_type: &'static str,
    pub object: String,
}

/// A change to the scheduled jobs of one entity.
#[derive(Debug, Clone)]
pub enum Job {
    /// Due at `at` (replacing the job of this kind, if any, and its lease).
    Schedule {
        kind: &'static str,
        entity_id: String,
        at: DateTime<Utc>,
    },
    /// Due at `at`, unless a job of this kind exists already.
    ScheduleIfAbsent {
        kind: &'static str,
        entity_id: String,
        at: DateTime<Utc>,
    },
    Cancel {
        kinds: Vec<&'static str>,
        entity_id: String,
    },
}

/// Everything one state change writes. Built from `Change::at`: a change always has its time.
#[derive(Debug, Clone)]
pub struct Change {
    pub writes: Vec<Write>,
    pub events: Vec<Event>,
    pub jobs: Vec<Job>,
    /// Parts written only when their first write touches a row; otherwise skipped whole
    /// (a mandate for a saved card whose customer was deleted meanwhile: none of it). They are
    /// written after `writes` and before `events` and `jobs`.
    pub optional: Vec<Change>,
    /// The time the change is made at (its events and jobs carry it).
    pub at: DateTime<Utc>,
    /// It takes a lock row that changes of its kind all take (a payout's reservation takes
    /// its shop's): written by one writer only, so that payd's writers never wait for each
    /// other's lock (`group.rs`).
    pub serial: bool,
}

impl Change {
    pub fn at(at: DateTime<Utc>) -> Self {
        Self {
            writes: Vec::new(),
            events: Vec::new(),
            jobs: Vec::new(),
            optional: Vec::new(),
            at,
            serial: false,
        }
    }

    /// Written by the one writer that writes every change taking a contended lock row.
    pub fn serialized(mut self) -> Self {
        self.serial = true;
        self
    }

    pub fn write(mut self, w: Write) -> Self {
        self.writes.push(w);
        self
    }

    pub fn event(mut self, e: Event) -> Self {
        self.events.push(e);
        self
    }

    pub fn job(mut self, j: Job) -> Self {
        self.jobs.push(j);
        self
    }

    /// Appends another change's parts (written in the same transaction, after these).
    /// Adds these writes, in order.
    pub fn write_all(mut self, writes: impl IntoIterator<Item = Write>) -> Self {
        for w in writes {
            self = self.write(w);
        }
        self
    }

    pub fn and(mut self, other: Change) -> Self {
        self.writes.extend(other.writes);
        self.events.extend(other.events);
        self.jobs.extend(other.jobs);
        self.optional.extend(other.optional);
        self.serial |= other.serial;
        self
    }
}

#[derive(Debug, thiserror::Error)]
pub enum CommitError {
    #[error("another writer changed the object first")]
    LostRace,
    /// A [`Write::Require`] did not hold: nothing of the change was written.
    #[error("refused: {0}")]
    Refused(Conflict),
    #[error(transparent)]
    Db(#[from] DbErr),
}

/// `Ok(None)` for a lost race (worth reading again and another try), else the result.
pub fn or_retry<T>(r: Result<T, CommitError>) -> Result<Option<T>, CommitError> {
    match r {
        Err(CommitError::LostRace) => Ok(None),
        other => other.map(Some),
    }
}

/// Read, decide, commit — and again from the read when another writer got there first
/// (`attempt` answers `None`), up to `tries` times; then a lost race. The one retry loop of
/// the compare-and-set writes made outside an actor.
pub async fn retrying<T, E, Fut>(tries: usize, mut attempt: impl FnMut() -> Fut) -> Result<T, E>
where
    E: From<CommitError>,
    Fut: Future<Output = Result<Option<T>, E>>,
{
    for _ in 0..tries {
        if let Some(done) = attempt().await? {
            return Ok(done);
        }
    }
    Err(CommitError::LostRace.into())
}

/// A row written under a version compare-and-set.
pub trait Versioned {
    fn version(&self) -> i64;
}

impl Versioned for payd_entity::payment::Model {
    fn version(&self) -> i64 {
        self.version
    }
}

impl Versioned for payd_entity::dispute::Model {
    fn version(&self) -> i64 {
        self.version
    }
}

impl Versioned for payd_entity::payout::Model {
    fn version(&self) -> i64 {
        self.version
    }
}

impl Versioned for payd_entity::invoice::Model {
    fn version(&self) -> i64 {
        self.version
    }
}

/// An actor's decision on its cached copy of a row, made again once on the stored row when
/// the copy may have been stale (another instance wrote meanwhile): `stale` tells an answer
/// that may come from a stale copy (a lost race, or an answer decided without writing, such
/// as a refusal or a no-op); the row is then read again (`reload`; gone: `gone()`), and if
/// its version moved the decision is made again on it. Returns the latest row known (for the
/// actor's cache: the written one, `written`, after a write) and the answer. The one
/// re-decide rule of every actor kind.
pub async fn decide_fresh<M, T, E>(
    current: M,
    mut decide: impl AsyncFnMut(&M) -> Result<T, E>,
    stale: impl Fn(&Result<T, E>, &M) -> bool,
    reload: impl AsyncFnOnce(&M) -> Result<Option<M>, E>,
    written: impl Fn(&T) -> &M,
    gone: impl FnOnce() -> E,
) -> (M, Result<T, E>)
where
    M: Versioned + Clone,
{
    let finish = |current: M, result: Result<T, E>| match result {
        Ok(done) => (written(&done).clone(), Ok(done)),
        Err(e) => (current, Err(e)),
    };
    let result = decide(&current).await;
    if !stale(&result, &current) {
        return finish(current, result);
    }
    match reload(&current).await {
        Ok(Some(fresh)) if fresh.version() != current.version() => {
            let result = decide(&fresh).await;
            finish(fresh, result)
        }
        Ok(Some(_)) => finish(current, result),
        Ok(None) => (current, Err(gone())),
        Err(e) => (current, Err(e)),
    }
}

/// The insert of a whole row (every column set).
pub fn insert<M, A>(row: M) -> Write
where
    M: IntoActiveModel<A>,
    A: ActiveModelTrait,
{
    Write::Insert(A::Entity::insert(row.into_active_model().reset_all()).into_query())
}

/// Keeps an owner (a merchant) within a bound on what a change adds to it: `lock` updates the
/// owner's row, so that the changes adding to one owner follow one another on PostgreSQL
/// (SQLite has one writer), and `within` — written after the change's own rows, over the
/// owner's rows with a `HAVING` that holds inside the bound — must find its row, or the whole
/// change is refused as [`Conflict::Bound`] naming the bound's `setting` and its `max`.
pub fn bounded(
    lock: UpdateStatement,
    within: SelectStatement,
    setting: &'static str,
    max: u64,
) -> [Write; 2] {
    [
        Write::Update(lock),
        Write::Require {
            query: within,
            exists: true,
            refusal: Conflict::Bound { setting, max },
        },
    ]
}

/// The append of a whole row (every column set): see [`Write::Append`].
pub fn append<M, A>(row: M) -> Write
where
    M: IntoActiveModel<A>,
    A: ActiveModelTrait,
{
    Write::Append(Row::of(row, None))
}

/// The append of a whole row with a conflict clause (an upsert); `name` names the clause, and
/// rows appended under one name must share it.
pub fn append_upsert<M, A>(row: M, name: &'static str, conflict: OnConflict) -> Write
where
    M: IntoActiveModel<A>,
    A: ActiveModelTrait,
{
    Write::Append(Row::of(row, Some((name, conflict))))
}

/// Writes one change inside `txn`, keeping its appended rows, events and jobs in `later`;
/// `false` when it is optional and its first write touched nothing (then nothing of it was
/// written).
pub(super) async fn write(
    txn: &impl ConnectionTrait,
    change: &Change,
    required: bool,
    later: &mut Later,
) -> Result<bool, CommitError> {
    for (i, w) in change.writes.iter().enumerate() {
        let touched = match w {
            // The first write of an optional part decides whether it is written: at once.
            Write::Append(row) if i == 0 && !required => {
                txn.execute(&row.statement()).await?.rows_affected()
            }
            Write::Append(row) => {
                later.row(row.clone());
                1
            }
            Write::Cas(stmt) => {
                if txn.execute(stmt).await?.rows_affected() != 1 {
                    return Err(CommitError::LostRace);
                }
                1
            }
            Write::InsertNew(stmt) => {
                if txn.execute(stmt).await?.rows_affected() != 1 {
                    return Err(CommitError::LostRace);
                }
                1
            }
            Write::Insert(stmt) => txn.execute(stmt).await?.rows_affected(),
            Write::Update(stmt) => txn.execute(stmt).await?.rows_affected(),
            Write::Delete(stmt) => txn.execute(stmt).await?.rows_affected(),
            Write::Raw(stmt) => txn.execute_raw(stmt.clone()).await?.rows_affected(),
            Write::Require {
                query,
                exists,
                refusal,
            } => {
                if txn.query_one(query).await?.is_some() != *exists {
                    return Err(CommitError::Refused(*refusal));
                }
                1
            }
        };
        if i == 0 && touched == 0 && !required {
            return Ok(false);
        }
    }
    let at = change.at;
    // Optional parts before this change's own events, so that their events come first (a
    // saved card's `mandate_active` before the `payment_succeeded` of the charge that made it).
    for part in &change.optional {
        Box::pin(write(txn, part, false, later)).await?;
    }
    // Events are stamped on the change's timeline (a sandbox merchant's test clock); their
    // deliveries are due in base time, which the dispatcher keeps: at once.
    let send_at = at - chrono::Duration::seconds(crate::clock::current().offset_seconds);
    for e in &change.events {
        later.event(
            outbox::row(
                NewEvent {
                    merchant_id: &e.merchant_id,
                    profile_id: e.profile_id.as_ref(),
                    test_mode: e.test_mode,
                    event_type: &e.event_type,
                    object_id: &e.object_id,
                    content_type: e.content_type,
                    object: e.object.clone(),
                },
                at,
            )?,
            send_at,
        );
    }
    // Job rows are made here, on the timeline of the task that made the change.
    for j in &change.jobs {
        later.job(match j {
            Job::Schedule {
                kind,
                entity_id,
                at: due,
            } => JobWrite::Schedule(scheduler::row(at, kind, entity_id, *due, Null)),
            Job::ScheduleIfAbsent {
                kind,
                entity_id,
                at: due,
            } => JobWrite::IfAbsent(scheduler::row(at, kind, entity_id, *due, Null)),
            Job::Cancel { kinds, entity_id } => JobWrite::Cancel {
                kinds: kinds.clone(),
                entity_id: entity_id.clone(),
            },
        });
    }
    Ok(true)
}

//! The persisted scheduler: due work (expiries, deadlines, renewals, retries) lives in the
//! `scheduled_jobs` table, one row per (kind, entity), so a restart or a second instance
//! loses none of it. Instances claim due rows with a lease (`FOR UPDATE SKIP LOCKED` on
//! PostgreSQL; SQLite has one writer), run the kind's handler, then delete, move or retry
//! the row. A job whose instance died is claimed again once its lease has run out.

use std::{collections::HashMap, sync::Arc, time::Duration as StdDuration};

use chrono::{DateTime, Duration, Utc};
use futures_util::future::LocalBoxFuture;
use payd_entity::scheduled_job::{self, Entity as Jobs};
use sea_orm::{
    sea_query::{Expr, ExprTrait, LockBehavior, LockType, OnConflict, Query},
    ActiveValue::Set,
    ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, QueryFilter,
};
use tokio::sync::Notify;

use crate::{
    clock::{self, SharedClock, Timeline},
    ids::new_id,
    settings::SchedulerSettings,
};

/// A claimed job, as its handler sees it.
#[derive(Debug, Clone)]
pub struct Job {
    pub kind: String,
    pub entity_id: String,
    pub due_at: DateTime<Utc>,
    pub payload: serde_json::Value,
    /// How many times it has been claimed, this time included.
    pub attempt: i32,
}

/// What a handler says about the job it ran.
#[derive(Debug)]
pub enum Outcome {
    /// Finished: the row is deleted.
    Done,
    /// Run again at this time (recurring work).
    RunAt(DateTime<Utc>),
    /// Failed: retried with exponential backoff.
    Failed(String),
}

/// Runs one kind of job. Its future runs on the scheduler's own (local) task, so it may
/// talk to actors, whose `send` futures are not `Send`.
pub trait JobHandler: Send + Sync + 'static {
    fn run(&self, job: Job) -> LocalBoxFuture<'static, Outcome>;
}

impl<F, Fut> JobHandler for F
where
    F: Fn(Job) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Outcome> + 'static,
{
    fn run(&self, job: Job) -> LocalBoxFuture<'static, Outcome> {
        Box::pin(self(job))
    }
}

/// One round of periodic work, run for the time read once before it starts, and the next
/// round asked for `every` after that time. Read again after the work, the clock may have
/// jumped meanwhile (a test clock's `set`): the next round would be due only `every` after
/// the jump, and the work owed at the jumped-to time would be skipped.
async fn periodic<Fut, E>(
    clock: &SharedClock,
    every: Duration,
    work: impl FnOnce(DateTime<Utc>) -> Fut,
) -> Outcome
where
    Fut: std::future::Future<Output = Result<(), E>>,
    E: std::fmt::Display,
{
    let now = clock.now();
    match work(now).await {
        Ok(()) => Outcome::RunAt(now + every),
        Err(e) => Outcome::Failed(e.to_string()),
    }
}

/// The row of a job due at `due_at`, on the running task's timeline: a sandbox merchant's job
/// is tagged with the merchant and kept in base time, so it moves when that merchant's test
/// clock does. The commit path writes it ([`write_jobs`]).
pub fn row(
    now: DateTime<Utc>,
    kind: &str,
    entity_id: &str,
    due_at: DateTime<Utc>,
    payload: serde_json::Value,
) -> scheduled_job::ActiveModel {
    let timeline = clock::current();
    scheduled_job::ActiveModel {
        id: Set(new_id("job")),
        kind: Set(kind.to_owned()),
        entity_id: Set(entity_id.to_owned()),
        due_at: Set(due_at - Duration::seconds(timeline.offset_seconds)),
        merchant_id: Set(timeline.merchant.map(|m| m.to_string())),
        payload: Set(payload.to_string()),
        attempts: Set(0),
        last_error: Set(None),
        lease_owner: Set(None),
        lease_until: Set(None),
        created_at: Set(now),
    }
}

/// A change to the scheduled jobs, written with the state change that makes it.
#[derive(Debug, Clone)]
pub enum JobWrite {
    /// Schedules (or moves) the job of the row's kind for its entity.
    Schedule(scheduled_job::ActiveModel),
    /// Schedules the job unless one of its kind already exists for the entity.
    IfAbsent(scheduled_job::ActiveModel),
    /// Removes the entity's jobs of these kinds, if any.
    Cancel {
        kinds: Vec<&'static str>,
        entity_id: String,
    },
}

impl JobWrite {
    /// The (kind, entity) of each job it writes.
    fn keys(&self) -> Vec<(&str, &str)> {
        fn key(row: &scheduled_job::ActiveModel) -> Vec<(&str, &str)> {
            match (&row.kind, &row.entity_id) {
                (Set(kind), Set(entity_id)) => vec![(kind.as_str(), entity_id.as_str())],
                _ => Vec::new(),
            }
        }
        match self {
            JobWrite::Schedule(row) | JobWrite::IfAbsent(row) => key(row),
            JobWrite::Cancel { kinds, entity_id } => {
                kinds.iter().map(|k| (*k, entity_id.as_str())).collect()
            }
        }
    }
}

/// On a (kind, entity) conflict, a schedule moves the job.
fn moved() -> OnConflict {
    OnConflict::columns([scheduled_job::Column::Kind, scheduled_job::Column::EntityId])
        .update_columns([
            scheduled_job::Column::DueAt,
            scheduled_job::Column::MerchantId,
            scheduled_job::Column::Payload,
            scheduled_job::Column::Attempts,
            scheduled_job::Column::LastError,
            // The lease's end stays: a job rescheduled by its own running handler is not
            // claimed again until that handler has finished (or its lease run out), so one
            // job never runs twice at once.
            scheduled_job::Column::LeaseOwner,
        ])
        .to_owned()
}

/// On a (kind, entity) conflict, a schedule-if-absent leaves the job there is.
fn kept() -> OnConflict {
    OnConflict::columns([scheduled_job::Column::Kind, scheduled_job::Column::EntityId])
        .do_nothing()
        .to_owned()
}

/// Writes job changes as if one after the other, in at most three statements when no two of
/// them touch the same job (a schedule, a schedule-if-absent and a cancel of one job depend on
/// their order; then they are written one by one, in order). Pass the transaction that makes
/// the state change, so the jobs exist exactly when the change does.
pub async fn write_jobs(db: &impl ConnectionTrait, jobs: &[JobWrite]) -> Result<(), DbErr> {
    let mut keys = std::collections::HashSet::new();
    let apart = jobs.iter().flat_map(JobWrite::keys).all(|k| keys.insert(k));
    if !apart {
        for job in jobs {
            write_together(db, std::slice::from_ref(job)).await?;
        }
        return Ok(());
    }
    write_together(db, jobs).await
}

/// Writes job changes that touch different jobs, a statement per kind of change.
async fn write_together(db: &impl ConnectionTrait, jobs: &[JobWrite]) -> Result<(), DbErr> {
    let (mut schedules, mut if_absent, mut cancels) = (Vec::new(), Vec::new(), Vec::new());
    for job in jobs {
        match job {
            JobWrite::Schedule(row) => schedules.push(row.clone()),
            JobWrite::IfAbsent(row) => if_absent.push(row.clone()),
            JobWrite::Cancel { kinds, entity_id } if !kinds.is_empty() => cancels.push(
                Condition::all()
                    .add(scheduled_job::Column::EntityId.eq(entity_id.as_str()))
                    .add(scheduled_job::Column::Kind.is_in(kinds.iter().copied())),
            ),
            JobWrite::Cancel { .. } => {}
        }
    }
    crate::db::insert_rows(db, &schedules, Some(&moved())).await?;
    crate::db::insert_rows(db, &if_absent, Some(&kept())).await?;
    if !cancels.is_empty() {
        let any = cancels.into_iter().fold(Condition::any(), Condition::add);
        Jobs::delete_many().filter(any).exec(db).await?;
    }
    Ok(())
}

/// Schedules (or moves) the job of this kind for this entity.
pub async fn schedule(
    db: &impl ConnectionTrait,
    now: DateTime<Utc>,
    kind: &str,
    entity_id: &str,
    due_at: DateTime<Utc>,
    payload: serde_json::Value,
) -> Result<(), DbErr> {
    let row = row(now, kind, entity_id, due_at, payload);
    write_jobs(db, &[JobWrite::Schedule(row)]).await
}

/// Schedules the job unless one of this kind already exists for the entity.
pub async fn schedule_if_absent(
    db: &impl ConnectionTrait,
    now: DateTime<Utc>,
    kind: &str,
    entity_id: &str,
    due_at: DateTime<Utc>,
) -> Result<(), DbErr> {
    let row = row(now, kind, entity_id, due_at, serde_json::Value::Null);
    write_jobs(db, &[JobWrite::IfAbsent(row)]).await
}

/// Removes the job of this kind for this entity, if any.
pub async fn cancel(
    db: &impl ConnectionTrait,
    kind: &'static str,
    entity_id: &str,
) -> Result<(), DbErr> {
    let cancel = JobWrite::Cancel {
        kinds: vec![kind],
        entity_id: entity_id.to_owned(),
    };
    write_jobs(db, &[cancel]).await
}

/// The `outcome` labels of `payd_scheduler_jobs_total`: done, run again later, failed.
const OUTCOMES: [&str; 3] = ["done", "rescheduled", "failed"];

/// Claims and runs due jobs.
pub struct Scheduler {
    db: sea_orm::DatabaseConnection,
    clock: SharedClock,
    settings: SchedulerSettings,
    handlers: HashMap<&'static str, Arc<dyn JobHandler>>,
    /// The periodic kinds: each has one job (entity `all`), scheduled by `start_periodic`.
    periodic: Vec<&'static str>,
    wake: Notify,
}

impl Scheduler {
    pub fn new(
        db: sea_orm::DatabaseConnection,
        clock: SharedClock,
        settings: SchedulerSettings,
    ) -> Self {
        metrics::gauge!("payd_scheduler_lag_seconds").set(0.0);
        Self {
            db,
            clock,
            settings,
            handlers: HashMap::new(),
            periodic: Vec::new(),
            wake: Notify::new(),
        }
    }

    pub fn register(&mut self, kind: &'static str, handler: impl JobHandler) {
        for outcome in OUTCOMES {
            metrics::counter!("payd_scheduler_jobs_total", "kind" => kind, "outcome" => outcome)
                .increment(0);
        }
        self.handlers.insert(kind, Arc::new(handler));
    }

    /// Schedules the first run of each periodic kind, now, unless one is already scheduled
    /// (by an earlier start or another instance).
    pub async fn start_periodic(&self) -> Result<(), DbErr> {
        let now = self.clock.now();
        for kind in &self.periodic {
            schedule_if_absent(&self.db, now, kind, "all", now).await?;
        }
        Ok(())
    }

    /// Registers a deployment-wide kind that runs every `every`: each run does `work` for the
    /// time read once before it starts, and the next is due `every` after that time.
    pub fn register_periodic<F, Fut, E>(&mut self, kind: &'static str, every: Duration, work: F)
    where
        F: Fn(DateTime<Utc>) -> Fut + Send + Sync + 'static,
        Fut: std::future::Future<Output = Result<(), E>> + 'static,
        E: std::fmt::Display,
    {
        self.periodic.push(kind);
        let (clock, work) = (self.clock.clone(), Arc::new(work));
        self.register(kind, move |_job| {
            let (clock, work) = (clock.clone(), work.clone());
            async move { periodic(&clock, every, |now| work(now)).await }
        });
    }

    /// Makes the loop look for due work now instead of at its next poll.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    /// Claims the jobs due now (up to a batch), runs them one by one, and returns how many ran.
    pub async fn tick(&self) -> Result<usize, DbErr> {
        self.tick_of(None).await
    }

    /// [`Scheduler::tick`] for one sandbox merchant's jobs only (a test clock's advance).
    pub async fn tick_merchant(
        &self,
        merchant_id: &crate::ids::MerchantId,
    ) -> Result<usize, DbErr> {
        // A job's merchant is a text column still (docs/dev/typed-rows-worklist.md §1c).
        self.tick_of(Some(merchant_id.as_str())).await
    }

    async fn tick_of(&self, merchant_id: Option<&str>) -> Result<usize, DbErr> {
        let now = self.clock.base();
        let claimed = self.claim(now, merchant_id).await?;
        let lag = claimed
            .iter()
            .map(|j| Ord::max((now - j.due_at).num_milliseconds(), 0))
            .max()
            .unwrap_or(0);
        metrics::gauge!("payd_scheduler_lag_seconds").set(lag as f64 / 1000.0);
        let count = claimed.len();
        let offsets = self.offsets(&claimed).await?;
        for row in claimed {
            let timeline = match &row.merchant_id {
                Some(m) => Timeline::of(m, offsets.get(m).copied().unwrap_or(0)),
                None => Timeline::default(),
            };
            clock::scoped(timeline, self.run_one(row)).await?;
        }
        Ok(count)
    }

    /// The test clock offsets of the merchants whose sandbox jobs were claimed.
    async fn offsets(
        &self,
        claimed: &[scheduled_job::Model],
    ) -> Result<HashMap<String, i64>, DbErr> {
        let merchants: Vec<&str> = claimed
            .iter()
            .filter_map(|j| j.merchant_id.as_deref())
            .collect();
        if merchants.is_empty() {
            return Ok(HashMap::new());
        }
        Ok(payd_entity::merchant::Entity::find()
            .filter(payd_entity::merchant::Column::Id.is_in(merchants))
            .all(&self.db)
            .await?
            .into_iter()
            .map(|m| (m.id.into_string(), m.sandbox_clock_offset))
            .collect())
    }

    async fn claim(
        &self,
        now: DateTime<Utc>,
        merchant_id: Option<&str>,
    ) -> Result<Vec<scheduled_job::Model>, DbErr> {
        let token = new_id("lease");
        let lease_until = now + Duration::seconds(self.settings.lease_secs as i64);
        let mut due = Query::select();
        if let Some(m) = merchant_id {
            due.and_where(scheduled_job::Column::MerchantId.eq(m));
        }
        let due = due
            .column(scheduled_job::Column::Id)
            .from(Jobs)
            .and_where(scheduled_job::Column::DueAt.lte(now))
            .and_where(
                scheduled_job::Column::LeaseUntil
                    .is_null()
                    .or(scheduled_job::Column::LeaseUntil.lt(now)),
            )
            .order_by(scheduled_job::Column::DueAt, sea_orm::Order::Asc)
            .limit(self.settings.batch_size)
            // Dropped on SQLite, whose single writer already serializes claims.
            .lock_with_behavior(LockType::Update, LockBehavior::SkipLocked)
            .to_owned();
        // Invariant: a row is claimed only if its lease is free, re-checked by the UPDATE itself.
        // The claimed rows come back from the UPDATE (`RETURNING`): looking them up by token
        // afterwards would scan every job (no index on the token).
        let mut claimed = Jobs::update_many()
            .col_expr(
                scheduled_job::Column::LeaseOwner,
                Expr::value(token.clone()),
            )
            .col_expr(scheduled_job::Column::LeaseUntil, Expr::value(lease_until))
            .col_expr(
                scheduled_job::Column::Attempts,
                Expr::col(scheduled_job::Column::Attempts).add(1),
            )
            .filter(scheduled_job::Column::Id.in_subquery(due))
            .filter(
                scheduled_job::Column::LeaseUntil
                    .is_null()
                    .or(scheduled_job::Column::LeaseUntil.lt(now)),
            )
            .exec_with_returning(&self.db)
            .await?;
        claimed.sort_by_key(|j| j.due_at);
        Ok(claimed)
    }

    async fn run_one(&self, row: scheduled_job::Model) -> Result<(), DbErr> {
        let Some(handler) = self.handlers.get(row.kind.as_str()).cloned() else {
            // Perhaps a newer instance knows this kind: leave it for an hour, don't spin on it.
            tracing::warn!(kind = %row.kind, "no handler for scheduled job kind");
            return self
                .finish(&row, Outcome::RunAt(self.clock.base() + Duration::hours(1)))
                .await;
        };
        // A corrupt payload fails the job (retried with backoff, logged), not the tick: the
        // other jobs claimed with it still run.
        let payload = match crate::stored::json("payload", &row.id, &row.payload) {
            Ok(payload) => payload,
            Err(e) => return self.finish(&row, Outcome::Failed(e.to_string())).await,
        };
        // Handlers see times on the job's timeline; the row keeps base time.
        let offset = Duration::seconds(clock::current().offset_seconds);
        let job = Job {
            kind: row.kind.clone(),
            entity_id: row.entity_id.clone(),
            due_at: row.due_at + offset,
            payload,
            attempt: row.attempts,
        };
        let due_at = job.due_at;
        let outcome = match handler.run(job).await {
            // Invariant: a job never runs twice for one due time. A handler that asks to run
            // again at or before the time it just ran for would be claimed again at once, and
            // again (a spin): it is backed off as a failure instead, and logged.
            Outcome::RunAt(at) if at <= due_at => Outcome::Failed(format!(
                "asked to run again at {at}, not after the due time it ran for ({due_at})"
            )),
            other => other,
        };
        let label = match &outcome {
            Outcome::Done => OUTCOMES[0],
            Outcome::RunAt(_) => OUTCOMES[1],
            Outcome::Failed(_) => OUTCOMES[2],
        };
        metrics::counter!("payd_scheduler_jobs_total", "kind" => row.kind.clone(), "outcome" => label)
            .increment(1);
        let outcome = match outcome {
            Outcome::RunAt(at) => Outcome::RunAt(at - offset),
            other => other,
        };
        self.finish(&row, outcome).await
    }

    /// Applies an outcome, only if the row is still ours: a `schedule` call made meanwhile
    /// cleared the lease's owner, and the new schedule wins — its lease's end, kept until now,
    /// is freed.
    async fn finish(&self, row: &scheduled_job::Model, outcome: Outcome) -> Result<(), DbErr> {
        let ours = scheduled_job::Column::Id
            .eq(row.id.as_str())
            .and(scheduled_job::Column::LeaseOwner.eq(row.lease_owner.clone()));
        let applied = match outcome {
            Outcome::Done => {
                Jobs::delete_many()
                    .filter(ours)
                    .exec(&self.db)
                    .await?
                    .rows_affected
            }
            Outcome::RunAt(at) => {
                release(at, None)
                    .filter(ours)
                    .exec(&self.db)
                    .await?
                    .rows_affected
            }
            Outcome::Failed(error) => {
                let backoff = Ord::min(2i64.saturating_pow(row.attempts.clamp(0, 12) as u32), 3600);
                tracing::warn!(kind = %row.kind, entity = %row.entity_id, %error, "scheduled job failed");
                release(self.clock.base() + Duration::seconds(backoff), Some(error))
                    .filter(ours)
                    .exec(&self.db)
                    .await?
                    .rows_affected
            }
        };
        if applied == 0 {
            // Rescheduled while it ran: the new schedule stands, now free to be claimed.
            Jobs::update_many()
                .col_expr(
                    scheduled_job::Column::LeaseUntil,
                    Expr::value(Option::<DateTime<Utc>>::None),
                )
                .filter(scheduled_job::Column::Id.eq(row.id.as_str()))
                .filter(scheduled_job::Column::LeaseOwner.is_null())
                .filter(scheduled_job::Column::LeaseUntil.eq(row.lease_until))
                .exec(&self.db)
                .await?;
        }
        Ok(())
    }

    /// Runs the loop until the task is dropped: a tick at every poll interval or wake-up.
    pub async fn run(self: Arc<Self>) {
        let poll = StdDuration::from_millis(self.settings.poll_interval_ms);
        loop {
            if let Err(e) = self.tick().await {
                tracing::warn!(error = %e, "scheduler tick failed");
            }
            let _ = tokio::time::timeout(poll, self.wake.notified()).await;
        }
    }

    /// The due time (in base time) of the job of this kind for this entity, if one is scheduled.
    pub async fn due_at(
        &self,
        kind: &str,
        entity_id: &str,
    ) -> Result<Option<DateTime<Utc>>, DbErr> {
        Ok(Jobs::find()
            .filter(scheduled_job::Column::Kind.eq(kind))
            .filter(scheduled_job::Column::EntityId.eq(entity_id))
            .one(&self.db)
            .await?
            .map(|j| j.due_at))
    }
}

fn release(at: DateTime<Utc>, error: Option<String>) -> sea_orm::UpdateMany<Jobs> {
    Jobs::update_many()
        .col_expr(scheduled_job::Column::DueAt, Expr::value(at))
        .col_expr(scheduled_job::Column::LastError, Expr::value(error))
        .col_expr(
            scheduled_job::Column::LeaseOwner,
            Expr::value(Option::<String>::None),
        )
        .col_expr(
            scheduled_job::Column::LeaseUntil,
            Expr::value(Option::<DateTime<Utc>>::None),
        )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::clock::ManualClock;

    /// The clock jumps while a round works (as a test clock's `set` does between the purge's
    /// statements): the next round is due after the time the round worked for, so a tick at
    /// the jumped-to time runs it.
    #[actix_web::test]
    async fn a_periodic_round_is_next_due_after_the_time_it_worked_for() {
        let manual = ManualClock::new();
        let clock: SharedClock = manual.clone();
        let start = clock.now();
        let every = Duration::seconds(5);
        let outcome = periodic(&clock, every, |now| async move {
            assert_eq!(now, start);
            manual.set(start + Duration::seconds(100));
            Ok::<(), DbErr>(())
        })
        .await;
        assert!(
            matches!(outcome, Outcome::RunAt(at) if at == start + every),
            "{outcome:?}"
        );
    }

    #[actix_web::test]
    async fn a_periodic_round_that_fails_is_retried_as_a_failure() {
        let clock: SharedClock = ManualClock::new();
        let outcome = periodic(&clock, Duration::seconds(5), |_| async {
            Err::<(), _>(DbErr::Custom("down".into()))
        })
        .await;
        assert!(
            matches!(&outcome, Outcome::Failed(e) if e.contains("down")),
            "{outcome:?}"
        );
    }
}

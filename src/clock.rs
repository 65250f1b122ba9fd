//! The injectable clock: domain code asks it for the time so tests and sandbox time travel can move it.
//!
//! # Timelines
//!
//! Each sandbox merchant has a test clock: an offset from the injected time, moved forward by
//! `POST /sandbox/clock/advance`. A task works on one [`Timeline`], set around it by whoever
//! starts it: a request on its key's (the HTTP layer scopes a wall timeline, authentication
//! enters the sandbox merchant's), an actor's command on the one its sender was on, a scheduled
//! job on its merchant's. [`Clock::now`] reads the running task's timeline; [`Clock::base`] is
//! the injected time itself, which the scheduler, leases and rate limits keep.

use std::{
    cell::RefCell,
    future::Future,
    sync::{Arc, Mutex},
};

use chrono::{DateTime, Duration, DurationRound, Utc};

pub trait Clock: Send + Sync + 'static {
    /// The injected time, on no merchant's timeline, truncated to microseconds (PostgreSQL
    /// keeps no more, so the domain keeps no more).
    fn base(&self) -> DateTime<Utc>;

    /// Now on the running task's timeline: the base time plus its test clock's offset.
    fn now(&self) -> DateTime<Utc> {
        self.base() + Duration::seconds(current_offset())
    }
}

/// Whose time a task keeps: a sandbox merchant's test clock, or nobody's (offset 0).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Timeline {
    /// The sandbox merchant whose test clock this is; jobs scheduled on it move with it.
    pub merchant: Option<Arc<str>>,
    /// How far that clock is ahead of the base time.
    pub offset_seconds: i64,
}

impl Timeline {
    pub fn of(merchant: &str, offset_seconds: i64) -> Self {
        Self {
            merchant: Some(merchant.into()),
            offset_seconds,
        }
    }
}

tokio::task_local! {
    /// The running task's timeline. A `RefCell`, so authentication can enter the caller's
    /// timeline inside the scope the HTTP layer opened before the caller was known.
    static TIMELINE: RefCell<Timeline>;
}

/// The running task's timeline (nobody's outside any scope).
pub fn current() -> Timeline {
    TIMELINE
        .try_with(|t| t.borrow().clone())
        .unwrap_or_default()
}

fn current_offset() -> i64 {
    TIMELINE
        .try_with(|t| t.borrow().offset_seconds)
        .unwrap_or(0)
}

/// Runs `f` on this timeline.
pub async fn scoped<F: Future>(timeline: Timeline, f: F) -> F::Output {
    TIMELINE.scope(RefCell::new(timeline), f).await
}

/// Moves the running task onto this timeline, if it runs in a scope (else does nothing).
pub fn enter(timeline: Timeline) {
    let _ = TIMELINE.try_with(|t| *t.borrow_mut() = timeline);
}

pub type SharedClock = Arc<dyn Clock>;

fn truncate(t: DateTime<Utc>) -> DateTime<Utc> {
    t.duration_trunc(Duration::microseconds(1)).unwrap_or(t)
}

/// The wall clock as other systems read it: for what leaves payd stamped with the time
/// (request and webhook signatures, which receivers check against their own clocks) and for
/// the processors' circuit breakers, which must keep real time under sandbox time travel.
/// Invariant: the only other reader of the system clock is [`SystemClock`]; domain code asks
/// its [`Clock`].
pub fn wall_now() -> DateTime<Utc> {
    Utc::now()
}

/// The wall clock.
pub struct SystemClock;

impl Clock for SystemClock {
    fn base(&self) -> DateTime<Utc> {
        truncate(Utc::now())
    }
}

/// A clock that moves only when told to; starts at the wall-clock time of its creation.
pub struct ManualClock {
    now: Mutex<DateTime<Utc>>,
}

impl ManualClock {
    pub fn new() -> Arc<Self> {
        Arc::new(Self {
            now: Mutex::new(truncate(Utc::now())),
        })
    }

    pub fn advance(&self, by: Duration) {
        let mut now = self.now.lock().unwrap_or_else(|e| e.into_inner());
        *now = truncate(*now + by);
    }

    pub fn set(&self, to: DateTime<Utc>) {
        *self.now.lock().unwrap_or_else(|e| e.into_inner()) = truncate(to);
    }
}

impl Clock for ManualClock {
    fn base(&self) -> DateTime<Utc> {
        *self.now.lock().unwrap_or_else(|e| e.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let clock = ManualClock::new();
        let t0 = clock.now();
        assert_eq!(clock.now(), t0);
        clock.advance(Duration::days(7));
        assert_eq!(clock.now() - t0, Duration::days(7));
        assert_eq!(clock.now().timestamp_subsec_nanos() % 1000, 0);
    }

    #[test]
    fn a_timeline_shifts_now_but_not_the_base() {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(timelines());
    }

    async fn timelines() {
        let clock = ManualClock::new();
        let t0 = clock.base();
        let shifted = scoped(Timeline::of("mer_a", 3600), async {
            (clock.now(), clock.base())
        });
        assert_eq!(shifted.await, (t0 + Duration::hours(1), t0));
        let entered = scoped(Timeline::default(), async {
            enter(Timeline::of("mer_a", 60));
            (clock.now(), current().merchant)
        });
        assert_eq!(
            entered.await,
            (t0 + Duration::minutes(1), Some("mer_a".into()))
        );
        assert_eq!(clock.now(), t0, "outside any scope: the base time");
    }
}

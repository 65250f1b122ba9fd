//! The injectable clock: domain code asks it for the time so tests and sandbox time travel can move it.

use std::sync::{Arc, Mutex};

use chrono::{DateTime, Duration, DurationRound, Utc};

pub trait Clock: Send + Sync + 'static {
    /// Now, truncated to microseconds (PostgreSQL keeps no more, so the domain keeps no more).
    fn now(&self) -> DateTime<Utc>;
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
    fn now(&self) -> DateTime<Utc> {
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
    fn now(&self) -> DateTime<Utc> {
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
}

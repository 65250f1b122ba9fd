//! A fixed set of actix arbiters (event-loop threads) that actors are spread over by id.

use std::io;
use std::sync::Arc;

use actix_rt::{Arbiter, ArbiterHandle};

/// A fixed set of actix Arbiters; an actor lives on the arbiter chosen by
/// hashing its id.
///
/// Hashing (rather than round-robin) keeps every incarnation of an id's actor
/// on the same thread, which makes per-id logs and thread dumps easier to read.
/// Share it as `Arc<ArbiterPool>`; dropping the last reference stops the
/// arbiters.
#[derive(Debug)]
pub struct ArbiterPool {
    // Invariant: never empty once constructed, so `pick` can always index into it.
    arbiters: Vec<Arbiter>,
}

impl ArbiterPool {
    /// Starts `n` arbiter threads (at least one, even if `n == 0`).
    ///
    /// # Panics
    /// Panics if no actix `System` is running on the current thread or an
    /// arbiter thread cannot be spawned; meant for start-up. See
    /// [`ArbiterPool::try_new`] for the fallible variant.
    pub fn new(n: usize) -> Arc<Self> {
        Self::try_new(n).expect("start the actor arbiters")
    }

    /// Like [`ArbiterPool::new`], but reports a failure to create an arbiter
    /// thread instead of panicking. Still panics without a running `System`.
    ///
    /// # Errors
    /// The I/O error from creating an arbiter's thread or runtime; arbiters
    /// created before the failure are stopped.
    pub fn try_new(n: usize) -> io::Result<Arc<Self>> {
        let n = n.max(1);
        let mut pool = Self {
            arbiters: Vec::with_capacity(n),
        };
        for _ in 0..n {
            // On error `pool` is dropped, which stops the arbiters already made.
            pool.arbiters
                .push(Arbiter::try_with_tokio_rt(entered_runtime)?);
        }
        Ok(Arc::new(pool))
    }

    /// The arbiter that hosts the actor for `id`.
    pub fn pick(&self, id: &str) -> ArbiterHandle {
        self.arbiters[self.index_of(id)].handle()
    }

    /// Which arbiter (0-based) `id` maps to; stable for the life of the pool.
    pub fn index_of(&self, id: &str) -> usize {
        // The modulo keeps the result below `len()`, which fits in usize.
        (stable_hash(id) % self.arbiters.len() as u64) as usize
    }

    /// Number of arbiters.
    pub fn len(&self) -> usize {
        self.arbiters.len()
    }

    /// Always false: a pool has at least one arbiter.
    pub fn is_empty(&self) -> bool {
        self.arbiters.is_empty()
    }

    /// Asks every arbiter to stop its event loop; actors on them stop too.
    ///
    /// Idempotent. Registries using a stopped pool can no longer start actors:
    /// their sends fail with [`ActorError::Died`](crate::ActorError::Died).
    pub fn stop(&self) {
        for arbiter in &self.arbiters {
            arbiter.stop();
        }
    }
}

impl Drop for ArbiterPool {
    fn drop(&mut self) {
        // Arbiter threads otherwise outlive the pool until the System stops.
        self.stop();
    }
}

/// A current-thread runtime, entered for the whole life of the thread that builds it: what
/// every arbiter of the pool runs on, and what `payd`'s main thread runs its `System` on.
///
/// When an arbiter (or the `System`) stops, actix drops its `LocalSet` (the actors and their in-flight futures)
/// *before* its tokio runtime, and outside that runtime's context. A future dropped there that
/// still holds a pooled database connection returns it by spawning a task (sqlx's
/// `PoolConnection::drop`), which panics without a tokio context; a second such drop during
/// the unwind aborts the process. Entering the runtime here, on the thread, keeps a
/// context current until the thread ends: those spawns land on the runtime that is about to
/// shut down, which drops them cleanly. The guard is forgotten on purpose (it must outlive
/// the closure that actix runs the arbiter in); the context holds its own handle, released
/// when the thread exits.
pub fn entered_runtime() -> io::Result<tokio::runtime::Runtime> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    std::mem::forget(rt.handle().enter());
    Ok(rt)
}

/// FNV-1a rather than std's `DefaultHasher`, whose output may change between
/// Rust releases: a fixed function keeps the id-to-arbiter mapping
/// reproducible across builds. It is unkeyed; a skewed spread would only cost
/// balance, never correctness.
fn stable_hash(id: &str) -> u64 {
    const OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    id.bytes()
        .fold(OFFSET, |h, b| (h ^ u64::from(b)).wrapping_mul(PRIME))
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::time::Duration;

    use super::*;

    #[test]
    fn hash_is_stable() {
        // Known FNV-1a 64 vectors: a changed hash would reshuffle actors.
        assert_eq!(stable_hash(""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(stable_hash("a"), 0xaf63_dc4c_8601_ec8c);
    }

    #[actix_rt::test]
    async fn pick_is_stable_and_spreads() {
        let pool = ArbiterPool::new(4);
        assert_eq!(pool.len(), 4);
        assert!(!pool.is_empty());
        assert_eq!(pool.index_of("pay_123"), pool.index_of("pay_123"));
        let used: HashSet<usize> = (0..100)
            .map(|i| pool.index_of(&format!("pay_{i}")))
            .collect();
        assert_eq!(used.len(), 4, "100 ids should reach all 4 arbiters");
        assert!(pool.pick("pay_123").alive());
    }

    #[actix_rt::test]
    async fn zero_means_one() {
        let pool = ArbiterPool::new(0);
        assert_eq!(pool.len(), 1);
        assert_eq!(pool.index_of("anything"), 0);
    }

    /// Set when dropped, with whether a tokio runtime was current then.
    struct NeedsRuntimeOnDrop(Arc<std::sync::Mutex<Option<bool>>>);

    impl Drop for NeedsRuntimeOnDrop {
        fn drop(&mut self) {
            let current = tokio::runtime::Handle::try_current().is_ok();
            *self.0.lock().expect("flag") = Some(current);
        }
    }

    #[actix_rt::test]
    async fn a_future_dropped_when_its_arbiter_stops_still_has_a_runtime() {
        let pool = ArbiterPool::try_new(1).expect("pool");
        let seen = Arc::new(std::sync::Mutex::new(None));
        let held = NeedsRuntimeOnDrop(seen.clone());
        // Parked forever, like an actor's query in flight when the server stops.
        pool.pick("pay_1").spawn(async move {
            let _held = held;
            std::future::pending::<()>().await;
        });
        pool.stop();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        let current = loop {
            if let Some(current) = *seen.lock().expect("flag") {
                break current;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the parked future was not dropped 5s after stop"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        assert!(
            current,
            "dropped without a tokio context: a pooled connection's drop would panic"
        );
    }

    #[actix_rt::test]
    async fn stop_stops_every_arbiter() {
        let pool = ArbiterPool::try_new(3).expect("pool");
        let handles: Vec<_> = (0..30).map(|i| pool.pick(&format!("id{i}"))).collect();
        pool.stop();
        let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
        while handles.iter().any(ArbiterHandle::alive) {
            assert!(
                tokio::time::Instant::now() < deadline,
                "arbiters still alive 5s after stop"
            );
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

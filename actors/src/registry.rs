//! The keyed registry: activates, addresses, bounds, respawns and passivates one actor per id.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use actix::{Addr, Handler, MailboxError, Message};
use dashmap::DashMap;
use tokio::sync::OnceCell;

use crate::{telemetry, ActorError, ArbiterPool, KeyedActor};

/// Tuning for a [`Registry`].
#[derive(Debug, Clone)]
pub struct RegistryConfig {
    /// Most messages one actor may have in flight (queued or being handled,
    /// including callers waiting for it to load). Beyond that, sends fail
    /// with [`ActorError::Overloaded`]. Values below 1 are treated as 1.
    pub mailbox_capacity: usize,
    /// How long an actor may go without messages before the sweeper
    /// passivates it.
    pub idle_timeout: Duration,
    /// Called by the sweeper shortly after a sweep that stopped actors, to return the freed
    /// memory to the OS. The default calls glibc's `malloc_trim` (on glibc targets); a
    /// program with another global allocator passes that allocator's own.
    pub release_memory: fn(),
}

impl Default for RegistryConfig {
    fn default() -> Self {
        Self {
            mailbox_capacity: 64,
            idle_timeout: Duration::from_secs(5 * 60),
            release_memory: release_free_memory,
        }
    }
}

/// The sweeper never runs more often than this, however short the idle timeout.
const MIN_SWEEP_PERIOD: Duration = Duration::from_secs(1);

/// Routes messages to one actor per entity id of kind `A`, activating it on
/// demand. Cloning is cheap and clones share the same actors.
pub struct Registry<A: KeyedActor> {
    inner: Arc<Inner<A>>,
}

impl<A: KeyedActor> Clone for Registry<A> {
    fn clone(&self) -> Self {
        Self {
            inner: Arc::clone(&self.inner),
        }
    }
}

impl<A: KeyedActor> std::fmt::Debug for Registry<A> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("kind", &A::KIND)
            .field("live", &self.live())
            .field("mailbox_depth", &self.mailbox_depth())
            .field("restarts", &self.restarts())
            .finish_non_exhaustive()
    }
}

struct Inner<A: KeyedActor> {
    deps: A::Deps,
    // Invariant: >= 1.
    mailbox_capacity: usize,
    idle_timeout: Duration,
    release_memory: fn(),
    pool: Arc<ArbiterPool>,
    slots: DashMap<String, Arc<Slot<A>>>,
    /// Origin for `Slot::last_used`, so it fits in an atomic.
    epoch: Instant,
    // Invariant: equals the number of slots in `slots` whose address is set.
    live: AtomicUsize,
    restarts: AtomicU64,
    // Invariant: equals the sum of `in_flight` over all slots, including
    // slots already removed from the map but still held by a caller.
    in_flight: AtomicUsize,
}

/// One id's place in the registry. Removing it from the map and dropping the
/// last `Arc` drops the address, which stops the actor.
struct Slot<A: KeyedActor> {
    /// Set once by exactly one caller's `load`; empty until then or after a
    /// failed load.
    addr: OnceCell<Addr<A>>,
    // Invariant: only incremented while the map shard holding this slot is
    // locked (see `Registry::enter`), and passivation checks it under that
    // shard's write lock; so a slot with callers is never passivated, and a
    // passivated slot never gains a caller.
    in_flight: AtomicUsize,
    /// Nanoseconds since `Inner::epoch` of the last message accepted or answered.
    last_used: AtomicU64,
}

impl<A: KeyedActor> Slot<A> {
    fn new(now: u64) -> Self {
        Self {
            addr: OnceCell::new(),
            in_flight: AtomicUsize::new(0),
            last_used: AtomicU64::new(now),
        }
    }
}

/// A caller's claim on one of a slot's `mailbox_capacity` places. Dropping it
/// (reply received, error, or the caller's future cancelled) frees the place.
struct Ticket<'r, A: KeyedActor> {
    registry: &'r Inner<A>,
    slot: Arc<Slot<A>>,
}

impl<A: KeyedActor> Drop for Ticket<'_, A> {
    fn drop(&mut self) {
        // Touch before releasing: the Release below publishes the fresh
        // timestamp to a passivation pass that observes in_flight == 0.
        self.slot
            .last_used
            .fetch_max(self.registry.nanos_at(Instant::now()), Ordering::Relaxed);
        self.slot.in_flight.fetch_sub(1, Ordering::Release);
        self.registry.in_flight.fetch_sub(1, Ordering::Relaxed);
        telemetry::mailbox_depth(A::KIND).decrement(1.0);
    }
}

/// Why one delivery attempt failed.
enum Attempt<E> {
    /// Final: report to the caller.
    Failed(ActorError<E>),
    /// The actor died; its slot has been removed, a retry loads a fresh one.
    Dead,
}

impl<A: KeyedActor> Inner<A> {
    fn nanos_at(&self, at: Instant) -> u64 {
        let since = at.saturating_duration_since(self.epoch);
        u64::try_from(since.as_nanos()).unwrap_or(u64::MAX)
    }

    /// Bookkeeping for a slot that has just left the map.
    fn forget(&self, slot: &Slot<A>) {
        if slot.addr.initialized() {
            self.live.fetch_sub(1, Ordering::Relaxed);
            telemetry::live(A::KIND).decrement(1.0);
        }
    }
}

impl<A: KeyedActor> Drop for Inner<A> {
    fn drop(&mut self) {
        // The actors stop as the map drops their addresses; take them off the
        // gauge too, since other registries of the kind may share it.
        let live = self.live.load(Ordering::Relaxed);
        telemetry::live(A::KIND).decrement(live as f64);
    }
}

impl<A: KeyedActor> Registry<A> {
    /// A registry with no actors yet; they are activated by [`Registry::send`]
    /// on the arbiters of `pool`.
    pub fn new(deps: A::Deps, config: RegistryConfig, pool: Arc<ArbiterPool>) -> Self {
        telemetry::register_kind(A::KIND);
        Self {
            inner: Arc::new(Inner {
                deps,
                mailbox_capacity: config.mailbox_capacity.max(1),
                idle_timeout: config.idle_timeout,
                release_memory: config.release_memory,
                pool,
                slots: DashMap::new(),
                epoch: Instant::now(),
                live: AtomicUsize::new(0),
                restarts: AtomicU64::new(0),
                in_flight: AtomicUsize::new(0),
            }),
        }
    }

    /// Send one message to the actor for `id`, starting (loading) it if needed.
    ///
    /// If the actor dies before replying (a handler panicked), it is replaced
    /// by a freshly loaded one and the message is delivered once more; a
    /// second death yields [`ActorError::Died`]. Messages must therefore be
    /// safe to handle twice, which is why `M: Clone`.
    ///
    /// Cancel-safe: dropping the future frees its mailbox place, although a
    /// message already handed to the actor is still handled.
    ///
    /// # Errors
    /// [`ActorError::Load`] if the actor had to be loaded and `load` failed,
    /// [`ActorError::Overloaded`] if `mailbox_capacity` messages are already
    /// in flight for `id`, [`ActorError::Died`] if the actor died twice.
    pub async fn send<M>(&self, id: &str, msg: M) -> Result<M::Result, ActorError<A::LoadError>>
    where
        M: Message + Clone + Send + 'static,
        M::Result: Send,
        A: Handler<M>,
    {
        let started = Instant::now();
        telemetry::messages(A::KIND).increment(1);
        let outcome = match self.attempt(id, msg.clone()).await {
            Ok(reply) => Ok(reply),
            Err(Attempt::Failed(e)) => Err(e),
            Err(Attempt::Dead) => match self.attempt(id, msg).await {
                Ok(reply) => Ok(reply),
                Err(Attempt::Failed(e)) => Err(e),
                Err(Attempt::Dead) => Err(ActorError::Died),
            },
        };
        if outcome.is_ok() {
            telemetry::message_seconds(A::KIND).record(started.elapsed().as_secs_f64());
        }
        outcome
    }

    /// What this kind's `load` is given.
    pub fn deps(&self) -> &A::Deps {
        &self.inner.deps
    }

    /// The ids of the actors currently active (for a message to each, e.g. at shutdown).
    pub fn ids(&self) -> Vec<String> {
        self.inner
            .slots
            .iter()
            .filter(|s| s.value().addr.initialized())
            .map(|s| s.key().clone())
            .collect()
    }

    /// Actors currently active. Includes an actor that died since its last
    /// message: death is only noticed when a message bounces off it.
    pub fn live(&self) -> usize {
        self.inner.live.load(Ordering::Relaxed)
    }

    /// Actors found dead and removed so far; each is reloaded by the message
    /// that found it dead (its retry) or by the next one.
    pub fn restarts(&self) -> u64 {
        self.inner.restarts.load(Ordering::Relaxed)
    }

    /// Messages currently in flight across all of this registry's actors.
    pub fn mailbox_depth(&self) -> usize {
        self.inner.in_flight.load(Ordering::Relaxed)
    }

    /// Stop actors idle longer than `idle_timeout`, with nothing in flight;
    /// returns how many.
    pub fn passivate_idle(&self) -> usize {
        self.passivate_idle_at(Instant::now())
    }

    /// [`Registry::passivate_idle`] as if the time were `now`.
    pub fn passivate_idle_at(&self, now: Instant) -> usize {
        let now = self.inner.nanos_at(now);
        let idle = u64::try_from(self.inner.idle_timeout.as_nanos()).unwrap_or(u64::MAX);
        self.passivate_where(|slot| {
            now.saturating_sub(slot.last_used.load(Ordering::Relaxed)) > idle
        })
    }

    /// Stop every actor with nothing in flight, e.g. on graceful shutdown;
    /// returns how many. Actors still busy are left alone.
    pub fn passivate_all(&self) -> usize {
        self.passivate_where(|_| true)
    }

    /// Runs [`Registry::passivate_idle`] every `idle_timeout / 2` (at least
    /// every second) on the current tokio runtime.
    ///
    /// The task holds only a weak reference, so it ends at its first tick after
    /// the last clone of the registry is dropped.
    pub fn spawn_sweeper(&self) -> tokio::task::JoinHandle<()> {
        let registry: Weak<Inner<A>> = Arc::downgrade(&self.inner);
        let period = (self.inner.idle_timeout / 2).max(MIN_SWEEP_PERIOD);
        tokio::spawn(async move {
            let mut ticks = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
            ticks.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                ticks.tick().await;
                let Some(inner) = registry.upgrade() else {
                    break;
                };
                let release = inner.release_memory;
                let stopped = Registry { inner }.passivate_idle();
                if stopped > 0 {
                    tracing::debug!(kind = A::KIND, stopped, "passivated idle actors");
                    // The stopped actors are dropped on their arbiters within moments; then
                    // hand the freed pages back to the OS (glibc keeps them otherwise).
                    tokio::time::sleep(TRIM_DELAY).await;
                    release();
                }
            }
        })
    }

    /// One delivery: claim a mailbox place, make sure the actor runs, send.
    async fn attempt<M>(&self, id: &str, msg: M) -> Result<M::Result, Attempt<A::LoadError>>
    where
        M: Message + Send + 'static,
        M::Result: Send,
        A: Handler<M>,
    {
        let ticket = self.enter(id).map_err(Attempt::Failed)?;
        let addr = ticket
            .slot
            .addr
            .get_or_try_init(|| self.activate(id))
            .await
            .map_err(|e| Attempt::Failed(ActorError::Load(e)))?;
        match addr.send(msg).await {
            Ok(reply) => Ok(reply),
            Err(MailboxError::Closed) => {
                self.bury(id, &ticket.slot);
                Err(Attempt::Dead)
            }
            // Unreachable in practice: no timeout is ever set on the request.
            Err(MailboxError::Timeout) => Err(Attempt::Failed(ActorError::Died)),
        }
    }

    /// Claims a mailbox place in `id`'s slot, creating the slot if needed.
    fn enter(&self, id: &str) -> Result<Ticket<'_, A>, ActorError<A::LoadError>> {
        let inner = &*self.inner;
        // The fast path avoids allocating the key for ids that are already active.
        if let Some(slot) = inner.slots.get(id) {
            return self.claim(&slot);
        }
        let slot = inner
            .slots
            .entry(id.to_owned())
            .or_insert_with(|| Arc::new(Slot::new(inner.nanos_at(Instant::now()))));
        self.claim(&slot)
    }

    /// Must be called while the map guard for `slot` is held (see the
    /// invariant on `Slot::in_flight`).
    fn claim(&self, slot: &Arc<Slot<A>>) -> Result<Ticket<'_, A>, ActorError<A::LoadError>> {
        let inner = &*self.inner;
        let cap = inner.mailbox_capacity;
        if slot
            .in_flight
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
                (n < cap).then_some(n + 1)
            })
            .is_err()
        {
            telemetry::overloaded(A::KIND).increment(1);
            return Err(ActorError::Overloaded);
        }
        slot.last_used
            .fetch_max(inner.nanos_at(Instant::now()), Ordering::Relaxed);
        inner.in_flight.fetch_add(1, Ordering::Relaxed);
        telemetry::mailbox_depth(A::KIND).increment(1.0);
        Ok(Ticket {
            registry: inner,
            slot: Arc::clone(slot),
        })
    }

    /// Loads the actor and starts it on its arbiter.
    async fn activate(&self, id: &str) -> Result<Addr<A>, A::LoadError> {
        let inner = &*self.inner;
        let actor = match A::load(id, &inner.deps).await {
            Ok(actor) => actor,
            // An id with no entity behind it is the caller's mistake (a typo), not payd's.
            Err(error) if A::is_missing(&error) => return Err(error),
            Err(error) => {
                telemetry::load_failures(A::KIND).increment(1);
                tracing::warn!(kind = A::KIND, id, %error, "loading actor failed");
                return Err(error);
            }
        };
        // actix's own capacity only parks senders rather than rejecting, so
        // `claim` enforces the bound; this just sizes the queue to match.
        let cap = inner.mailbox_capacity;
        let addr = A::start_in_arbiter(&inner.pool.pick(id), move |ctx| {
            ctx.set_mailbox_capacity(cap);
            actor
        });
        // The caller's OnceCell stores `addr` in this same poll, so the count
        // matches the invariant on `Inner::live` by the time anyone looks.
        inner.live.fetch_add(1, Ordering::Relaxed);
        telemetry::live(A::KIND).increment(1.0);
        tracing::debug!(kind = A::KIND, id, "actor activated");
        Ok(addr)
    }

    /// Removes a slot whose actor is dead, unless another caller already did.
    fn bury(&self, id: &str, dead: &Arc<Slot<A>>) {
        let inner = &*self.inner;
        // ptr_eq: the map may already hold a fresh slot for `id`, which must stay.
        if let Some((_, slot)) = inner.slots.remove_if(id, |_, slot| Arc::ptr_eq(slot, dead)) {
            inner.forget(&slot);
            inner.restarts.fetch_add(1, Ordering::Relaxed);
            telemetry::restarts(A::KIND).increment(1);
            tracing::warn!(kind = A::KIND, id, "actor died; a fresh one will be loaded");
        }
    }

    /// Removes idle slots matching `stale`; returns how many held an actor.
    fn passivate_where(&self, stale: impl Fn(&Slot<A>) -> bool) -> usize {
        let inner = &*self.inner;
        let mut evicted = Vec::new();
        // `retain` checks and removes under each shard's write lock, which is
        // what the invariant on `Slot::in_flight` relies on.
        inner.slots.retain(|_, slot| {
            let remove = slot.in_flight.load(Ordering::Acquire) == 0 && stale(slot);
            if remove {
                evicted.push(Arc::clone(slot));
            }
            !remove
        });
        let mut stopped = 0;
        for slot in &evicted {
            if slot.addr.initialized() {
                stopped += 1;
            }
            inner.forget(slot);
        }
        if stopped > 0 {
            telemetry::passivations(A::KIND).increment(stopped as u64);
            tracing::debug!(kind = A::KIND, stopped, "passivated actors");
        }
        // Dropping `evicted` here, outside the shard locks, drops the last
        // addresses, which stops the actors.
        stopped
    }
}

/// How long the sweeper waits after passivating before it returns memory to the OS.
const TRIM_DELAY: Duration = Duration::from_millis(500);

/// Returns the allocator's free pages to the OS: glibc's `malloc_trim` walks every arena and
/// releases whole free pages, which the passivated actors' state has just become. Elsewhere
/// the allocator does its own.
pub fn release_free_memory() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: malloc_trim only inspects and releases the allocator's own free memory.
    unsafe {
        libc::malloc_trim(0);
    }
}

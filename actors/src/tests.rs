//! Behavioural tests of the registry against a probe actor that counts its loads and stops.

use std::future::Future;
use std::sync::atomic::{AtomicUsize, Ordering::SeqCst};
use std::sync::Arc;
use std::time::{Duration, Instant};

use actix::prelude::*;
use tokio::sync::Semaphore;

use crate::{ActorError, ArbiterPool, KeyedActor, Registry, RegistryConfig};

/// Upper bound for anything a test waits on; far above what a healthy run needs.
const PATIENCE: Duration = Duration::from_secs(5);

#[derive(Clone)]
struct Deps {
    /// Calls to `load`, successful or not.
    loads: Arc<AtomicUsize>,
    /// Probe actors whose `stopped` hook ran.
    stops: Arc<AtomicUsize>,
    /// The next this-many loads fail.
    failing_loads: Arc<AtomicUsize>,
    load_delay: Duration,
    /// `Hold` handlers wait for a permit here; it starts closed.
    gate: Arc<Semaphore>,
    /// `Hold` handlers that have started.
    held: Arc<AtomicUsize>,
}

impl Deps {
    fn new() -> Self {
        Self {
            loads: Arc::default(),
            stops: Arc::default(),
            failing_loads: Arc::default(),
            load_delay: Duration::ZERO,
            gate: Arc::new(Semaphore::new(0)),
            held: Arc::default(),
        }
    }

    fn loads(&self) -> usize {
        self.loads.load(SeqCst)
    }

    fn stops(&self) -> usize {
        self.stops.load(SeqCst)
    }

    fn open_gate(&self) {
        // Permits are returned after use, so one keeps the gate open for all.
        self.gate.add_permits(1);
    }
}

struct Probe {
    id: String,
    /// Which load produced this actor (0-based, across all ids).
    incarnation: usize,
    deps: Deps,
}

impl Actor for Probe {
    type Context = Context<Self>;

    fn stopped(&mut self, _: &mut Context<Self>) {
        self.deps.stops.fetch_add(1, SeqCst);
    }
}

impl KeyedActor for Probe {
    const KIND: &'static str = "probe";
    type Deps = Deps;
    type LoadError = String;

    async fn load(id: &str, deps: &Deps) -> Result<Self, String> {
        let incarnation = deps.loads.fetch_add(1, SeqCst);
        if !deps.load_delay.is_zero() {
            tokio::time::sleep(deps.load_delay).await;
        }
        if deps
            .failing_loads
            .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            return Err("store unavailable".to_owned());
        }
        Ok(Self {
            id: id.to_owned(),
            incarnation,
            deps: deps.clone(),
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
struct Who {
    id: String,
    incarnation: usize,
}

impl Probe {
    fn who(&self) -> Who {
        Who {
            id: self.id.clone(),
            incarnation: self.incarnation,
        }
    }
}

/// Answers with the actor's identity.
#[derive(Clone)]
struct Ping;

impl Message for Ping {
    type Result = Who;
}

impl Handler<Ping> for Probe {
    type Result = MessageResult<Ping>;

    fn handle(&mut self, _: Ping, _: &mut Context<Self>) -> Self::Result {
        MessageResult(self.who())
    }
}

/// Panics while `remaining` (shared by all deliveries of the message) is
/// above zero, decrementing it; answers once it is zero.
#[derive(Clone)]
struct Crash {
    remaining: Arc<AtomicUsize>,
}

impl Crash {
    fn times(n: usize) -> Self {
        Self {
            remaining: Arc::new(AtomicUsize::new(n)),
        }
    }

    fn maybe_panic(&self) {
        if self
            .remaining
            .fetch_update(SeqCst, SeqCst, |n| n.checked_sub(1))
            .is_ok()
        {
            panic!("injected handler panic (expected by the test)");
        }
    }
}

impl Message for Crash {
    type Result = Who;
}

impl Handler<Crash> for Probe {
    type Result = MessageResult<Crash>;

    fn handle(&mut self, msg: Crash, _: &mut Context<Self>) -> Self::Result {
        msg.maybe_panic();
        MessageResult(self.who())
    }
}

/// Occupies the actor (atomically: later messages stay queued) until the
/// test opens the gate, then optionally crashes.
#[derive(Clone)]
struct Hold {
    then: Option<Crash>,
}

impl Message for Hold {
    type Result = Who;
}

impl Handler<Hold> for Probe {
    type Result = AtomicResponse<Self, Who>;

    fn handle(&mut self, msg: Hold, _: &mut Context<Self>) -> Self::Result {
        self.deps.held.fetch_add(1, SeqCst);
        let gate = Arc::clone(&self.deps.gate);
        AtomicResponse::new(Box::pin(
            async move {
                // A closed semaphore also lets the handler through.
                let _permit = gate.acquire().await;
            }
            .into_actor(self)
            .map(move |(), act, _| {
                if let Some(crash) = &msg.then {
                    crash.maybe_panic();
                }
                act.who()
            }),
        ))
    }
}

fn registry(deps: &Deps, config: RegistryConfig) -> Registry<Probe> {
    Registry::new(deps.clone(), config, ArbiterPool::new(2))
}

/// Waits for `cond`, failing the test after `PATIENCE`.
async fn eventually(what: &str, cond: impl Fn() -> bool) {
    let deadline = Instant::now() + PATIENCE;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// Awaits `fut`, failing the test after `PATIENCE` instead of hanging.
async fn bounded<F: Future>(what: &str, fut: F) -> F::Output {
    match tokio::time::timeout(PATIENCE, fut).await {
        Ok(out) => out,
        Err(_) => panic!("timed out: {what}"),
    }
}

/// Sends from a separate local task so the test can act while it is pending.
fn spawn_send<M>(
    reg: &Registry<Probe>,
    id: &'static str,
    msg: M,
) -> tokio::task::JoinHandle<Result<Who, ActorError<String>>>
where
    M: Message<Result = Who> + Clone + Send + 'static,
    Probe: Handler<M>,
{
    let reg = reg.clone();
    actix_rt::spawn(async move { reg.send(id, msg).await })
}

async fn join(what: &str, task: tokio::task::JoinHandle<Result<Who, ActorError<String>>>) -> Who {
    bounded(what, task)
        .await
        .expect("send task panicked")
        .unwrap_or_else(|e| panic!("{what}: {e}"))
}

#[actix_rt::test]
async fn one_actor_per_id_under_concurrent_first_messages() {
    let deps = Deps {
        // Keeps the first load pending while all 50 callers arrive.
        load_delay: Duration::from_millis(50),
        ..Deps::new()
    };
    let reg = registry(&deps, RegistryConfig::default());

    let tasks: Vec<_> = (0..50).map(|_| spawn_send(&reg, "pay_a", Ping)).collect();
    for task in tasks {
        let who = join("concurrent first message", task).await;
        assert_eq!(
            who,
            Who {
                id: "pay_a".into(),
                incarnation: 0
            }
        );
    }
    assert_eq!(
        deps.loads(),
        1,
        "50 concurrent first messages must load once"
    );
    assert_eq!(reg.live(), 1);

    let other = bounded("other id", reg.send("pay_b", Ping))
        .await
        .expect("send");
    assert_eq!(other.id, "pay_b");
    assert_ne!(other.incarnation, 0, "a different id needs its own actor");
    assert_eq!(deps.loads(), 2);
    assert_eq!(reg.live(), 2);
    assert_eq!(reg.mailbox_depth(), 0);
    let mut ids = reg.ids();
    ids.sort();
    assert_eq!(ids, ["pay_a", "pay_b"], "ids names the active actors");
}

#[actix_rt::test]
async fn idle_actor_is_passivated_stopped_and_reloaded() {
    let deps = Deps::new();
    let config = RegistryConfig {
        idle_timeout: Duration::from_secs(60),
        ..RegistryConfig::default()
    };
    let idle_timeout = config.idle_timeout;
    let reg = registry(&deps, config);

    let first = bounded("first", reg.send("pay_a", Ping))
        .await
        .expect("send");
    assert_eq!(first.incarnation, 0);
    assert_eq!(reg.passivate_idle_at(Instant::now()), 0, "not idle yet");
    assert_eq!(reg.live(), 1);

    let later = Instant::now() + idle_timeout + Duration::from_secs(1);
    assert_eq!(reg.passivate_idle_at(later), 1);
    assert_eq!(reg.live(), 0);
    eventually("the passivated actor has stopped", || deps.stops() == 1).await;

    let again = bounded("after passivation", reg.send("pay_a", Ping))
        .await
        .expect("send");
    assert_eq!(again.incarnation, 1, "must be a freshly loaded actor");
    assert_eq!(deps.loads(), 2);
    assert_eq!(reg.live(), 1);
}

#[actix_rt::test]
async fn busy_actor_is_not_passivated() {
    let deps = Deps::new();
    let reg = registry(&deps, RegistryConfig::default());

    let held = spawn_send(&reg, "pay_a", Hold { then: None });
    eventually("the handler is running", || deps.held.load(SeqCst) == 1).await;
    let far_future = Instant::now() + Duration::from_secs(24 * 3600);
    assert_eq!(reg.passivate_idle_at(far_future), 0);
    assert_eq!(reg.passivate_all(), 0);
    assert_eq!(reg.live(), 1);

    deps.open_gate();
    join("held message", held).await;
    assert_eq!(reg.passivate_all(), 1, "idle once the reply is in");
    assert_eq!(reg.live(), 0);
    eventually("the passivated actor has stopped", || deps.stops() == 1).await;
}

#[actix_rt::test]
async fn panicked_actor_is_respawned_and_the_message_retried() {
    let deps = Deps::new();
    let reg = registry(&deps, RegistryConfig::default());

    let first = bounded("first", reg.send("pay_a", Ping))
        .await
        .expect("send");
    assert_eq!(first.incarnation, 0);

    let retried = bounded("crash once", reg.send("pay_a", Crash::times(1)))
        .await
        .expect("the retry on a fresh actor should succeed");
    assert_eq!(retried.incarnation, 1, "the retry must reach a fresh actor");
    assert_eq!(reg.restarts(), 1);

    let after = bounded("after respawn", reg.send("pay_a", Ping))
        .await
        .expect("send");
    assert_eq!(after.incarnation, 1);
    assert_eq!(reg.restarts(), 1);
    assert_eq!(deps.loads(), 2);
    assert_eq!(reg.live(), 1);
}

#[actix_rt::test]
async fn message_that_always_panics_reports_died() {
    let deps = Deps::new();
    let reg = registry(&deps, RegistryConfig::default());

    let outcome = bounded("crash always", reg.send("pay_a", Crash::times(usize::MAX))).await;
    assert!(matches!(outcome, Err(ActorError::Died)), "got {outcome:?}");
    assert_eq!(deps.loads(), 2, "exactly one retry");
    assert_eq!(reg.restarts(), 2, "both dead actors were removed");
    assert_eq!(reg.live(), 0);

    let after = bounded("after Died", reg.send("pay_a", Ping))
        .await
        .expect("send");
    assert_eq!(after.incarnation, 2);
    assert_eq!(reg.live(), 1);
    assert_eq!(reg.mailbox_depth(), 0);
}

#[actix_rt::test]
async fn messages_queued_behind_a_crash_share_one_respawn() {
    let deps = Deps::new();
    let reg = registry(&deps, RegistryConfig::default());
    bounded("activate", reg.send("pay_a", Ping))
        .await
        .expect("send");

    let crashing = spawn_send(
        &reg,
        "pay_a",
        Hold {
            then: Some(Crash::times(1)),
        },
    );
    eventually("the handler is running", || deps.held.load(SeqCst) == 1).await;
    let queued: Vec<_> = (0..3).map(|_| spawn_send(&reg, "pay_a", Ping)).collect();
    eventually("all messages are in flight", || reg.mailbox_depth() == 4).await;

    deps.open_gate();
    assert_eq!(join("crashing message", crashing).await.incarnation, 1);
    for task in queued {
        assert_eq!(join("queued message", task).await.incarnation, 1);
    }
    assert_eq!(deps.loads(), 2, "one respawn for all victims");
    assert_eq!(reg.restarts(), 1);
    assert_eq!(reg.live(), 1);
}

#[actix_rt::test]
async fn full_mailbox_rejects_immediately() {
    let deps = Deps::new();
    let config = RegistryConfig {
        mailbox_capacity: 2,
        ..RegistryConfig::default()
    };
    let reg = registry(&deps, config);
    bounded("activate", reg.send("pay_a", Ping))
        .await
        .expect("send");

    let held: Vec<_> = (0..2)
        .map(|_| spawn_send(&reg, "pay_a", Hold { then: None }))
        .collect();
    eventually("both places are taken", || reg.mailbox_depth() == 2).await;
    eventually("the actor is blocked", || deps.held.load(SeqCst) == 1).await;

    let third = tokio::time::timeout(Duration::from_millis(500), reg.send("pay_a", Ping))
        .await
        .expect("Overloaded must be returned without waiting");
    assert!(
        matches!(third, Err(ActorError::Overloaded)),
        "got {third:?}"
    );

    let other = bounded("other id", reg.send("pay_b", Ping)).await;
    assert!(other.is_ok(), "the bound is per actor: {other:?}");

    deps.open_gate();
    for task in held {
        join("held message", task).await;
    }
    let after = bounded("after release", reg.send("pay_a", Ping)).await;
    assert!(after.is_ok(), "got {after:?}");
    assert_eq!(reg.mailbox_depth(), 0);
}

#[actix_rt::test]
async fn cancelled_caller_frees_its_place() {
    let deps = Deps::new();
    let config = RegistryConfig {
        mailbox_capacity: 1,
        ..RegistryConfig::default()
    };
    let reg = registry(&deps, config);

    let held = spawn_send(&reg, "pay_a", Hold { then: None });
    eventually("the actor is blocked", || deps.held.load(SeqCst) == 1).await;
    assert_eq!(reg.mailbox_depth(), 1);
    held.abort();
    eventually("the place is freed", || reg.mailbox_depth() == 0).await;
    deps.open_gate();
    let after = bounded("after cancel", reg.send("pay_a", Ping)).await;
    assert!(after.is_ok(), "got {after:?}");
}

#[actix_rt::test]
async fn failed_load_is_reported_and_retried_next_time() {
    let deps = Deps::new();
    deps.failing_loads.store(1, SeqCst);
    let reg = registry(&deps, RegistryConfig::default());

    let failed = bounded("failing load", reg.send("pay_a", Ping)).await;
    match failed {
        Err(ActorError::Load(e)) => assert_eq!(e, "store unavailable"),
        other => panic!("expected a load error, got {other:?}"),
    }
    assert_eq!(reg.live(), 0);
    assert_eq!(reg.mailbox_depth(), 0);

    let who = bounded("second load", reg.send("pay_a", Ping))
        .await
        .expect("send");
    assert_eq!(who.id, "pay_a");
    assert_eq!(deps.loads(), 2);
    assert_eq!(reg.live(), 1);
}

#[actix_rt::test]
async fn sweeper_passivates_and_ends_with_the_registry() {
    let deps = Deps::new();
    let config = RegistryConfig {
        idle_timeout: Duration::from_millis(20),
        ..RegistryConfig::default()
    };
    let reg = registry(&deps, config);
    bounded("activate", reg.send("pay_a", Ping))
        .await
        .expect("send");

    let sweeper = reg.spawn_sweeper();
    eventually("the sweeper passivated the actor", || reg.live() == 0).await;
    eventually("the actor has stopped", || deps.stops() == 1).await;

    drop(reg);
    bounded("the sweeper ends after the registry is dropped", sweeper)
        .await
        .expect("sweeper task");
}

#[actix_rt::test]
async fn dropping_the_registry_stops_its_actors() {
    let deps = Deps::new();
    // Kept alive here: stopping the arbiters would kill the actors without
    // running `stopped`, hiding whether dropping the addresses worked.
    let pool = ArbiterPool::new(2);
    let reg = Registry::<Probe>::new(deps.clone(), RegistryConfig::default(), Arc::clone(&pool));
    bounded("a", reg.send("pay_a", Ping)).await.expect("send");
    bounded("b", reg.send("pay_b", Ping)).await.expect("send");
    drop(reg);
    eventually("both actors have stopped", || deps.stops() == 2).await;
    drop(pool);
}

#[test]
fn errors_read_well() {
    let load: ActorError<String> = ActorError::Load("store unavailable".into());
    assert_eq!(
        load.to_string(),
        "loading the actor failed: store unavailable"
    );
    assert_eq!(
        ActorError::<String>::Overloaded.to_string(),
        "the actor's mailbox is full"
    );
    assert_eq!(
        ActorError::<String>::Died.to_string(),
        "the actor died while handling the message"
    );
}

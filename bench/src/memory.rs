//! The memory phase: payments created on the first server, then a fresh server whose idle
//! timeout lets every payment's actor be live at once; the RSS of those live actors, and what
//! passivation gives back (with `--retouch`, what touching them all again costs).

use std::{
    cell::RefCell,
    path::Path,
    rc::Rc,
    time::{Duration, Instant},
};

use awc::http::Method;

use crate::{
    load::{drive, outcome, payment_body, send, Api, Outcome, Stats},
    server::{Payd, TestDb},
    Args,
};

/// Plain reads on the memory server before its first RSS reading.
pub(crate) const WARM_READS: usize = 5_000;

/// What the memory phase measured.
pub(crate) struct MemoryRun {
    pub(crate) payments: usize,
    pub(crate) create_secs: f64,
    pub(crate) touch: Stats,
    pub(crate) idle_timeout_secs: u64,
    pub(crate) rss_fresh: u64,
    pub(crate) rss_live: u64,
    pub(crate) live: u64,
    pub(crate) rss_passivated: u64,
    pub(crate) live_after: u64,
    pub(crate) passivate_secs: f64,
    /// With `--retouch`: live actors and RSS after touching every payment again.
    pub(crate) retouched: Option<(u64, u64)>,
}

impl MemoryRun {
    pub(crate) fn per_actor(&self) -> f64 {
        self.rss_live.saturating_sub(self.rss_fresh) as f64 / self.live.max(1) as f64
    }

    pub(crate) fn returned(&self) -> f64 {
        let grown = self.rss_live.saturating_sub(self.rss_fresh) as f64;
        self.rss_live.saturating_sub(self.rss_passivated) as f64 / grown.max(1.0)
    }
}

/// The payments the memory phase touches, created on the first server.
pub(crate) struct Created {
    owner: Api,
    ids: Rc<Vec<String>>,
    created: Stats,
    reads: Stats,
}

/// Creates `--actors` unconfirmed payments for a new merchant on the server at `base` (no
/// actor is involved), then times plain reads of some of them.
pub(crate) async fn create_payments(
    args: &Args,
    client: &awc::Client,
    base: &str,
) -> anyhow::Result<Created> {
    let c = args.concurrency;
    eprintln!("payd-bench: memory: creating {} payments", args.actors);
    let owner = Api::create_merchant(client, base, "bench-memory").await?;
    let ids: Rc<RefCell<Vec<String>>> = Rc::default();
    let n = args.actors as u64;
    let (owner2, ids2, body) = (owner.clone(), ids.clone(), payment_body(false, false));
    let created = drive(c, Duration::from_secs(600), None, move |k| {
        let (api, ids, body) = (owner2.clone(), ids2.clone(), body.clone());
        async move {
            if k >= n {
                return Outcome::Exhausted;
            }
            match api.create(body).await {
                Ok((id, _)) => {
                    ids.borrow_mut().push(id);
                    Outcome::Ok
                }
                Err(e) => Outcome::Failed(e),
            }
        }
    })
    .await;
    eprintln!("payd-bench:   {}", created.summary());
    let ids = Rc::new(ids.take());
    // Plain reads cost what a touch costs (the key, then the payment): their rate sets
    // the idle timeout of the memory server.
    let reads = read_all(&owner, &ids, 10_000, false, c, Duration::from_secs(60)).await;
    eprintln!("payd-bench:   reads: {}", reads.summary());
    Ok(Created {
        owner,
        ids,
        created,
        reads,
    })
}

/// `payd_actors_live{kind="payment"}` from /metrics.
async fn live_actors(client: &awc::Client, base: &str) -> Option<u64> {
    let body = send(client, Method::GET, &format!("{base}/metrics"), &[], None)
        .await
        .ok()?;
    String::from_utf8_lossy(&body)
        .lines()
        .filter(|l| l.starts_with("payd_actors_live") && l.contains("payment"))
        .find_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .map(|v| v as u64)
}

/// GETs the first `n` of `ids` (with `force_sync=true`: through their actors).
async fn read_all(
    api: &Api,
    ids: &Rc<Vec<String>>,
    n: usize,
    force_sync: bool,
    c: usize,
    limit: Duration,
) -> Stats {
    let n = n.min(ids.len()) as u64;
    let (api, ids) = (api.clone(), ids.clone());
    let query = if force_sync { "?force_sync=true" } else { "" };
    drive(c, limit, None, move |k| {
        let (api, ids) = (api.clone(), ids.clone());
        async move {
            if k >= n {
                return Outcome::Exhausted;
            }
            let path = format!("/payments/{}{query}", ids[k as usize]);
            outcome(api.call(Method::GET, &path, None).await)
        }
    })
    .await
}

/// Starts a fresh payd on the same database, touches every payment of `prepared` through its
/// actor, reads RSS, and waits for the actors to passivate.
pub(crate) async fn measure(
    args: &Args,
    bin: &Path,
    db: &TestDb,
    data_dir: &Path,
    client: &awc::Client,
    prepared: Created,
) -> anyhow::Result<MemoryRun> {
    let Created {
        owner,
        ids,
        created,
        reads,
    } = prepared;
    // Every actor must still be live when the last one is touched: the idle timeout is the
    // time the touches should take at the measured read rate, with a margin.
    let estimate = ids.len() as f64 / reads.rate().max(1.0);
    let idle = ((estimate * 1.5 + 10.0).ceil() as u64).clamp(5, 900);
    let idle_s = idle.to_string();
    let mut payd = Payd::start(
        args,
        bin,
        &db.url,
        data_dir,
        &[("PAYD_ACTORS__IDLE_TIMEOUT_SECS", idle_s.as_str())],
    )?;
    let base = payd.base();
    let api = Api {
        base: base.clone().into(),
        ..owner.clone()
    };
    let c = args.concurrency;

    // Warm the request path (plain reads, no actor) so its allocations are in the baseline.
    read_all(&api, &ids, WARM_READS, false, c, Duration::from_secs(60)).await;
    actix_web::rt::time::sleep(Duration::from_secs(1)).await;
    let rss_fresh = payd.rss()?;

    // Touch every payment once through its actor: GET ?force_sync=true sends `Sync` to the
    // payment's actor, which loads it; an unconfirmed payment has no processor to ask, so
    // nothing is written.
    eprintln!(
        "payd-bench: memory: touching {} payments through their actors (idle timeout {idle} s)",
        ids.len()
    );
    let touch_limit = Duration::from_secs(idle.saturating_sub(2).max(1));
    let touch = read_all(&api, &ids, ids.len(), true, c, touch_limit).await;
    eprintln!("payd-bench:   {}", touch.summary());
    actix_web::rt::time::sleep(Duration::from_millis(500)).await;
    let rss_live = payd.rss()?;
    let live = live_actors(client, &base).await.unwrap_or(0);
    eprintln!(
        "payd-bench:   {live} live actors, RSS {} MiB (was {} MiB)",
        rss_live >> 20,
        rss_fresh >> 20
    );

    // Passivation: the sweeper runs every idle/2 s and stops actors idle longer than `idle`.
    let started = Instant::now();
    let deadline = started + Duration::from_secs(idle * 2 + 10);
    let mut live_after = live;
    while Instant::now() < deadline {
        actix_web::rt::time::sleep(Duration::from_millis(500)).await;
        live_after = live_actors(client, &base).await.unwrap_or(live_after);
        if live_after == 0 {
            break;
        }
    }
    let passivate_secs = started.elapsed().as_secs_f64();
    actix_web::rt::time::sleep(Duration::from_secs(2)).await;
    let rss_passivated = payd.rss()?;
    eprintln!(
        "payd-bench:   after passivation: {live_after} live, RSS {} MiB",
        rss_passivated >> 20
    );
    if live_after != 0 {
        let tail = payd.tail.lock().unwrap_or_else(|e| e.into_inner());
        eprintln!("payd-bench:   payd's last log lines: {tail:?}");
    }
    let retouched = if args.retouch {
        let again = read_all(&api, &ids, ids.len(), true, c, touch_limit).await;
        actix_web::rt::time::sleep(Duration::from_millis(500)).await;
        let rss = payd.rss()?;
        let live = live_actors(client, &base).await.unwrap_or(0);
        eprintln!(
            "payd-bench:   touched again: {}; {live} live, RSS {} MiB",
            again.summary(),
            rss >> 20
        );
        Some((live, rss))
    } else {
        None
    };
    payd.stop();
    Ok(MemoryRun {
        payments: ids.len(),
        create_secs: created.elapsed.as_secs_f64(),
        touch,
        idle_timeout_secs: idle,
        rss_fresh,
        rss_live,
        live,
        rss_passivated,
        live_after,
        passivate_secs,
        retouched,
    })
}

//! `payd-bench`: measures the real `payd` release binary against baselines on the same
//! machine and database, and prints (or writes into `docs/performance.md`) a markdown table.
//!
//! ```sh
//! cargo build --release --bin payd --bin payd-bench
//! cargo run --release --bin payd-bench -- --db sqlite|postgres [--seconds N] [--concurrency N] \
//!     [--write docs/performance.md] [--payd-bin PATH]
//! ```
//!
//! Baselines: raw single-row INSERTs through SeaORM (`payd::db::connect`, one INSERT per
//! transaction), an empty actix-web route, and raw awc POSTs to a local 2xx receiver. Then the
//! real `payd` (the binary next to this one, or the one `--payd-bin PATH` names, e.g. another
//! build for an A/B run) as a child process: create+confirm, a paced run at half of that rate,
//! the manual-capture flow, refunds, a mixed workload, webhook deliveries, and the RSS of live
//! payment actors before and after passivation. All traffic stays on 127.0.0.1; every phase
//! and every wait is bounded in time.
//!
//! This file holds the command line and the order of the phases; the phases live in
//! `baselines`, `payments`, `webhooks` and `memory`, on top of `load` (the load generator and
//! HTTP client) and `server` (the payd child process, the database, in-process servers);
//! `report` renders and writes the markdown.

mod baselines;
mod cpu;
mod ledger;
mod load;
mod memory;
mod payments;
mod report;
mod server;
mod webhooks;

use std::{
    path::{Path, PathBuf},
    sync::atomic::Ordering,
    time::Duration,
};

use anyhow::{bail, Context as _};
use awc::http::Method;
use clap::{Parser, ValueEnum};
use serde_json::Value;

use crate::{
    load::{client, send, Api},
    report::{Noise, Report},
    server::{Payd, TestDb},
    webhooks::Received,
};

#[derive(Parser, Clone)]
#[command(
    name = "payd-bench",
    about = "Benchmarks the payd release binary against raw baselines"
)]
struct Args {
    /// Which database payd (and the raw-insert baseline) runs on.
    #[arg(long, value_enum, required_unless_present = "guard")]
    db: Option<DbKind>,
    /// CI's guard: the webhook drain on SQLite and then on PostgreSQL, three rounds
    /// (`--webhook-events` each, `--db` and `--phases` ignored); exits 1 when PostgreSQL's best
    /// drain is less than half of SQLite's, or either best less than 2 % of the raw awc rate (4
    /// in flight) of its round.
    #[arg(long)]
    guard: bool,
    /// Length of each timed phase.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// Requests in flight in every closed-loop phase (baselines included).
    #[arg(long, default_value_t = 32)]
    concurrency: usize,
    /// Replace this database's section of a markdown file (created if missing).
    #[arg(long)]
    write: Option<PathBuf>,
    /// Live payment actors for the memory phase.
    #[arg(long, default_value_t = 100_000)]
    actors: usize,
    /// Payments (each one event) for the webhook phase.
    #[arg(long, default_value_t = 3_000)]
    webhook_events: usize,
    /// After passivation, touch every payment again and read RSS once more (shows whether
    /// the memory the first actors held is reused).
    #[arg(long)]
    retouch: bool,
    /// The paced end-to-end phase's rate (payments/s).
    #[arg(long, default_value_t = 250.0)]
    end_to_end_rate: f64,
    /// The paced phase's rate (payments/s) instead of half of the create+confirm rate: for
    /// comparing the latency of two builds at one rate.
    #[arg(long)]
    paced_rate: Option<f64>,
    /// Run only these phases (default: all).
    #[arg(long, value_enum, value_delimiter = ',')]
    phases: Vec<Phase>,
    /// A setting for the payd servers the bench starts, as `PAYD_…=value` (repeatable); it
    /// overrides the bench's own. For A/B runs of a setting; the report lists it.
    #[arg(long = "payd-env", value_parser = payd_setting)]
    payd_env: Vec<(String, String)>,
    /// The payd binary to run (default: `payd` next to this executable). For A/B runs of two
    /// builds; the report's command line shows it.
    #[arg(long = "payd-bin", value_name = "PATH")]
    payd_bin: Option<PathBuf>,
}

impl Args {
    fn wants(&self, phase: Phase) -> bool {
        self.phases.is_empty() || self.phases.contains(&phase)
    }

    /// The database of this run (`--db`, or the one the guard runs now).
    fn db(&self) -> DbKind {
        self.db.unwrap_or(DbKind::Sqlite)
    }
}

fn payd_setting(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if k.starts_with("PAYD_") => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("expected PAYD_NAME=value, got {s:?}")),
    }
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum, Debug)]
enum DbKind {
    Sqlite,
    Postgres,
}

impl DbKind {
    fn title(self) -> &'static str {
        match self {
            DbKind::Sqlite => "SQLite",
            DbKind::Postgres => "PostgreSQL",
        }
    }

    fn key(self) -> &'static str {
        match self {
            DbKind::Sqlite => "sqlite",
            DbKind::Postgres => "postgres",
        }
    }
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum, Debug)]
enum Phase {
    Inserts,
    EmptyRoute,
    Awc,
    Confirm,
    Paced,
    Manual,
    Refund,
    Mixed,
    Webhooks,
    EndToEnd,
    /// Payments at `--end-to-end-rate` a second, each timed until its webhook arrives.
    PacedEndToEnd,
    /// Refunds and payouts against one shop's balance from many connections.
    Ledger,
    Memory,
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    actix_web::rt::System::new().block_on(run(args))
}

/// The payd binary to start: `--payd-bin`, else `payd` next to this executable.
fn payd_bin(args: &Args) -> anyhow::Result<PathBuf> {
    if let Some(path) = &args.payd_bin {
        // Absolute, so that `Command` does not look a bare name up in PATH.
        return std::fs::canonicalize(path)
            .with_context(|| format!("--payd-bin {}", path.display()));
    }
    let bin = std::env::current_exe()?.with_file_name("payd");
    if !bin.exists() {
        bail!(
            "{} not found: build it with `cargo build --release --bin payd --bin payd-bench`",
            bin.display()
        );
    }
    Ok(bin)
}

async fn run(args: Args) -> anyhow::Result<()> {
    let bin = payd_bin(&args)?;
    if args.guard {
        return guard(&args, &bin).await;
    }
    let db = TestDb::create(args.db()).await?;
    eprintln!("payd-bench: database {}", db.url);
    let mut report = Report {
        noise: Noise::begin(),
        ..Report::default()
    };
    let result = measure(&args, &bin, &db, &mut report).await;
    report.noise.end();
    db.remove().await;
    result?;
    let section = report::render(&args, &report);
    println!("{section}");
    if let Some(path) = &args.write {
        report::write_section(path, args.db(), &section)?;
        eprintln!(
            "payd-bench: wrote the {} section of {}",
            args.db().title(),
            path.display()
        );
    }
    Ok(())
}

/// PostgreSQL's drain must reach this share of SQLite's in the same guard run.
const GUARD_PG_VS_SQLITE: f64 = 0.5;
/// Either drain must reach this share of the raw awc rate (4 in flight) of its run.
const GUARD_FLOOR: f64 = 0.02;
/// Rounds of the guard (SQLite, then PostgreSQL, each round); each database is judged by its
/// best round. One drain of 3 000 events lasts about a second, and on a shared 2-core VM one
/// such run of either database can fall by a third (PostgreSQL / SQLite measured 45–75 % over
/// six runs of one build); the regression the guard is for (#15) was a tenfold fall.
const GUARD_ROUNDS: usize = 3;

/// `--guard`: the webhook drain on both databases, judged by ratios of the same run only.
async fn guard(args: &Args, bin: &Path) -> anyhow::Result<()> {
    // Per database: its best drain and the raw awc rate of that round.
    let mut drains = [(DbKind::Sqlite, 0.0, 0.0), (DbKind::Postgres, 0.0, 0.0)];
    for round in 1..=GUARD_ROUNDS {
        for (kind, best_drain, best_awc) in &mut drains {
            let run = Args {
                db: Some(*kind),
                phases: vec![Phase::Awc, Phase::Webhooks],
                ..args.clone()
            };
            let db = TestDb::create(*kind).await?;
            let mut report = Report::default();
            let result = measure(&run, bin, &db, &mut report).await;
            db.remove().await;
            result?;
            let drained = report.webhooks.as_ref().map_or(0.0, |w| w.rate());
            let awc = report.awc_4.as_ref().map_or(0.0, |s| s.rate());
            println!(
                "round {round}, {}: webhook drain {drained:.0}/s = {:.1} % of raw awc (4 in flight) {awc:.0}/s",
                kind.title(),
                100.0 * drained / awc.max(1.0)
            );
            if drained > *best_drain {
                (*best_drain, *best_awc) = (drained, awc);
            }
        }
    }
    for (kind, drained, _) in &drains {
        println!("{}: best drain {drained:.0}/s", kind.title());
    }
    let mut failures = Vec::new();
    for (kind, drained, awc) in &drains {
        if *drained < GUARD_FLOOR * awc {
            failures.push(format!(
                "{} drains below {:.0} % of raw awc",
                kind.title(),
                100.0 * GUARD_FLOOR
            ));
        }
    }
    let (sqlite, postgres) = (drains[0].1, drains[1].1);
    println!(
        "PostgreSQL / SQLite: {:.0} % (at least {:.0} %)",
        100.0 * postgres / sqlite.max(1.0),
        100.0 * GUARD_PG_VS_SQLITE
    );
    if postgres < GUARD_PG_VS_SQLITE * sqlite {
        failures.push("PostgreSQL drains below half of SQLite's rate".into());
    }
    if !failures.is_empty() {
        bail!("webhook drain guard: {}", failures.join("; "));
    }
    println!("webhook drain guard: ok");
    Ok(())
}

async fn measure(args: &Args, bin: &Path, db: &TestDb, report: &mut Report) -> anyhow::Result<()> {
    let secs = Duration::from_secs(args.seconds);
    let c = args.concurrency;
    let client = client();

    // (a) raw single-row INSERTs, one per transaction, with payd's own connection settings.
    if args.wants(Phase::Inserts) {
        eprintln!("payd-bench: raw single-row inserts");
        report.raw_inserts = Some(baselines::raw_inserts_best(&db.url, c, secs).await?);
    }

    // (b) an empty actix-web route, driven like payd (same body as create+confirm).
    if args.wants(Phase::EmptyRoute) {
        eprintln!("payd-bench: empty actix-web route");
        report.empty_route = Some(baselines::empty_route(&client, c, secs).await?);
    }

    // The receiver: raw POSTs and payd's webhook deliveries.
    let (receiver, received) = webhooks::receiver()?;

    // (c) raw awc POSTs of an event-sized body to the receiver.
    if args.wants(Phase::Awc) {
        eprintln!("payd-bench: raw awc POSTs");
        let (full, four) = baselines::raw_awc(&client, &receiver.url, c, secs).await?;
        report.awc_full = Some(full);
        report.awc_4 = Some(four);
    }

    report.raw_counted = received.raw.load(Ordering::Relaxed);

    let payd_phases = [
        Phase::Confirm,
        Phase::Paced,
        Phase::Manual,
        Phase::Refund,
        Phase::Mixed,
        Phase::Webhooks,
        Phase::EndToEnd,
        Phase::PacedEndToEnd,
        Phase::Ledger,
        Phase::Memory,
    ];
    if payd_phases.iter().any(|p| args.wants(*p)) {
        let result = measure_payd(args, bin, db, report, &client, &receiver.url, &received).await;
        receiver.stop().await;
        result?;
    } else {
        receiver.stop().await;
    }
    Ok(())
}

/// The phases against payd itself, on one server (the memory phase starts a second one).
#[allow(clippy::too_many_arguments)]
async fn measure_payd(
    args: &Args,
    bin: &Path,
    db: &TestDb,
    report: &mut Report,
    client: &awc::Client,
    receiver: &str,
    received: &actix_web::web::Data<Received>,
) -> anyhow::Result<()> {
    let data_dir = db.dir.join("data");
    // The webhook phase's receiver holds its first requests while the payments are created:
    // a timeout (and a lease) longer than that keeps them from being retried meanwhile.
    let mut payd = Payd::start(args, bin, &db.url, &data_dir, &webhooks::BENCH_WEBHOOKS)?;
    let base = payd.base();
    if let Ok(v) = send(client, Method::GET, &format!("{base}/version"), &[], None).await {
        let v: Value = serde_json::from_slice(&v).unwrap_or_default();
        report.payd_version = v["version"].as_str().map(str::to_owned);
    }
    let api = Api::create_merchant(client, &base, "bench").await?;

    let meter = cpu::Meter::new(Some(payd.pid()), &db.url)
        .await?
        .with_statements(&base);
    payments::measure(args, &api, &meter, report).await;

    if args.wants(Phase::Webhooks) {
        eprintln!(
            "payd-bench: webhook deliveries ({} events)",
            args.webhook_events
        );
        let c = args.concurrency;
        report.webhooks =
            Some(webhooks::drain(&api, c, args.webhook_events, receiver, received, &meter).await?);
    }

    if args.wants(Phase::EndToEnd) {
        eprintln!(
            "payd-bench: end to end ({} payments and their events)",
            args.webhook_events
        );
        let c = args.concurrency;
        report.end_to_end =
            Some(webhooks::end_to_end(&api, c, args.webhook_events, receiver, received).await?);
    }

    if args.wants(Phase::PacedEndToEnd) {
        let rate = args.end_to_end_rate;
        eprintln!("payd-bench: paced end to end at {rate:.0}/s (request → webhook received)");
        let secs = std::time::Duration::from_secs(args.seconds);
        let c = args.concurrency;
        let stats = webhooks::paced_end_to_end(&api, c, rate, secs, receiver, received).await?;
        eprintln!("payd-bench:   {}", stats.summary());
        report.paced_end_to_end = Some((rate, stats));
    }

    if args.wants(Phase::Ledger) {
        eprintln!("payd-bench: ledger (refunds and payouts against one shop's balance)");
        let secs = std::time::Duration::from_secs(args.seconds);
        let run = ledger::measure(&api, args.concurrency, secs, &meter).await?;
        eprintln!(
            "payd-bench:   {}; {} refunds, {} payouts, {} payouts refused for the balance; overdrafts {}, the balance adds up: {}",
            run.stats.summary(),
            run.refunds,
            run.payouts,
            run.refused,
            run.overdrafts(),
            run.adds_up()
        );
        report.ledger = Some(run);
    }

    if args.wants(Phase::Memory) {
        // The payments are created here (no actor is involved); the actors live in a fresh
        // server whose idle timeout lets them all be live at once, then passivate.
        let created = memory::create_payments(args, client, &base).await?;
        payd.stop();
        report.memory = Some(memory::measure(args, bin, db, &data_dir, client, created).await?);
    } else {
        payd.stop();
    }
    Ok(())
}

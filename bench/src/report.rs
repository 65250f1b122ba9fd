//! The report: the markdown section a run prints (the table against the targets, then the
//! baselines and details), the machine and the noise on it during the run, and writing the
//! section between its database's markers in a markdown file (`--write`).

use std::{path::Path, process::Command, time::Instant};

use payd::clock::{Clock, SystemClock};

use crate::{
    baselines::RawInserts,
    cpu::PerOp,
    load::Stats,
    memory::{MemoryRun, WARM_READS},
    webhooks::WebhookRun,
    Args, DbKind,
};

const BEGIN: &str = "<!-- payd-bench:";

/// Everything one run measured.
#[derive(Default)]
pub(crate) struct Report {
    pub(crate) raw_inserts: Option<RawInserts>,
    pub(crate) empty_route: Option<Stats>,
    pub(crate) awc_full: Option<Stats>,
    pub(crate) awc_4: Option<Stats>,
    pub(crate) confirm: Option<Stats>,
    pub(crate) paced: Option<(f64, Stats)>,
    pub(crate) manual: Option<Stats>,
    pub(crate) refund: Option<Stats>,
    pub(crate) mixed: Option<Stats>,
    pub(crate) webhooks: Option<WebhookRun>,
    pub(crate) end_to_end: Option<WebhookRun>,
    /// The paced end-to-end phase: its rate, and each payment's time to its webhook.
    pub(crate) paced_end_to_end: Option<(f64, Stats)>,
    pub(crate) ledger: Option<crate::ledger::LedgerRun>,
    pub(crate) memory: Option<MemoryRun>,
    pub(crate) payd_version: Option<String>,
    /// POSTs the receiver counted during the raw awc phases.
    pub(crate) raw_counted: u64,
    pub(crate) noise: Noise,
}

fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| {
            m.lines()
                .find_map(|l| l.strip_prefix("MemTotal:"))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        })
        .map_or("?".into(), |kb| {
            format!("{:.1} GiB", kb as f64 / (1024.0 * 1024.0))
        });
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|c| {
            c.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).trim().to_owned())
        })
        .unwrap_or_else(|| "?".into());
    format!("{cores} cores (nproc), {mem} RAM, {cpu}")
}

fn rustc_version() -> String {
    Command::new("rustc")
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_else(|| "rustc not found".into())
}

/// Jiffies (USER_HZ) the whole machine spent busy, from the `cpu` line of /proc/stat.
fn machine_busy() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let f: Vec<u64> = stat
        .lines()
        .next()?
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    // user nice system idle iowait irq softirq steal ...: everything but idle and iowait.
    Some(f.iter().sum::<u64>() - f.get(3)? - f.get(4)?)
}

/// Jiffies this process and its waited-for children (the payd servers) spent on a CPU.
fn own_busy() -> Option<u64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command's closing parenthesis; utime is field 14 of the whole line.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<u64> = rest
        .split_whitespace()
        .skip(11)
        .take(4)
        .filter_map(|v| v.parse().ok())
        .collect();
    Some(f.iter().sum())
}

/// What else ran on the machine during a run.
#[derive(Default)]
pub(crate) struct Noise {
    start: Option<(Instant, u64, u64)>,
    /// (cores' worth of CPU used by other processes, on average; load average at the end).
    result: Option<(f64, String)>,
}

impl Noise {
    pub(crate) fn begin() -> Noise {
        Noise {
            start: machine_busy()
                .zip(own_busy())
                .map(|(m, o)| (Instant::now(), m, o)),
            result: None,
        }
    }

    pub(crate) fn end(&mut self) {
        let Some((at, m0, o0)) = self.start else {
            return;
        };
        let (Some(m1), Some(o1)) = (machine_busy(), own_busy()) else {
            return;
        };
        let secs = at.elapsed().as_secs_f64().max(1e-9);
        let other = (m1.saturating_sub(m0) as f64 - o1.saturating_sub(o0) as f64).max(0.0);
        let load = std::fs::read_to_string("/proc/loadavg")
            .ok()
            .and_then(|l| l.split_whitespace().next().map(str::to_owned))
            .unwrap_or_default();
        self.result = Some((other / 100.0 / secs, load));
    }
}

/// The commit of the work tree the bench runs in, if it is a git checkout.
fn git_commit() -> Option<String> {
    let out = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .output()
        .ok()
        .filter(|o| o.status.success())?;
    let dirty = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .ok()
        .is_some_and(|o| !o.stdout.is_empty());
    let commit = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    Some(if dirty {
        format!("{commit}, with uncommitted changes")
    } else {
        commit
    })
}

fn command_line() -> String {
    let args: Vec<String> = std::env::args().skip(1).collect();
    format!("cargo run --release --bin payd-bench -- {}", args.join(" "))
}

fn pct(x: f64) -> String {
    format!("{:.0} %", x * 100.0)
}

fn verdict(met: bool) -> &'static str {
    if met {
        "**met**"
    } else {
        "**not met**"
    }
}

fn lat(s: &Stats) -> String {
    format!("{:.1} / {:.1} ms", s.pct_ms(50.0), s.pct_ms(99.0))
}

fn errs(s: &Stats) -> String {
    if s.errors == 0 {
        String::new()
    } else {
        format!(" ({} errors)", s.errors)
    }
}

pub(crate) fn render(args: &Args, r: &Report) -> String {
    let mut out = String::new();
    let mut line = |s: String| {
        out.push_str(&s);
        out.push('\n');
    };
    line(format!("## {}", args.db().title()));
    line(String::new());
    line(format!(
        "Measured {} on {}; payd {}{}, {}; {} requests in flight, {} s per phase.",
        SystemClock.now().format("%Y-%m-%d %H:%M UTC"),
        machine(),
        r.payd_version.as_deref().unwrap_or("?"),
        git_commit().map_or(String::new(), |c| format!(" (git {c})")),
        rustc_version(),
        args.concurrency,
        args.seconds
    ));
    line(String::new());
    line(format!("Command: `{}`", command_line()));
    if let Some((other, load)) = &r.noise.result {
        line(String::new());
        line(format!(
            "Other processes on the machine used {other:.2} cores on average during the run (1-minute load average at its end: {load}); the load generator, the in-process servers and payd share the same cores."
        ));
    }
    line(String::new());
    line("| measure | payd | baseline | ratio | target | status |".into());
    line("| --- | ---: | ---: | ---: | --- | --- |".into());
    let raw = r.raw_inserts.as_ref().map(|i| i.best.rate());
    if let Some(s) = &r.confirm {
        let (base, ratio, status) = match raw {
            Some(b) => (
                format!(
                    "{b:.0} raw INSERTs/s (pool of {})",
                    r.raw_inserts.as_ref().map_or(0, |i| i.pool)
                ),
                pct(s.rate() / b),
                verdict(s.rate() / b >= 0.5).to_owned(),
            ),
            None => ("—".into(), "—".into(), "—".into()),
        };
        line(format!(
            "| create+confirm, automatic capture (payments/s) | {:.0}{} | {base} | {ratio} | ≥ 50 % | {status} |",
            s.rate(),
            errs(s)
        ));
        line(format!(
            "| create+confirm latency p50 / p99 (closed loop) | {} | | | | |",
            lat(s)
        ));
        if let Some(e) = &r.empty_route {
            line(format!(
                "| create+confirm vs an empty actix-web route (requests/s) | {:.0} | {:.0} empty-route requests/s | {} | | |",
                s.rate(),
                e.rate(),
                pct(s.rate() / e.rate())
            ));
        }
    }
    if let Some(l) = &r.ledger {
        let s = &l.stats;
        let sound = l.overdrafts() == 0 && l.adds_up();
        let (base, ratio, status) = match raw {
            Some(b) => (
                format!("{b:.0} raw INSERTs/s"),
                pct(s.rate() / b),
                verdict(s.rate() / b >= 0.5 && sound).to_owned(),
            ),
            None => ("—".into(), "—".into(), verdict(sound).to_owned()),
        };
        line(format!(
            "| ledger: refunds and payouts against one shop's balance (postings/s; {} refunds, {} payouts, {} payouts refused for the balance; overdrafts {}; the balance adds up: {}) | {:.0}{} | {base} | {ratio} | ≥ 50 %, 0 overdrafts | {status} |",
            l.refunds,
            l.payouts,
            l.refused,
            l.overdrafts(),
            if l.adds_up() { "yes" } else { "**no**" },
            s.rate(),
            errs(s)
        ));
    }
    if let Some((rate, s)) = &r.paced_end_to_end {
        line(format!(
            "| p99 paced end to end (create+confirm → `payment_succeeded` received, at {rate:.0}/s; p50 {:.1} ms) | {:.1} ms{} | | | ≤ 20 ms | {} |",
            s.pct_ms(50.0),
            s.pct_ms(99.0),
            errs(s),
            verdict(s.pct_ms(99.0) <= 20.0 && s.errors == 0)
        ));
    }
    if let Some((rate, s)) = &r.paced {
        line(format!(
            "| p99 at half of the max rate (create+confirm paced at {rate:.0}/s; p50 {:.1} ms) | {:.1} ms{} | | | ≤ 20 ms | {} |",
            s.pct_ms(50.0),
            s.pct_ms(99.0),
            errs(s),
            verdict(s.pct_ms(99.0) <= 20.0)
        ));
    }
    if let Some(s) = &r.manual {
        line(format!(
            "| manual capture: create+confirm then capture (flows/s; p50 / p99 per flow {}) | {:.0}{} | | | | |",
            lat(s),
            s.rate(),
            errs(s)
        ));
    }
    if let Some(s) = &r.refund {
        line(format!(
            "| refunds of captured payments (refunds/s; p50 / p99 {}) | {:.0}{} | | | | |",
            lat(s),
            s.rate(),
            errs(s)
        ));
    }
    if let Some(s) = &r.mixed {
        line(format!(
            "| mixed: 40 % create+confirm, 20 % create manual, 20 % capture, 10 % refund, 10 % read (requests/s; p50 / p99 {}) | {:.0}{} | | | | |",
            lat(s),
            s.rate(),
            errs(s)
        ));
    }
    if let Some(w) = &r.webhooks {
        let (base, ratio, status) = match &r.awc_full {
            Some(a) => (
                format!("{:.0} raw awc POSTs/s", a.rate()),
                pct(w.rate() / a.rate()),
                verdict(w.rate() / a.rate() >= 0.5 && w.received >= w.events).to_owned(),
            ),
            None => ("—".into(), "—".into(), "—".into()),
        };
        line(format!(
            "| webhook deliveries (events/s, a queue of events drained) | {:.0} | {base} | {ratio} | ≥ 50 % | {status} |",
            w.rate()
        ));
        if let Some(a4) = &r.awc_4 {
            line(format!(
                "| webhook deliveries vs raw awc with 4 in flight (payd's per-endpoint cap) | {:.0} | {:.0} raw awc POSTs/s | {} | | |",
                w.rate(),
                a4.rate(),
                pct(w.rate() / a4.rate())
            ));
        }
    }
    if let Some(w) = &r.end_to_end {
        let (base, ratio, status) = match &r.awc_full {
            Some(a) => (
                format!("{:.0} raw awc POSTs/s", a.rate()),
                pct(w.rate() / a.rate()),
                verdict(w.rate() / a.rate() >= 0.1 && w.received >= w.events).to_owned(),
            ),
            None => ("—".into(), "—".into(), "—".into()),
        };
        line(format!(
            "| end to end: payments created and their events received (events/s) | {:.0} | {base} | {ratio} | ≥ 10 % | {status} |",
            w.rate()
        ));
    }
    if let Some(m) = &r.memory {
        line(format!(
            "| RSS per live idle payment actor ({} live) | {:.2} KiB | | | ≤ 2 KiB | {} |",
            m.live,
            m.per_actor() / 1024.0,
            verdict(m.per_actor() <= 2048.0 && m.live as usize >= m.payments * 9 / 10)
        ));
        line(format!(
            "| memory returned after passivation ({} live left) | {} ({} MiB of {} MiB) | | | returned (≥ 50 %) | {} |",
            m.live_after,
            pct(m.returned()),
            m.rss_live.saturating_sub(m.rss_passivated) >> 20,
            m.rss_live.saturating_sub(m.rss_fresh) >> 20,
            verdict(m.returned() >= 0.5 && m.live_after == 0)
        ));
    }
    for l in cpu_table(r) {
        line(l);
    }
    line(String::new());
    line("Baselines and details:".into());
    line(String::new());
    if let Some(i) = &r.raw_inserts {
        let tried: Vec<String> = i
            .tried
            .iter()
            .map(|(pool, rate)| format!("{pool}: {rate:.0}/s"))
            .collect();
        line(format!(
            "- raw single-row INSERT, one per transaction, through `payd::db::connect` (payd's pragmas), at the best of the pool sizes tried ({}): {:.0}/s with a pool of {}; {}",
            tried.join(", "),
            i.best.rate(),
            i.pool,
            i.best.summary()
        ));
    }
    if let Some(s) = &r.empty_route {
        line(format!(
            "- empty actix-web route (in-process, {} workers, POST with the create+confirm body, 200 without body): {:.0}/s; {}",
            std::thread::available_parallelism().map_or(0, |n| n.get()),
            s.rate(),
            s.summary()
        ));
    }
    if let Some(s) = &r.awc_full {
        line(format!(
            "- raw awc POSTs of a 1.5 KB event-sized body to an in-process receiver answering 204, {} in flight: {:.0}/s; {}",
            args.concurrency,
            s.rate(),
            s.summary()
        ));
    }
    if let Some(s) = &r.awc_4 {
        line(format!(
            "- the same with 4 in flight (the receiver counted {} POSTs in both runs): {:.0}/s; {}",
            r.raw_counted,
            s.rate(),
            s.summary()
        ));
    }
    for (name, s) in [
        ("create+confirm", r.confirm.as_ref()),
        ("manual capture flow", r.manual.as_ref()),
        ("refund", r.refund.as_ref()),
        ("mixed", r.mixed.as_ref()),
    ] {
        if let Some(s) = s {
            line(format!("- {name}: {}", s.summary()));
        }
    }
    if let Some((_, s)) = &r.paced {
        line(format!(
            "- paced create+confirm (latency from the planned start): {}",
            s.summary()
        ));
    }
    if let Some((rate, s)) = &r.paced_end_to_end {
        line(format!(
            "- paced end to end at {rate:.0}/s (from each request's sending to its `payment_succeeded` at the receiver): {}",
            s.summary()
        ));
    }
    if let Some(w) = &r.webhooks {
        line(format!(
            "- webhooks: {} payments created (create+confirm, one `payment_succeeded` each) in {:.1} s while the receiver held its answers (payd with `PAYD_WEBHOOKS__REQUEST_TIMEOUT_SECS=60`, `PAYD_WEBHOOKS__LEASE_SECS=180` so the held requests are not retried meanwhile); once it answered, {} distinct events received ({} requests) in {:.2} s ({:.0}/s)",
            w.events,
            w.create_secs,
            w.received,
            w.requests,
            w.drain_secs,
            w.rate()
        ));
    }
    if let Some(w) = &r.end_to_end {
        line(format!(
            "- end to end: {} payments created (create+confirm, {} in flight) with the receiver answering 204 at once; {} distinct events received ({} requests) from the first request to the last event in {:.2} s ({:.0}/s; the creates alone took {:.2} s)",
            w.events,
            w.concurrency,
            w.received,
            w.requests,
            w.drain_secs,
            w.rate(),
            w.create_secs
        ));
    }
    if let Some(m) = &r.memory {
        line(format!(
            "- memory: {} payments created without confirm in {:.1} s; a fresh server (PAYD_ACTORS__IDLE_TIMEOUT_SECS={}, long enough for every actor to be live at once) after {WARM_READS} warm-up reads had RSS {:.1} MiB; each payment touched once by `GET /payments/{{id}}?force_sync=true` (goes through the actor; an unconfirmed payment has no processor to ask, so nothing is written): {}; then RSS {:.1} MiB with {} live actors (`payd_actors_live`); {:.1} s later {} live, RSS {:.1} MiB",
            m.payments,
            m.create_secs,
            m.idle_timeout_secs,
            m.rss_fresh as f64 / 1048576.0,
            m.touch.summary(),
            m.rss_live as f64 / 1048576.0,
            m.live,
            m.passivate_secs,
            m.live_after,
            m.rss_passivated as f64 / 1048576.0
        ));
        if let Some((live, rss)) = m.retouched {
            line(format!(
                "- `--retouch`: every payment touched again after passivation: {live} live actors, RSS {:.1} MiB",
                rss as f64 / 1048576.0
            ));
        }
    }
    out
}

/// Replaces (or adds) this database's section between its markers.
pub(crate) fn write_section(path: &Path, db: DbKind, section: &str) -> anyhow::Result<()> {
    let begin = format!("{BEGIN}{}:begin -->", db.key());
    let end = format!("{BEGIN}{}:end -->", db.key());
    let doc = std::fs::read_to_string(path).unwrap_or_else(|_| {
        format!(
            "# Performance\n\nWritten by `payd-bench` (`bench/`); each run replaces its database's section.\n\n{BEGIN}sqlite:begin -->\n{BEGIN}sqlite:end -->\n\n{BEGIN}postgres:begin -->\n{BEGIN}postgres:end -->\n"
        )
    });
    let block = format!("{begin}\n{section}{end}");
    let doc = match (doc.find(&begin), doc.find(&end)) {
        (Some(b), Some(e)) if e > b => format!("{}{block}{}", &doc[..b], &doc[e + end.len()..]),
        _ => format!("{}\n{block}\n", doc.trim_end()),
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::write(path, doc)?;
    Ok(())
}

/// The CPU each operation cost, per phase and process, beside the raw insert's.
fn cpu_table(r: &Report) -> Vec<String> {
    let us = |v: Option<f64>| v.map_or("—".to_owned(), |us| format!("{us:.0} µs"));
    // What a raw insert cost in all: its client (this process) and the database.
    let insert = r
        .raw_inserts
        .as_ref()
        .and_then(|i| i.best.cpu)
        .map(|c| c.load + c.database.unwrap_or(0.0));
    let mut rows = Vec::new();
    let mut row = |name: &str, cpu: Option<PerOp>, service: bool| {
        let Some(c) = cpu else { return };
        let total = if service {
            c.service()
        } else {
            c.load + c.database.unwrap_or(0.0)
        };
        let ratio = insert.map_or("—".to_owned(), |i| {
            format!("{:.1} ×", total / i.max(1e-9))
        });
        let statements = c.statements.map_or("—".to_owned(), |s| format!("{s:.1}"));
        rows.push(format!(
            "| {name} | {} | {} | {} | {:.0} µs | {ratio} | {statements} |",
            us(c.payd),
            us(c.database),
            us(Some(total)),
            c.load,
        ));
    };
    if let Some(i) = &r.raw_inserts {
        row(
            "raw single-row insert (client: this process)",
            i.best.cpu,
            false,
        );
    }
    if let Some(s) = &r.empty_route {
        row(
            "empty actix-web route (client and server: this process)",
            s.cpu,
            false,
        );
    }
    if let Some(s) = &r.awc_4 {
        row(
            "raw awc POST, 4 in flight (client and receiver: this process)",
            s.cpu,
            false,
        );
    }
    for (name, stats) in [
        ("create+confirm", r.confirm.as_ref()),
        ("create+confirm, paced", r.paced.as_ref().map(|(_, s)| s)),
        ("manual capture flow", r.manual.as_ref()),
        ("refund", r.refund.as_ref()),
        ("mixed (per request)", r.mixed.as_ref()),
        ("ledger posting", r.ledger.as_ref().map(|l| &l.stats)),
    ] {
        row(name, stats.and_then(|s| s.cpu), true);
    }
    if let Some(w) = &r.webhooks {
        row("webhook delivery (per event, the drain)", w.cpu, true);
    }
    if rows.is_empty() {
        return rows;
    }
    let mut out = vec![
        String::new(),
        "CPU per operation (user + system from `/proc/<pid>/stat`; the database is PostgreSQL's \
         backends for the bench's database, or, on SQLite, inside payd; the load generator's is \
         reported apart and never counted as payd's), and payd's statements per operation          (`payd_database_statements_total` over the phase, its background polls included):"
            .to_owned(),
        String::new(),
        "| operation | payd | database | in all (payd + database; a baseline: all of it) | load generator | in all vs a raw insert | statements |".to_owned(),
        "| --- | --- | --- | --- | --- | --- | --- |".to_owned(),
    ];
    out.extend(rows);
    out
}

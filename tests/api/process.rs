//! The `payd` binary as an operator runs it: the CLI, start-up, demo keys, SIGTERM, and
//! several instances starting at once on one database.

use crate::common;

use std::{
    process::Command,
    time::{Duration, Instant},
};

use common::{
    child::{
        create_merchant, fast_retries, free_port, get, merchant_id_of, merchant_with_endpoint, pay,
        payd, post_json, Server, BIN,
    },
    TestDb,
};

#[actix_web::test]
async fn cli_creates_a_merchant_whose_keys_work() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let out = payd(&db.url, dir.path())
        .env("PAYD_SANDBOX__DEMO_MERCHANT", "false")
        .args(["admin", "create-merchant", "--name", "Acme"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let created: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|_| panic!("JSON on stdout: {}", String::from_utf8_lossy(&out.stdout)));
    let key = created["secret_key"].as_str().unwrap().to_owned();
    assert!(created["merchant_id"].as_str().unwrap().starts_with("mer_"));
    assert!(created["profile_id"].as_str().unwrap().starts_with("prof_"));

    let server = Server::start({
        let mut c = payd(&db.url, dir.path());
        c.env("PAYD_SANDBOX__DEMO_MERCHANT", "false");
        c
    });
    let (status, account) = get(server.port, "/account", Some(&key)).await;
    assert_eq!(status, 200);
    assert_eq!(account["merchant_id"], created["merchant_id"]);
    let status = server.terminate();
    assert!(status.success(), "graceful exit on SIGTERM: {status}");
}

#[actix_web::test]
async fn first_start_creates_demo_keys_once_and_logs_no_key() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}/payd.db?mode=rwc", dir.path().display());
    let server = Server::start(payd(&url, dir.path()));
    let keys: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("demo-keys.json")).unwrap()).unwrap();
    let secret = keys["secret_key"].as_str().unwrap().to_owned();
    let (status, _) = get(server.port, "/account", Some(&secret)).await;
    assert_eq!(status, 200);
    let (status, _) = get(server.port, "/account", None).await;
    assert_eq!(status, 401);
    // The demo shop's key needs no x-profile-id for a payment.
    let shop_key = keys["shop_secret_key"].as_str().unwrap().to_owned();
    let body = serde_json::json!({"amount": 500, "currency": "USD", "confirm": true,
        "payment_method_data": common::card("4242424242424242")});
    let (status, payment) = post_json(server.port, "/payments", &shop_key, None, body).await;
    assert_eq!(
        (status, &payment["status"]),
        (201, &serde_json::json!("succeeded")),
        "{payment}"
    );
    let logs = server.output_so_far().join("\n");
    // Start-up says where to go and prints a line to paste, with the shop's key.
    let ready = server.ready.clone();
    assert!(
        ready.contains(&format!("http://127.0.0.1:{}/docs", server.port)),
        "the ready line names the API reference: {ready}"
    );
    let (status, printed) = server.stop_and_read_stdout();
    assert!(status.success());
    assert!(
        printed.contains(&format!("export KEY={shop_key}")),
        "{printed}"
    );
    // The keys are printed once for the operator, but never as part of a log line.
    for line in logs.lines().filter(|l| l.starts_with('{')) {
        assert!(
            !line.contains(&secret) && !line.contains(&shop_key),
            "a log line carries a key: {line}"
        );
    }

    let again = Server::start(payd(&url, dir.path()));
    let written_again: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("demo-keys.json")).unwrap()).unwrap();
    assert_eq!(
        written_again, keys,
        "the demo merchant is created only once"
    );
    assert!(again.terminate().success());
}

#[test]
fn an_invalid_setting_stops_start_up_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let out = payd("sqlite::memory:", dir.path())
        .env("PAYD_ACTORS__MAILBOX_CAPACITY", "lots")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("mailbox_capacity"), "{err}");
}

#[test]
fn a_busy_port_stops_start_up_naming_the_address_and_the_setting() {
    let dir = tempfile::tempdir().unwrap();
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let address = taken.local_addr().unwrap().to_string();
    let out = payd("sqlite::memory:", dir.path())
        .env("PAYD_LISTEN", &address)
        .env("PAYD_SANDBOX__DEMO_MERCHANT", "false")
        .arg("serve")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&address) && err.contains("PAYD_LISTEN"),
        "{err}"
    );
}

#[actix_web::test]
async fn two_instances_start_at_once_on_one_fresh_database() {
    let db = TestDb::new().await;
    if !db.is_postgres() {
        // SQLite is one process's embedded file; several instances need PostgreSQL.
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cmd = || {
        let mut c = payd(&db.url, dir.path());
        c.env("PAYD_SANDBOX__DEMO_MERCHANT", "false");
        c
    };
    let (a, b) = std::thread::scope(|s| {
        let a = s.spawn(|| Server::start(cmd()));
        let b = s.spawn(|| Server::start(cmd()));
        (a.join().unwrap(), b.join().unwrap())
    });
    assert_eq!(get(a.port, "/health/ready", None).await.0, 200);
    assert_eq!(get(b.port, "/health/ready", None).await.0, 200);
    assert!(a.terminate().success());
    assert!(b.terminate().success());
}

fn distinct_ids(received: &[common::receiver::Received]) -> std::collections::HashSet<String> {
    received
        .iter()
        .map(|r| r.header("webhook-id").to_owned())
        .collect()
}

#[actix_web::test]
async fn events_pending_at_a_kill_9_are_delivered_after_the_restart() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let hook_port = free_port();
    let hook_url = format!("http://127.0.0.1:{hook_port}/hooks");
    let server = Server::start(fast_retries(payd(&db.url, dir.path())));
    let (key, shop) = merchant_with_endpoint(server.port, &hook_url).await;
    let mut payments = Vec::new();
    for _ in 0..20 {
        payments.push(pay(server.port, &key, &shop).await);
    }
    // The receiver is down: deliveries fail and wait for their retry when the server dies.
    server.kill9();

    let receiver = common::receiver::Receiver::start_on(hook_port).await;
    let server = Server::start(fast_retries(payd(&db.url, dir.path())));
    let got = receiver.wait_for(20).await;
    let ids = distinct_ids(&got);
    assert_eq!(ids.len(), 20, "every event arrives");
    assert!(
        got.len() <= 20 + 4,
        "a duplicate only for an attempt in flight at the kill: {}",
        got.len()
    );
    assert!(server.terminate().success());
}

/// SIGTERM while webhook requests are in flight: payd waits for their answers and records
/// them, and hands back the deliveries it had claimed but not sent. With leases far longer
/// than the test, an unrecorded answer would never be sent again and an unreturned claim would
/// wait out its lease: after the restart every event arrives, each exactly once.
/// Waits (bounded) until payd has recorded every delivery as delivered. A delivery is sent only
/// while it is pending, and recorded only after its answer, so after this every request payd
/// will ever send has reached the receiver: a duplicate would be there, with no fixed wait.
async fn all_delivered(db: &TestDb) {
    use sea_orm::{ConnectionTrait, Database, Statement};
    let conn = Database::connect(db.url.as_str()).await.expect("connect");
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let row = conn
            .query_one_raw(Statement::from_string(
                conn.get_database_backend(),
                "SELECT COUNT(*) AS n FROM deliveries WHERE status <> 'delivered'",
            ))
            .await
            .expect("count the deliveries")
            .expect("a count");
        let open: i64 = row.try_get("", "n").expect("the count");
        if open == 0 {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{open} deliveries never recorded"
        );
        actix_web::rt::time::sleep(Duration::from_millis(50)).await;
    }
}

#[actix_web::test]
async fn a_graceful_stop_records_webhooks_in_flight_and_hands_back_the_rest() {
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let receiver = common::receiver::Receiver::start().await;
    receiver.set_default(common::receiver::Reply::slow(Duration::from_millis(800)));
    let start = || {
        let mut cmd = fast_retries(payd(&db.url, dir.path()));
        cmd.env("PAYD_WEBHOOKS__LEASE_SECS", "600");
        Server::start(cmd)
    };
    let server = start();
    let (key, shop) = merchant_with_endpoint(server.port, &receiver.url).await;
    let total = 12;
    for _ in 0..total {
        pay(server.port, &key, &shop).await;
    }
    // At least one request is in flight (at most 4: the per-endpoint limit), the rest queued.
    receiver.wait_for(1).await;
    assert!(server.terminate().success());
    let at_stop = receiver.received().len();
    assert!(at_stop < total, "stopped before every event was sent");

    let server = start();
    let got = receiver.wait_for(total).await;
    assert_eq!(distinct_ids(&got).len(), total, "every event arrives");
    all_delivered(&db).await;
    assert_eq!(receiver.received().len(), total, "none sent twice");
    assert!(server.terminate().success());
}

#[actix_web::test]
async fn two_instances_deliver_a_burst_exactly_once() {
    let db = TestDb::new().await;
    if !db.is_postgres() {
        // Several instances need PostgreSQL.
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let receiver = common::receiver::Receiver::start().await;
    let a = Server::start(fast_retries(payd(&db.url, dir.path())));
    let b = Server::start(fast_retries(payd(&db.url, dir.path())));
    let (key, shop) = merchant_with_endpoint(a.port, &receiver.url).await;
    let total = 1000;
    let ports = [a.port, b.port];
    for chunk in 0..(total / 20) {
        let batch = (0..20).map(|i| pay(ports[(chunk + i) % 2], &key, &shop));
        futures_util::future::join_all(batch).await;
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while receiver.received().len() < total && Instant::now() < deadline {
        actix_web::rt::time::sleep(Duration::from_millis(100)).await;
    }
    all_delivered(&db).await;
    let got = receiver.received();
    let ids = distinct_ids(&got);
    println!(
        "two instances: {} events, {} requests received",
        ids.len(),
        got.len()
    );
    assert_eq!(ids.len(), total, "none missing");
    assert_eq!(got.len(), total, "no duplicate after a 2xx");
    assert!(a.terminate().success());
    assert!(b.terminate().success());
}

/// One request of the crash test's load: which payment, what, and how it was answered.
struct Outcome {
    payment_id: String,
    op: &'static str,
    /// `None`: no answer (the instance was down or died mid-request).
    status: Option<u16>,
    body: serde_json::Value,
}

/// A request to whichever instance is up at that port; a refused connection is "no answer".
async fn try_post(
    port: u16,
    path: &str,
    key: &str,
    shop: &str,
    body: serde_json::Value,
) -> (Option<u16>, serde_json::Value) {
    let req = common::client()
        .post(format!("http://127.0.0.1:{port}{path}"))
        .timeout(Duration::from_secs(10))
        .insert_header(("api-key", key))
        .insert_header(("x-profile-id", shop));
    match req.send_json(&body).await {
        Ok(mut res) => {
            let bytes = res.body().await.unwrap_or_default();
            (
                Some(res.status().as_u16()),
                serde_json::from_slice(&bytes).unwrap_or_default(),
            )
        }
        Err(_) => (None, serde_json::Value::Null),
    }
}

#[actix_web::test]
async fn kill_9_at_random_moments_loses_no_acknowledged_change_and_no_event() {
    let db = TestDb::new().await;
    if !db.is_postgres() {
        // Several instances need PostgreSQL.
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let receiver = common::receiver::Receiver::start().await;
    let start = || Server::start(fast_retries(payd(&db.url, dir.path())));
    let mut servers = [start(), start()];
    let (key, shop) = merchant_with_endpoint(servers[0].port, &receiver.url).await;
    let ports = std::rc::Rc::new(std::cell::RefCell::new([servers[0].port, servers[1].port]));

    let mut outcomes: Vec<Outcome> = Vec::new();
    let mut kills = 0;
    let mut seed: u64 = 0x2545_f491_4f6c_dd1d;
    let mut random = move |n: u64| {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed % n
    };
    for round in 0..6 {
        // The load: payments, captures and refunds, alternating between the instances,
        // while one instance is killed at a random moment and started again.
        let victim = round % 2;
        let kill_after = Duration::from_millis(50 + random(400));
        let load = async {
            let mut done = Vec::new();
            for i in 0..12 {
                let port = ports.borrow()[i % 2];
                let body = serde_json::json!({"amount": 1000, "currency": "USD", "confirm": true, "capture_method": "manual",
                    "payment_method_data": common::card("4242424242424242")});
                let (status, p) = try_post(port, "/payments", &key, &shop, body).await;
                let Some(id) = p["payment_id"].as_str().map(str::to_owned) else {
                    done.push(Outcome {
                        payment_id: String::new(),
                        op: "create",
                        status,
                        body: p,
                    });
                    continue;
                };
                done.push(Outcome {
                    payment_id: id.clone(),
                    op: "create",
                    status,
                    body: p,
                });
                let port = ports.borrow()[(i + 1) % 2];
                let (status, body) = try_post(
                    port,
                    &format!("/payments/{id}/capture"),
                    &key,
                    &shop,
                    serde_json::json!({"amount": 600, "final_capture": false}),
                )
                .await;
                done.push(Outcome {
                    payment_id: id.clone(),
                    op: "capture",
                    status,
                    body,
                });
                let port = ports.borrow()[i % 2];
                let (status, body) = try_post(
                    port,
                    "/refunds",
                    &key,
                    &shop,
                    serde_json::json!({"payment_id": id, "amount": 200}),
                )
                .await;
                done.push(Outcome {
                    payment_id: id.clone(),
                    op: "refund",
                    status,
                    body,
                });
            }
            done
        };
        let chaos = async {
            actix_web::rt::time::sleep(kill_after).await;
            // Killed while the load waits on it: a request in flight there gets no answer.
            let replacement = {
                let dead = &mut servers[victim];
                let _ = dead.child.kill();
                let _ = dead.child.wait();
                start()
            };
            servers[victim] = replacement;
            ports.borrow_mut()[victim] = servers[victim].port;
        };
        let (done, ()) = futures_util::join!(load, chaos);
        kills += 1;
        outcomes.extend(done);
    }

    // Every acknowledged change holds, and the money invariants hold for every payment.
    let port = servers[0].port;
    let mut five_xx = 0;
    let mut checked = std::collections::HashSet::new();
    for o in &outcomes {
        if let Some(s) = o.status {
            assert!(
                s < 500 || s == 503,
                "a live instance answered {s}: {}",
                o.body
            );
            if s >= 500 {
                five_xx += 1;
            }
        }
        if o.payment_id.is_empty() {
            continue;
        }
        let p = get(port, &format!("/payments/{}", o.payment_id), Some(&key))
            .await
            .1;
        let (authorized, captured, refunded) = (
            p["amount_authorized"].as_i64().unwrap_or(0),
            p["amount_captured"].as_i64().unwrap_or(0),
            p["amount_refunded"].as_i64().unwrap_or(0),
        );
        assert!(
            refunded <= captured && captured <= authorized && authorized <= 1000,
            "{p}"
        );
        if o.status == Some(200) {
            match o.op {
                "capture" => assert!(captured >= 600, "an acknowledged capture was lost: {p}"),
                "refund" => {
                    let r = get(
                        port,
                        &format!("/refunds/{}", o.body["refund_id"].as_str().unwrap_or("")),
                        Some(&key),
                    )
                    .await;
                    assert_eq!(r.0, 200, "an acknowledged refund was lost");
                    assert!(refunded >= 200, "{p}");
                }
                _ => assert_eq!(
                    p["payment_id"],
                    o.payment_id.as_str(),
                    "an acknowledged payment was lost"
                ),
            }
        }
        checked.insert(o.payment_id.clone());
    }

    // Every event is delivered, once the instances have caught up.
    let deadline = Instant::now() + Duration::from_secs(60);
    let (mut events, mut pending) = (0usize, usize::MAX);
    while Instant::now() < deadline {
        let (_, undelivered) = post_json(
            port,
            &format!("/events/{}", merchant_id_of(port, &key).await),
            &key,
            None,
            serde_json::json!({"delivered": false, "limit": 100}),
        )
        .await;
        pending = undelivered["data"].as_array().map_or(usize::MAX, Vec::len);
        if pending == 0 {
            break;
        }
        actix_web::rt::time::sleep(Duration::from_millis(200)).await;
    }
    assert_eq!(pending, 0, "every event is delivered");
    let mut cursor: Option<String> = None;
    loop {
        let mut body = serde_json::json!({"limit": 100});
        if let Some(c) = &cursor {
            body["starting_after"] = serde_json::json!(c);
        }
        let (_, page) = post_json(
            port,
            &format!("/events/{}", merchant_id_of(port, &key).await),
            &key,
            None,
            body,
        )
        .await;
        let data = page["data"].as_array().cloned().unwrap_or_default();
        events += data.len();
        let ids = distinct_ids(&receiver.received());
        for e in &data {
            assert!(
                ids.contains(e["event_id"].as_str().unwrap()),
                "event {} never reached the receiver",
                e["event_id"]
            );
        }
        if page["has_more"] != true {
            break;
        }
        cursor = data
            .last()
            .and_then(|e| e["event_id"].as_str())
            .map(str::to_owned);
    }
    // Every status change written has its event (both were one transaction).
    let conn = payd::db::connect(&db.url, Some(2)).await.unwrap();
    use sea_orm::{ColumnTrait, EntityTrait, QueryFilter};
    let history = payd_entity::payment_status_history::Entity::find()
        .all(&conn)
        .await
        .unwrap();
    let mut announced = 0;
    for h in &history {
        let Some(event_type) = h.to_status.event() else {
            continue;
        };
        let found = payd_entity::event::Entity::find()
            .filter(payd_entity::event::Column::ObjectId.eq(h.payment_id.as_str()))
            .filter(payd_entity::event::Column::EventType.eq(event_type))
            .all(&conn)
            .await
            .unwrap();
        assert!(
            !found.is_empty(),
            "{} became {} without {event_type}",
            h.payment_id,
            h.to_status
        );
        announced += 1;
    }
    println!(
        "crash test: {announced} status changes each with its event; {} payments, {} requests ({} unanswered while an instance died, {} 503), {events} events delivered, {kills} kills",
        checked.len(),
        outcomes.len(),
        outcomes.iter().filter(|o| o.status.is_none()).count(),
        five_xx
    );
    for s in servers {
        assert!(s.terminate().success());
    }
}

/// payd with its scheduler and settle jobs fast, as the crash tests at the processor's edge
/// need it.
fn settling_fast(db_url: &str, data_dir: &std::path::Path) -> Command {
    let mut cmd = fast_retries(payd(db_url, data_dir));
    cmd.env("PAYD_SANDBOX__ASYNC_DELAY_SECS", "1")
        .env("PAYD_SCHEDULER__POLL_INTERVAL_MS", "100");
    cmd
}

/// A merchant whose shop's only processor is the simulator at `url`; returns (key, shop).
async fn merchant_at_sim(port: u16, url: &str) -> (String, String) {
    let (key, shop) = create_merchant(port).await;
    let path = format!("/account/shops/{shop}/processors");
    let account = common::sim::remote_account(url, 10_000);
    let (status, body) = post_json(port, &path, &key, None, account).await;
    assert_eq!(status, 201, "{body}");
    (key, shop)
}

/// Sends `body` to `path` in the background while the simulator answers 3 s late, waits until
/// the simulator has applied it (`applied` leaves 0), and kills payd with SIGKILL before the
/// answer arrives. Returns a new payd on the same database.
async fn kill_while_the_processor_applies(
    server: Server,
    (db_url, dir): (&str, &std::path::Path),
    sim_url: &str,
    (key, path, body): (&str, String, serde_json::Value),
    applied: &std::sync::atomic::AtomicU32,
) -> Server {
    use std::sync::atomic::Ordering;
    common::sim::fault(
        sim_url,
        serde_json::json!({"kind": "slow", "delay_ms": 3000}),
    )
    .await;
    let (port, key) = (server.port, key.to_owned());
    actix_web::rt::spawn(async move {
        let _ = post_json(port, &path, &key, None, body).await;
    });
    let deadline = Instant::now() + Duration::from_secs(10);
    while applied.load(Ordering::SeqCst) == 0 {
        assert!(
            Instant::now() < deadline,
            "the processor never got the request"
        );
        actix_web::rt::time::sleep(Duration::from_millis(20)).await;
    }
    server.kill9();
    Server::start(settling_fast(db_url, dir))
}

/// Reads `path` until `done` holds (at most 20 s); returns what it read last.
async fn read_until(
    port: u16,
    key: &str,
    path: &str,
    done: impl Fn(&serde_json::Value) -> bool,
) -> serde_json::Value {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let (_, body) = get(port, path, Some(key)).await;
        if done(&body) {
            return body;
        }
        assert!(Instant::now() < deadline, "never reached: {body}");
        actix_web::rt::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Issue #14's second way to lose money: payd killed while the processor applies a refund.
/// The refund was recorded (pending, its balance held) before the processor heard of it, so
/// after the restart its settle job asks the processor again with the same key and records
/// the refund the processor made, once.
#[actix_web::test]
async fn a_refund_the_processor_made_while_payd_was_killed_is_recorded_after_the_restart() {
    use std::sync::atomic::Ordering;
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let (sim, url) = common::sim::start_sim().await;
    let server = Server::start(settling_fast(&db.url, dir.path()));
    let (key, shop) = merchant_at_sim(server.port, &url).await;
    let payment_id = pay(server.port, &key, &shop).await;
    let refund = serde_json::json!({"payment_id": payment_id, "amount": 300});
    let server = kill_while_the_processor_applies(
        server,
        (&db.url, dir.path()),
        &url,
        (&key, "/refunds".into(), refund),
        &sim.refunds_done,
    )
    .await;
    let deadline = Instant::now() + Duration::from_secs(20);
    let refunds = loop {
        let (_, list) = post_json(
            server.port,
            "/refunds/list",
            &key,
            None,
            serde_json::json!({"payment_id": payment_id}),
        )
        .await;
        let settled = list["data"][0]["status"] == "succeeded";
        if settled {
            break list;
        }
        assert!(
            Instant::now() < deadline,
            "the refund was never recorded: {list}"
        );
        actix_web::rt::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(refunds["data"].as_array().unwrap().len(), 1, "{refunds}");
    let (_, payment) = get(server.port, &format!("/payments/{payment_id}"), Some(&key)).await;
    assert_eq!(payment["amount_refunded"], 300, "{payment}");
    assert_eq!(
        sim.refunds_done.load(Ordering::SeqCst),
        1,
        "applied once at the processor"
    );
    assert!(server.terminate().success());
}

/// payd killed while the processor authorizes, then while it captures: each time the
/// operation's intent was committed before the request, and after the restart the settle job
/// reconciles it — the authorization from a sync, the capture from the same request with the
/// same key. payd's amounts equal what the processor applied, each event announced once.
#[actix_web::test]
async fn an_authorization_and_a_capture_the_processor_made_while_payd_was_killed_are_recorded_after_the_restart(
) {
    use std::sync::atomic::Ordering;
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let (sim, url) = common::sim::start_sim().await;
    let server = Server::start(settling_fast(&db.url, dir.path()));
    let (key, shop) = merchant_at_sim(server.port, &url).await;
    let body = serde_json::json!({"amount": 500, "currency": "USD", "capture_method": "manual",
        "payment_method_data": common::card("4242424242424242")});
    let (status, created) = post_json(server.port, "/payments", &key, Some(&shop), body).await;
    assert_eq!(status, 201, "{created}");
    let id = created["payment_id"].as_str().unwrap().to_owned();
    let path = format!("/payments/{id}");

    let confirm = (
        key.as_str(),
        format!("{path}/confirm"),
        serde_json::json!({}),
    );
    let db_and_dir = (db.url.as_str(), dir.path());
    let server =
        kill_while_the_processor_applies(server, db_and_dir, &url, confirm, &sim.authorizations)
            .await;
    let p = read_until(server.port, &key, &path, |p| {
        p["status"] == "requires_capture"
    })
    .await;
    assert_eq!(p["amount_authorized"], 500, "{p}");

    let capture = serde_json::json!({"amount": 300, "final_capture": false});
    let capture = (key.as_str(), format!("{path}/capture"), capture);
    let server =
        kill_while_the_processor_applies(server, db_and_dir, &url, capture, &sim.captures).await;
    let p = read_until(server.port, &key, &path, |p| p["amount_captured"] == 300).await;
    assert_eq!(p["status"], "partially_captured_and_capturable", "{p}");
    assert_eq!(sim.authorizations.load(Ordering::SeqCst), 1);
    assert_eq!(
        sim.captures.load(Ordering::SeqCst),
        1,
        "sent again, applied once"
    );
    assert_eq!(sim.captured_amount.load(Ordering::SeqCst), 300);
    let (_, events) = post_json(
        server.port,
        &format!("/events/{}", merchant_id_of(server.port, &key).await),
        &key,
        None,
        serde_json::json!({"object_id": id}),
    )
    .await;
    let mut types: Vec<&str> = events["data"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["event_type"].as_str().unwrap())
        .collect();
    types.sort_unstable();
    assert_eq!(
        types,
        ["payment_authorized", "payment_captured"],
        "{events}"
    );
    assert!(server.terminate().success());
}

/// `payd migrate` needs only the database URL (docs/upgrading.md): in production mode, with
/// no pepper, master key, admin key or public URL, it migrates; and on a database a newer
/// release migrated with a step this one cannot run beside, it exits 1 with payd's own
/// message, never the migration library's.
#[actix_web::test]
async fn migrate_needs_only_the_database_url_and_refuses_a_newer_schema_in_its_own_words() {
    let db = TestDb::new().await;
    let migrate = || {
        let mut cmd = Command::new(BIN);
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("PAYD_MODE", "production")
            .env("PAYD_DATABASE_URL", &db.url)
            .arg("migrate");
        cmd.output().unwrap()
    };
    let out = migrate();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains(" migrations applied"));
    let again = String::from_utf8_lossy(&migrate().stdout).into_owned();
    assert_eq!(again.trim(), "payd: the schema is up to date");

    let conn = payd::db::connect(&db.url, Some(1)).await.unwrap();
    use sea_orm::ConnectionTrait;
    conn.execute_unprepared(
        "INSERT INTO seaql_migrations (version, applied_at) VALUES ('m20991231_000100_future', 0)",
    )
    .await
    .unwrap();
    conn.close().await.unwrap();
    let out = migrate();
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(
        said.lines()
            .any(|l| l.starts_with("payd: the database was migrated by a newer payd"))
            && said.contains("m20991231_000100_future (not recorded in schema_compatibility)")
            && said.contains("docs/upgrading.md")
            && !said.contains("is missing"),
        "{said}"
    );
}

/// docs/backups.md: `payd backup` copies a running SQLite instance under a steady load of
/// payments, and payd started on the copy alone has every payment acknowledged before the
/// backup began, as it was acknowledged. It refuses an existing file and PostgreSQL.
#[actix_web::test]
async fn a_backup_under_load_restores_every_acknowledged_payment() {
    use std::sync::{
        atomic::{AtomicBool, Ordering},
        Arc, Mutex,
    };
    let db = TestDb::new().await;
    let dir = tempfile::tempdir().unwrap();
    let target = dir.path().join("backup.db");
    let backup = || {
        let mut cmd = tokio::process::Command::new(BIN);
        cmd.env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("PAYD_DATABASE_URL", &db.url)
            .args(["backup", "--to"])
            .arg(&target);
        cmd
    };
    if db.is_postgres() {
        let out = backup().output().await.unwrap();
        assert!(!out.status.success());
        assert!(String::from_utf8_lossy(&out.stderr).contains("pg_dump"));
        return;
    }
    let server = Server::start(fast_retries(payd(&db.url, dir.path())));
    let port = server.port;
    let (key, shop) = create_merchant(port).await;

    // Four clients pay in a loop, each noting the moment its payment was acknowledged.
    let stop = Arc::new(AtomicBool::new(false));
    let acked: Arc<Mutex<Vec<(Instant, String)>>> = Arc::default();
    let clients: Vec<_> = (0..4)
        .map(|_| {
            let (stop, acked, key, shop) = (stop.clone(), acked.clone(), key.clone(), shop.clone());
            actix_web::rt::spawn(async move {
                // Bounded: the test stops it long before.
                for _ in 0..5_000 {
                    if stop.load(Ordering::Relaxed) {
                        break;
                    }
                    let id = pay(port, &key, &shop).await;
                    acked.lock().unwrap().push((Instant::now(), id));
                }
            })
        })
        .collect();
    let count = || acked.lock().unwrap().len();
    let deadline = Instant::now() + Duration::from_secs(30);
    while count() < 100 && Instant::now() < deadline {
        actix_web::rt::time::sleep(Duration::from_millis(20)).await;
    }
    let began = Instant::now();
    let out = backup().output().await.unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let during = acked
        .lock()
        .unwrap()
        .iter()
        .filter(|(at, _)| *at >= began)
        .count();
    stop.store(true, Ordering::Relaxed);
    for c in clients {
        c.await.unwrap();
    }
    assert!(server.terminate().success());

    let before: Vec<String> = acked
        .lock()
        .unwrap()
        .iter()
        .filter(|(at, _)| *at < began)
        .map(|(_, id)| id.clone())
        .collect();
    assert!(
        before.len() >= 100,
        "load before the backup: {}",
        before.len()
    );
    println!(
        "backup: {} payments acknowledged before it began, {during} while it ran",
        before.len()
    );

    // A second backup to the same file is refused; the first is intact.
    let again = backup().output().await.unwrap();
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("exists"));

    let restored_dir = tempfile::tempdir().unwrap();
    let restored = format!("sqlite://{}?mode=rwc", target.display());
    let server = Server::start(fast_retries(payd(&restored, restored_dir.path())));
    for id in &before {
        let (status, p) = get(server.port, &format!("/payments/{id}"), Some(&key)).await;
        assert_eq!(status, 200, "{id} acknowledged before the backup: {p}");
        assert_eq!(p["status"], "succeeded", "{p}");
        assert_eq!(p["amount"], 500, "{p}");
    }
    assert!(server.terminate().success());
}

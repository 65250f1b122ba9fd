//! The persisted scheduler: due work survives restarts and runs once across instances.

use crate::common;

use std::sync::{
    atomic::{AtomicUsize, Ordering},
    Arc,
};

use chrono::Duration;
use common::{settings, TestDb};
use payd::{
    clock::{Clock, ManualClock, SharedClock},
    db,
    scheduler::{self, Outcome, Scheduler},
};
use payd_entity::scheduled_job;
use sea_orm::{ActiveModelTrait, ColumnTrait, DatabaseConnection, EntityTrait, QueryFilter, Set};

async fn database(test_db: &TestDb) -> DatabaseConnection {
    let s = settings(test_db, &[]);
    let conn = db::connect(&s.database.url, s.database.max_connections)
        .await
        .unwrap();
    db::migrate(&s.database.url, &conn).await.unwrap();
    conn
}

/// A scheduler whose "test" jobs count their runs and answer `outcome`.
fn counting(
    conn: &DatabaseConnection,
    clock: &Arc<ManualClock>,
    runs: &Arc<AtomicUsize>,
    outcome: fn(&ManualClock) -> Outcome,
    test_db: &TestDb,
) -> Scheduler {
    let shared: SharedClock = clock.clone();
    let mut s = Scheduler::new(conn.clone(), shared, settings(test_db, &[]).scheduler);
    let (runs, clock) = (runs.clone(), clock.clone());
    s.register("test", move |_job| {
        runs.fetch_add(1, Ordering::SeqCst);
        let out = outcome(&clock);
        async move { out }
    });
    s
}

#[actix_web::test]
async fn a_job_survives_a_restart_and_runs_once_when_due() {
    let test_db = TestDb::new().await;
    let clock = ManualClock::new();
    let runs = Arc::new(AtomicUsize::new(0));
    {
        let conn = database(&test_db).await;
        let now = clock.now();
        scheduler::schedule(
            &conn,
            now,
            "test",
            "pay_1",
            now + Duration::hours(1),
            serde_json::json!({"n": 1}),
        )
        .await
        .unwrap();
        let s = counting(&conn, &clock, &runs, |_| Outcome::Done, &test_db);
        assert_eq!(s.tick().await.unwrap(), 0, "not due yet");
        conn.close().await.unwrap();
    }
    // "Restart": a new connection and a new scheduler on the same database.
    let conn = database(&test_db).await;
    let s = counting(&conn, &clock, &runs, |_| Outcome::Done, &test_db);
    clock.advance(Duration::minutes(61));
    assert_eq!(s.tick().await.unwrap(), 1);
    assert_eq!(runs.load(Ordering::SeqCst), 1);
    assert_eq!(s.tick().await.unwrap(), 0, "done jobs are gone");
    assert_eq!(s.due_at("test", "pay_1").await.unwrap(), None);
}

#[actix_web::test]
async fn rescheduling_moves_the_one_job_of_an_entity() {
    let test_db = TestDb::new().await;
    let conn = database(&test_db).await;
    let clock = ManualClock::new();
    let now = clock.now();
    scheduler::schedule(
        &conn,
        now,
        "test",
        "e",
        now + Duration::hours(1),
        serde_json::Value::Null,
    )
    .await
    .unwrap();
    scheduler::schedule(
        &conn,
        now,
        "test",
        "e",
        now + Duration::hours(3),
        serde_json::Value::Null,
    )
    .await
    .unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let s = counting(&conn, &clock, &runs, |_| Outcome::Done, &test_db);
    assert_eq!(
        s.due_at("test", "e").await.unwrap(),
        Some(now + Duration::hours(3))
    );
    clock.advance(Duration::hours(2));
    assert_eq!(s.tick().await.unwrap(), 0);
    scheduler::cancel(&conn, "test", "e").await.unwrap();
    clock.advance(Duration::hours(2));
    assert_eq!(s.tick().await.unwrap(), 0, "cancelled");
}

#[actix_web::test]
async fn failures_back_off_and_recurring_jobs_come_back() {
    let test_db = TestDb::new().await;
    let conn = database(&test_db).await;
    let clock = ManualClock::new();
    let now = clock.now();
    scheduler::schedule(&conn, now, "test", "e", now, serde_json::Value::Null)
        .await
        .unwrap();
    let runs = Arc::new(AtomicUsize::new(0));
    let failing = counting(
        &conn,
        &clock,
        &runs,
        |_| Outcome::Failed("boom".into()),
        &test_db,
    );
    assert_eq!(failing.tick().await.unwrap(), 1);
    let row = scheduled_job::Entity::find()
        .one(&conn)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(row.attempts, 1);
    assert_eq!(row.last_error.as_deref(), Some("boom"));
    assert!(row.due_at > now && row.lease_owner.is_none());
    assert_eq!(failing.tick().await.unwrap(), 0, "backing off");

    let recurring = counting(
        &conn,
        &clock,
        &runs,
        |c| Outcome::RunAt(c.now() + Duration::hours(1)),
        &test_db,
    );
    clock.advance(Duration::seconds(5));
    assert_eq!(recurring.tick().await.unwrap(), 1);
    clock.advance(Duration::minutes(61));
    assert_eq!(recurring.tick().await.unwrap(), 1);
    assert_eq!(runs.load(Ordering::SeqCst), 3);
}

#[actix_web::test]
async fn a_leased_job_waits_for_its_lease_then_is_taken_over() {
    let test_db = TestDb::new().await;
    let conn = database(&test_db).await;
    let clock = ManualClock::new();
    let now = clock.now();
    scheduler::schedule(&conn, now, "test", "e", now, serde_json::Value::Null)
        .await
        .unwrap();
    // Another instance claimed it and died.
    let row = scheduled_job::Entity::find()
        .one(&conn)
        .await
        .unwrap()
        .unwrap();
    let mut claimed: scheduled_job::ActiveModel = row.into();
    claimed.lease_owner = Set(Some("lease_dead".into()));
    claimed.lease_until = Set(Some(now + Duration::seconds(60)));
    claimed.update(&conn).await.unwrap();

    let runs = Arc::new(AtomicUsize::new(0));
    let s = counting(&conn, &clock, &runs, |_| Outcome::Done, &test_db);
    assert_eq!(s.tick().await.unwrap(), 0, "leased elsewhere");
    clock.advance(Duration::seconds(61));
    assert_eq!(s.tick().await.unwrap(), 1, "taken over after the lease");
}

#[actix_web::test]
async fn two_instances_run_each_due_job_exactly_once() {
    let test_db = TestDb::new().await;
    let conn_a = database(&test_db).await;
    let conn_b = database(&test_db).await;
    let clock = ManualClock::new();
    let now = clock.now();
    for i in 0..60 {
        scheduler::schedule(
            &conn_a,
            now,
            "test",
            &format!("e{i}"),
            now,
            serde_json::Value::Null,
        )
        .await
        .unwrap();
    }
    let runs = Arc::new(AtomicUsize::new(0));
    let a = counting(&conn_a, &clock, &runs, |_| Outcome::Done, &test_db);
    let b = counting(&conn_b, &clock, &runs, |_| Outcome::Done, &test_db);
    let mut total = 0;
    for _ in 0..5 {
        let (ra, rb) = futures_util::join!(a.tick(), b.tick());
        total += ra.unwrap() + rb.unwrap();
    }
    assert_eq!(total, 60);
    assert_eq!(runs.load(Ordering::SeqCst), 60);
    let left = scheduled_job::Entity::find()
        .filter(scheduled_job::Column::Kind.eq("test"))
        .all(&conn_a)
        .await
        .unwrap();
    assert!(left.is_empty());
}

#[actix_web::test]
async fn migrations_run_concurrently_on_one_fresh_database() {
    let test_db = TestDb::new().await;
    let s = settings(&test_db, &[]);
    let url = s.database.url.clone();
    let migrate = |url: String| async move {
        let conn = db::connect(&url, Some(2)).await.unwrap();
        db::migrate(&url, &conn).await
    };
    if test_db.is_postgres() {
        let (a, b, c) =
            futures_util::join!(migrate(url.clone()), migrate(url.clone()), migrate(url));
        a.unwrap();
        b.unwrap();
        c.unwrap();
    } else {
        // SQLite has one writer and no advisory lock: migrating twice in a row must be a no-op.
        migrate(url.clone()).await.unwrap();
        migrate(url).await.unwrap();
    }
}

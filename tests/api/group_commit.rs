//! Group commit: the changes of many callers arriving together share a transaction, each is
//! answered with its own outcome, and one that fails rolls back alone.

use crate::common;

use common::TestDb;
use payd::commit::{self, Change, CommitError, Db, Event, Job, Write, Writers};
use payd::conflict::Conflict;
use payd_entity::{delivery_attempt, webhook_endpoint};
use sea_orm::{
    sea_query::{Alias, Expr, ExprTrait, OnConflict, Query},
    ConnectionTrait, Statement,
};

const TABLE: &str = "group_commit_rows";

fn insert(id: &str, on_conflict_nothing: bool) -> sea_orm::sea_query::InsertStatement {
    let mut q = Query::insert();
    q.into_table(Alias::new(TABLE))
        .columns([Alias::new("id"), Alias::new("version")])
        .values_panic([id.into(), 1i64.into()]);
    if on_conflict_nothing {
        q.on_conflict(OnConflict::column(Alias::new("id")).do_nothing().to_owned());
    }
    q
}

/// What each caller's change is, by its number.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    /// Inserts its row: commits.
    Fresh,
    /// A compare-and-set that finds no row: a lost race.
    CasMisses,
    /// An insert that must add its row, of a key taken: a lost race.
    KeyTaken,
    /// A plain insert of a key taken: the database refuses it (on PostgreSQL this aborts the
    /// transaction, so only a savepoint saves the others).
    Duplicate,
    /// A condition that does not hold: refused.
    Unmet,
}

fn kind(i: usize) -> Kind {
    match i % 10 {
        3 => Kind::CasMisses,
        5 => Kind::KeyTaken,
        7 => Kind::Duplicate,
        9 => Kind::Unmet,
        _ => Kind::Fresh,
    }
}

/// Every change first inserts a row of its own (`f{i}` for those that fail), so a failure
/// that did not roll back alone shows as a row left behind.
fn change(i: usize) -> Change {
    let now = chrono::Utc::now();
    let k = kind(i);
    let own = if k == Kind::Fresh {
        format!("r{i}")
    } else {
        format!("f{i}")
    };
    let c = Change::at(now).write(Write::Insert(insert(&own, false)));
    match k {
        Kind::Fresh => c,
        Kind::CasMisses => c.write(Write::Cas(
            Query::update()
                .table(Alias::new(TABLE))
                .value(Alias::new("version"), 2i64)
                .and_where(Expr::col(Alias::new("id")).eq("missing"))
                .to_owned(),
        )),
        Kind::KeyTaken => c.write(Write::InsertNew(insert("seed", true))),
        Kind::Duplicate => c.write(Write::Insert(insert("seed", false))),
        Kind::Unmet => c.write(Write::Require {
            query: Query::select()
                .column(Alias::new("id"))
                .from(Alias::new(TABLE))
                .and_where(Expr::col(Alias::new("id")).eq("nowhere"))
                .to_owned(),
            exists: true,
            refusal: UNMET,
        }),
    }
}

/// The refusal of the tests' conditions (any [`Conflict`] would do).
const UNMET: Conflict = Conflict::Bound {
    setting: "tests.unmet",
    max: 0,
};

/// A connection to the test database, with the table these tests write.
async fn with_table(test_db: &TestDb) -> sea_orm::DatabaseConnection {
    let conn = payd::db::connect(&test_db.url, None).await.unwrap();
    conn.execute_raw(Statement::from_string(
        conn.get_database_backend(),
        format!("CREATE TABLE {TABLE} (id VARCHAR(64) PRIMARY KEY, version BIGINT NOT NULL)"),
    ))
    .await
    .unwrap();
    conn
}

/// Writers that batch up to 64 changes: one on SQLite, two on PostgreSQL; on SQLite holding
/// their connection for a whole transaction (`direct`, the default) or not.
fn batching(test_db: &TestDb, conn: sea_orm::DatabaseConnection, direct: bool) -> Db {
    let count = if test_db.is_postgres() { 2 } else { 1 };
    let writers = Writers {
        count,
        max_batch: 64,
        announce: false,
        direct,
    };
    Db::new(conn, writers).unwrap()
}

/// Batching writers on a database with payd's tables and the table these tests write.
async fn migrated(test_db: &TestDb) -> Db {
    let conn = with_table(test_db).await;
    payd::db::migrate(&test_db.url, &conn).await.unwrap();
    batching(test_db, conn, true)
}

/// The text values of `column` in the rows `sql` selects, sorted.
async fn strings(db: &Db, sql: &str, column: &str) -> Vec<String> {
    let rows = db
        .query_all_raw(Statement::from_string(
            db.get_database_backend(),
            sql.to_owned(),
        ))
        .await
        .unwrap();
    let mut values: Vec<String> = rows
        .iter()
        .map(|r| r.try_get::<String>("", column).unwrap())
        .collect();
    values.sort();
    values
}

#[actix_rt::test]
async fn changes_arriving_together_share_a_transaction_and_fail_alone() {
    together_and_alone(true).await;
}

/// The same through a writer that hands each statement to SQLite's connection thread
/// (`database.sqlite_direct = false`; PostgreSQL's writers always do).
#[actix_rt::test]
async fn changes_arriving_together_fail_alone_without_a_held_connection() {
    together_and_alone(false).await;
}

async fn together_and_alone(direct: bool) {
    let test_db = TestDb::new().await;
    let conn = with_table(&test_db).await;
    let db = batching(&test_db, conn, direct);
    commit::commit(
        &db,
        Change::at(chrono::Utc::now()).write(Write::Insert(insert("seed", false))),
    )
    .await
    .unwrap();

    const N: usize = 300;
    let outcomes =
        futures_util::future::join_all((0..N).map(|i| commit::commit(&db, change(i)))).await;

    let mut most_shared = 0;
    for (i, outcome) in outcomes.iter().enumerate() {
        match (kind(i), outcome) {
            (Kind::Fresh, Ok(c)) => most_shared = Ord::max(most_shared, c.shared),
            (Kind::CasMisses | Kind::KeyTaken, Err(CommitError::LostRace)) => {}
            (Kind::Duplicate, Err(CommitError::Db(e))) => assert!(
                matches!(
                    e.sql_err(),
                    Some(sea_orm::SqlErr::UniqueConstraintViolation(_))
                ),
                "{i}: {e}"
            ),
            (Kind::Unmet, Err(CommitError::Refused(UNMET))) => {}
            (k, other) => panic!("change {i} ({k:?}) answered {other:?}"),
        }
    }
    assert!(
        most_shared > 1,
        "{N} changes sent at once were all written alone"
    );

    let ids = strings(&db, &format!("SELECT id FROM {TABLE}"), "id").await;
    let mut expected: Vec<String> = (0..N)
        .filter(|i| kind(*i) == Kind::Fresh)
        .map(|i| format!("r{i}"))
        .chain(["seed".to_owned()])
        .collect();
    expected.sort();
    assert_eq!(ids, expected, "only the changes that succeeded left rows");
}

/// Two changes that lock the same two rows in opposite orders, on two writers: PostgreSQL
/// breaks the deadlock by rolling one back, and the writer writes it again, so both commit.
/// (SQLite has one writer: nothing to test there.)
#[actix_rt::test]
async fn a_change_rolled_back_for_a_deadlock_is_written_again() {
    let test_db = TestDb::new().await;
    if !test_db.is_postgres() {
        return;
    }
    let conn = with_table(&test_db).await;
    let db = Db::new(
        conn,
        Writers {
            count: 2,
            max_batch: 1,
            announce: false,
            direct: true,
        },
    )
    .unwrap();
    for id in ["a", "b"] {
        let seed = Change::at(chrono::Utc::now()).write(Write::Insert(insert(id, false)));
        commit::commit(&db, seed).await.unwrap();
    }
    let bump = |id: &str| {
        Write::Update(
            Query::update()
                .table(Alias::new(TABLE))
                .value(
                    Alias::new("version"),
                    Expr::col(Alias::new("version")).add(1),
                )
                .and_where(Expr::col(Alias::new("id")).eq(id))
                .to_owned(),
        )
    };
    // Holds the first row's lock long enough for the other change to take its first row.
    let pause = || Write::Require {
        query: Query::select().expr(Expr::cust("pg_sleep(0.3)")).to_owned(),
        exists: true,
        refusal: UNMET,
    };
    let first = Change::at(chrono::Utc::now())
        .write(bump("a"))
        .write(pause())
        .write(bump("b"));
    let second = Change::at(chrono::Utc::now())
        .write(bump("b"))
        .write(pause())
        .write(bump("a"));
    let (one, two) =
        futures_util::future::join(commit::commit(&db, first), commit::commit(&db, second)).await;
    assert!(one.is_ok() && two.is_ok(), "{one:?} / {two:?}");
    let rows = db
        .query_all_raw(Statement::from_string(
            db.get_database_backend(),
            format!("SELECT version FROM {TABLE} ORDER BY id"),
        ))
        .await
        .unwrap();
    let versions: Vec<i64> = rows
        .iter()
        .map(|r| r.try_get::<i64>("", "version").unwrap())
        .collect();
    assert_eq!(versions, [3, 3], "each change bumped both rows once");
}

fn endpoint(id: &str, profile_id: &str) -> webhook_endpoint::Model {
    let now = chrono::Utc::now();
    webhook_endpoint::Model {
        id: id.to_owned(),
        merchant_id: payd::ids::MerchantId::parse(MERCHANT).unwrap(),
        profile_id: payd::ids::ProfileId::parse(profile_id).unwrap(),
        url: "http://127.0.0.1:9/hook".to_owned(),
        secret: "whsec_test".to_owned(),
        previous_secret: None,
        previous_secret_expires_at: None,
        enabled: true,
        created_at: now,
        updated_at: now,
        consecutive_failures: 0,
        failing_since: None,
        last_success_at: None,
        disabled_reason: None,
        max_per_second: None,
        next_send_at: None,
        test_mode: true,
    }
}

/// The merchant and the shops of the tests' events (ids of their kinds, as stored rows hold).
const MERCHANT: &str = "mer_0000000000000000000000000000000a";
const PRO_A: &str = "prof_0000000000000000000000000000000a";
const PRO_B: &str = "prof_0000000000000000000000000000000b";
const PRO_NONE: &str = "prof_0000000000000000000000000000000c";

/// The shop change `i` announces its event to: two shops with an endpoint each, one without.
fn shop(i: usize) -> &'static str {
    [PRO_A, PRO_B, PRO_NONE][i % 3]
}

/// Change `i` of the first test, which also appends a row, announces an event to [`shop`]`(i)`
/// and schedules a job.
fn change_with_parts(i: usize) -> Change {
    let now = chrono::Utc::now();
    change(i)
        .write(commit::append(delivery_attempt::Model {
            id: format!("a{i}"),
            delivery_id: format!("d{i}"),
            event_id: format!("e{i}"),
            number: 1,
            trigger: payd_model::webhooks::AttemptTrigger::Initial,
            request_headers: Default::default(),
            response_status: Some(200),
            response_body: None,
            error_kind: None,
            duration_ms: 1,
            next_attempt_at: None,
            created_at: now,
        }))
        .event(Event {
            merchant_id: payd::ids::MerchantId::parse(MERCHANT).unwrap(),
            profile_id: payd::ids::ProfileId::parse(shop(i)),
            test_mode: true,
            // A listed type (the outbox refuses others); the object is the test's own.
            event_type: "payment_succeeded".to_owned(),
            object_id: format!("o{i}"),
            content_type: "payment_details",
            object: format!(r#"{{"n":{i}}}"#),
        })
        .job(Job::Schedule {
            kind: "group_test",
            entity_id: format!("j{i}"),
            at: now,
        })
}

/// The rows changes append, their events with the deliveries those queue, and their jobs are
/// written after every change of the transaction, a table's rows together: a change's are
/// there exactly when it committed, each caller is told its own deliveries, and two changes of
/// one job in one change keep their order.
#[actix_rt::test]
async fn appended_rows_events_and_jobs_are_written_with_their_change_only() {
    let test_db = TestDb::new().await;
    let db = migrated(&test_db).await;
    let seed = Change::at(chrono::Utc::now())
        .write(Write::Insert(insert("seed", false)))
        .write(commit::insert(endpoint("we_a", PRO_A)))
        .write(commit::insert(endpoint("we_b", PRO_B)));
    commit::commit(&db, seed).await.unwrap();

    const N: usize = 300;
    let outcomes =
        futures_util::future::join_all((0..N).map(|i| commit::commit(&db, change_with_parts(i))))
            .await;
    let mut most_shared = 0;
    for (i, outcome) in outcomes.iter().enumerate() {
        match (kind(i), outcome) {
            (Kind::Fresh, Ok(c)) => {
                most_shared = Ord::max(most_shared, c.shared);
                let expected = usize::from(shop(i) != PRO_NONE);
                assert_eq!(c.deliveries, expected, "change {i}'s deliveries");
            }
            (Kind::Fresh, other) => panic!("change {i} answered {other:?}"),
            (_, outcome) => assert!(outcome.is_err(), "change {i} answered {outcome:?}"),
        }
    }
    assert!(most_shared > 1, "{N} changes were all written alone");

    let fresh: Vec<usize> = (0..N).filter(|i| kind(*i) == Kind::Fresh).collect();
    let named = |prefix: &str| {
        let mut names: Vec<String> = fresh.iter().map(|i| format!("{prefix}{i}")).collect();
        names.sort();
        names
    };
    assert_eq!(
        strings(&db, "SELECT id FROM delivery_attempts", "id").await,
        named("a")
    );
    assert_eq!(
        strings(&db, "SELECT object_id FROM events", "object_id").await,
        named("o")
    );
    assert_eq!(
        strings(&db, "SELECT entity_id FROM scheduled_jobs", "entity_id").await,
        named("j")
    );
    let mut delivered: Vec<String> = fresh
        .iter()
        .filter(|i| shop(**i) != PRO_NONE)
        .map(|i| format!("o{i} {}", shop(*i)))
        .collect();
    delivered.sort();
    let got = strings(
        &db,
        "SELECT e.object_id || ' ' || w.profile_id AS object_id FROM deliveries d \
         JOIN events e ON e.id = d.event_id JOIN webhook_endpoints w ON w.id = d.endpoint_id",
        "object_id",
    )
    .await;
    assert_eq!(
        got, delivered,
        "one delivery of each event of a shop with an endpoint, to that shop's endpoint"
    );

    // Jobs of one job in one change are written in their order: cancel then schedule leaves
    // it, schedule then cancel does not.
    let now = chrono::Utc::now();
    let schedule = |id: &str| Job::Schedule {
        kind: "group_order",
        entity_id: id.to_owned(),
        at: now,
    };
    let cancel = |id: &str| Job::Cancel {
        kinds: vec!["group_order"],
        entity_id: id.to_owned(),
    };
    let (kept, gone) = futures_util::future::join(
        commit::commit(
            &db,
            Change::at(now).job(cancel("kept")).job(schedule("kept")),
        ),
        commit::commit(
            &db,
            Change::at(now).job(schedule("gone")).job(cancel("gone")),
        ),
    )
    .await;
    kept.unwrap();
    gone.unwrap();
    let left = strings(
        &db,
        "SELECT entity_id FROM scheduled_jobs WHERE kind = 'group_order'",
        "entity_id",
    )
    .await;
    assert_eq!(left, ["kept"]);
}

/// A shop's reservations written in one transaction see each other's debits (so they never
/// spend the same money twice), while the credits committed with them are appended: every
/// entry lands, the balance never goes below zero, and the running total the reservations
/// keep, with the deltas not yet folded, is the entries' sum.
#[actix_rt::test]
async fn reservations_in_one_transaction_see_each_others_debits() {
    use payd::ledger::{machine, store as ledger};
    let test_db = TestDb::new().await;
    let db = migrated(&test_db).await;
    let account = ledger::Account {
        merchant_id: "mer_a",
        profile_id: "pro_a",
        test_mode: true,
        currency: "USD",
    };
    let credit = |amount: i64, source: &str| {
        let moves = machine::payment_moves((0, 0), (amount, 0), false);
        ledger::writes(&account, &moves, source, chrono::Utc::now())
    };
    let mut seed = Change::at(chrono::Utc::now());
    seed.writes = credit(10_000, "pay_seed");
    commit::commit(&db, seed).await.unwrap();

    // Twenty reservations of 700 and twenty credits of 100, all at once.
    let changes = (0..40).map(|i| {
        let now = chrono::Utc::now();
        let change = if i % 2 == 0 {
            let moves = machine::reserve_moves(700);
            ledger::reserve(&account, 700, now, db.get_database_backend())
                .write_all(ledger::writes(&account, &moves, &format!("po_{i}"), now))
        } else {
            Change::at(now).write_all(credit(100, &format!("pay_{i}")))
        };
        commit::commit(&db, change)
    });
    let outcomes = futures_util::future::join_all(changes).await;
    let mut made = 0;
    let mut most_shared = 0;
    for (i, outcome) in outcomes.iter().enumerate() {
        match outcome {
            Ok(c) => {
                most_shared = Ord::max(most_shared, c.shared);
                made += usize::from(i % 2 == 0);
            }
            Err(CommitError::Refused(why)) if i % 2 == 0 => {
                assert_eq!(*why, Conflict::InsufficientBalance)
            }
            Err(e) => panic!("change {i}: {e}"),
        }
    }
    assert!(most_shared > 1, "the changes were all written alone");
    let available = strings(
        &db,
        "SELECT CAST(SUM(amount) AS VARCHAR(32)) AS total FROM balance_transactions \
         WHERE bucket = 'available'",
        "total",
    )
    .await;
    let expected = 10_000 + 20 * 100 - 700 * made as i64;
    assert_eq!(
        available,
        [expected.to_string()],
        "{made} reservations made"
    );
    assert!(expected >= 0, "{made} reservations of 700 overdrew 12 000");
    // The reservations' running total and the deltas not yet folded make the same sum.
    let kept = strings(
        &db,
        "SELECT CAST(available + (SELECT COALESCE(SUM(amount), 0) FROM balance_deltas) \
         AS VARCHAR(32)) AS total FROM balance_locks",
        "total",
    )
    .await;
    assert_eq!(kept, [expected.to_string()]);
    assert!(
        made >= 14,
        "10 000 holds fourteen, credits aside; {made} made"
    );
}

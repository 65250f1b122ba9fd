//! Group commit: the changes of many callers arriving together share a transaction, each is
//! answered with its own outcome, and one that fails rolls back alone.

mod common;

use common::TestDb;
use payd::commit::{self, Change, CommitError, Db, Write, Writers};
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
            refusal: "unmet",
        }),
    }
}

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

#[actix_rt::test]
async fn changes_arriving_together_share_a_transaction_and_fail_alone() {
    let test_db = TestDb::new().await;
    let conn = with_table(&test_db).await;
    let writers = if test_db.is_postgres() { 2 } else { 1 };
    let db = Db::new(
        conn,
        Writers {
            count: writers,
            max_batch: 64,
            announce: false,
        },
    )
    .unwrap();
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
            (Kind::Unmet, Err(CommitError::Refused("unmet"))) => {}
            (k, other) => panic!("change {i} ({k:?}) answered {other:?}"),
        }
    }
    assert!(
        most_shared > 1,
        "{N} changes sent at once were all written alone"
    );

    let rows = db
        .query_all_raw(Statement::from_string(
            db.get_database_backend(),
            format!("SELECT id FROM {TABLE}"),
        ))
        .await
        .unwrap();
    let mut ids: Vec<String> = rows
        .iter()
        .map(|r| r.try_get::<String>("", "id").unwrap())
        .collect();
    ids.sort();
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
        refusal: "slept",
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

//! The ledger's writes and reads. Entries are inserted in the same commit as the change that
//! moves the money (a payment's, a dispute's, a payout's); they are never updated. A payout's
//! reservation first updates its shop's lock row, which serializes reservations of one shop's
//! currency on every database, then requires the available balance to cover it.
//!
//! The available balance is kept without summing the shop's history: each available-bucket
//! entry is written with a delta (`balance_deltas`, the entry's id and amount), and a
//! reservation, holding the lock row, folds the deltas waiting into the row's running total
//! (`balance_locks.available`, deleting them in the same statement on PostgreSQL) before it
//! compares. A delta its transaction cannot see yet (another transaction's, not committed) is
//! folded by a later reservation: none is counted twice or lost, since a delta is deleted by
//! the statement that adds it. Invariant: the available balance = `available` + the deltas
//! waiting = the sum of the available-bucket entries.

use chrono::{DateTime, Utc};
use payd_entity::{balance_delta, balance_lock, balance_transaction, payment};
use sea_orm::{
    sea_query::{Alias, Expr, ExprTrait, Func, OnConflict, Query},
    ColumnTrait, Condition, ConnectionTrait, DbBackend, DbErr, EntityTrait, FromQueryResult,
    IntoActiveModel, QueryFilter, QuerySelect, QueryTrait, Statement,
};

use super::{
    api::ListTransactionsQuery,
    machine::{self, Bucket, Move},
};
use crate::{
    commit::{self, Change, Write},
    conflict::Conflict,
    ids::new_id,
    pagination::{created_between, paginate, List, Page, PageError},
};

/// Whose money: a shop's in one mode and currency.
#[derive(Debug, Clone)]
pub struct Account<'a> {
    pub merchant_id: &'a str,
    pub profile_id: &'a str,
    pub test_mode: bool,
    pub currency: &'a str,
}

impl Account<'_> {
    /// The account's lock row, with its running total.
    fn lock(&self) -> Condition {
        self.with([
            balance_lock::Column::ProfileId,
            balance_lock::Column::TestMode,
            balance_lock::Column::Currency,
        ])
    }

    /// The account's deltas waiting to be folded.
    fn deltas(&self) -> Condition {
        self.with([
            balance_delta::Column::ProfileId,
            balance_delta::Column::TestMode,
            balance_delta::Column::Currency,
        ])
    }

    fn with<C: ColumnTrait>(&self, [profile, test_mode, currency]: [C; 3]) -> Condition {
        Condition::all()
            .add(profile.eq(self.profile_id))
            .add(test_mode.eq(self.test_mode))
            .add(currency.eq(self.currency))
    }
}

/// The inserts of `moves` of `account`, caused by `source_id`: each entry, and for an
/// available-bucket entry its delta.
///
/// Entries are appended (written after every change of the transaction, a table's rows
/// together): nothing in a transaction reads them. A debit's delta is written in its place: a
/// reservation later in the same transaction folds the deltas and must see it, or two payouts
/// could both spend the same money. A credit's delta is appended: a reservation that does not
/// see it yet refuses no more than if the credit's change had come after it, which is as valid
/// an order for changes committed together; and a refused reservation sends the batch again
/// under savepoints, each change's rows in their place.
pub fn writes(
    account: &Account,
    moves: &[Move],
    source_id: &str,
    now: DateTime<Utc>,
) -> Vec<Write> {
    moves
        .iter()
        .flat_map(|m| {
            let entry = balance_transaction::Model {
                id: new_id("bt"),
                merchant_id: account.merchant_id.to_owned(),
                profile_id: account.profile_id.to_owned(),
                test_mode: account.test_mode,
                currency: account.currency.to_owned(),
                bucket: m.bucket,
                amount: m.amount,
                kind: m.kind,
                source_id: source_id.to_owned(),
                created_at: now,
            };
            let delta = (m.bucket == Bucket::Available).then(|| balance_delta::Model {
                id: entry.id.clone(),
                profile_id: entry.profile_id.clone(),
                test_mode: entry.test_mode,
                currency: entry.currency.clone(),
                amount: entry.amount,
            });
            let delta = match m.amount > 0 {
                true => delta.map(commit::append),
                false => delta.map(commit::insert),
            };
            std::iter::once(commit::append(entry)).chain(delta)
        })
        .collect()
}

/// A payment's entries for its change `before` → `after` (a refund's own id names it when
/// the change makes or fails one).
pub fn payment_writes(
    before: &payment::Model,
    after: &payment::Model,
    refund_id: Option<&str>,
    now: DateTime<Utc>,
) -> Vec<Write> {
    let cancelled = after.status == payd_model::payments::Status::CancelledPostCapture
        && before.status != after.status;
    let moves = machine::payment_moves(
        (before.amount_captured, before.amount_refunded),
        (after.amount_captured, after.amount_refunded),
        cancelled,
    );
    if moves.is_empty() {
        return Vec::new();
    }
    let account = Account {
        merchant_id: &after.merchant_id,
        profile_id: &after.profile_id,
        test_mode: after.test_mode,
        currency: &after.currency,
    };
    let (captures, refunds): (Vec<Move>, Vec<Move>) = moves
        .into_iter()
        .partition(|m| m.kind != machine::Kind::Refund && m.kind != machine::Kind::RefundFailure);
    let mut out = writes(&account, &captures, &after.id, now);
    out.extend(writes(
        &account,
        &refunds,
        refund_id.unwrap_or(&after.id),
        now,
    ));
    out
}

/// Reserves `amount` of `account`'s available balance: the lock row first (serializing
/// reservations), then the deltas waiting folded into its running total, then the condition
/// that the total covers it, refused as [`Conflict::InsufficientBalance`]. Written by the writer that writes
/// every reservation (a shop's payouts would otherwise queue on its lock row in several
/// writers' transactions at once).
pub fn reserve(account: &Account, amount: i64, at: DateTime<Utc>, db: DbBackend) -> Change {
    let first = balance_lock::Model {
        profile_id: account.profile_id.to_owned(),
        test_mode: account.test_mode,
        currency: account.currency.to_owned(),
        reservations: 1,
        available: 0,
    };
    // Made by the shop's first reservation in the currency, updated by every later one: one
    // statement either way, which holds the row until the transaction ends.
    let lock = balance_lock::Entity::insert(first.into_active_model())
        .on_conflict(
            OnConflict::columns([
                balance_lock::Column::ProfileId,
                balance_lock::Column::TestMode,
                balance_lock::Column::Currency,
            ])
            .value(
                balance_lock::Column::Reservations,
                Expr::col((balance_lock::Entity, balance_lock::Column::Reservations)).add(1),
            )
            .to_owned(),
        )
        .into_query();
    let covered = Query::select()
        .expr(Expr::val(1))
        .from(balance_lock::Entity)
        .cond_where(account.lock())
        .and_where(balance_lock::Column::Available.gte(amount))
        .to_owned();
    Change::at(at)
        .write(Write::Insert(lock))
        .write_all(fold(account, db))
        .write(Write::Require {
            query: covered,
            exists: true,
            refusal: Conflict::InsufficientBalance,
        })
        .serialized()
}

/// Folds `account`'s waiting deltas into its lock row's running total (the lock row held).
///
/// On PostgreSQL one statement deletes them and adds what it deleted, so that a delta
/// committed meanwhile by another transaction is either in both or in neither. On SQLite the
/// one writer holds the database between the two statements: nothing commits in between.
fn fold(account: &Account, db: DbBackend) -> Vec<Write> {
    let keys = [
        account.profile_id.into(),
        account.test_mode.into(),
        account.currency.into(),
    ];
    if db == DbBackend::Postgres {
        let sql = "WITH folded AS (DELETE FROM balance_deltas \
                   WHERE profile_id = $1 AND test_mode = $2 AND currency = $3 RETURNING amount) \
                   UPDATE balance_locks SET available = available + \
                   (SELECT COALESCE(SUM(amount), 0) FROM folded) \
                   WHERE profile_id = $1 AND test_mode = $2 AND currency = $3";
        return vec![Write::Raw(Statement::from_sql_and_values(db, sql, keys))];
    }
    let waiting = Query::select()
        .expr(Func::coalesce([
            Expr::col(balance_delta::Column::Amount).sum(),
            Expr::val(0i64),
        ]))
        .from(balance_delta::Entity)
        .cond_where(account.deltas())
        .to_owned();
    let add = balance_lock::Entity::update_many()
        .col_expr(
            balance_lock::Column::Available,
            Expr::col(balance_lock::Column::Available)
                .add(Expr::SubQuery(None, Box::new(waiting.into()))),
        )
        .filter(account.lock())
        .into_query();
    let delete = balance_delta::Entity::delete_many()
        .filter(account.deltas())
        .into_query();
    vec![Write::Update(add), Write::Delete(delete)]
}

#[derive(Debug, FromQueryResult)]
struct Sum {
    currency: String,
    bucket: Bucket,
    total: Option<i64>,
}

/// A shop's balances per currency: (currency, available, pending), by currency.
pub async fn balances(
    db: &impl ConnectionTrait,
    profile_id: &str,
    test_mode: bool,
) -> Result<Vec<(String, i64, i64)>, DbErr> {
    let sums = balance_transaction::Entity::find()
        .select_only()
        .column(balance_transaction::Column::Currency)
        .column(balance_transaction::Column::Bucket)
        .column_as(
            Expr::col(balance_transaction::Column::Amount)
                .sum()
                .cast_as(Alias::new("BIGINT")),
            "total",
        )
        .filter(balance_transaction::Column::ProfileId.eq(profile_id))
        .filter(balance_transaction::Column::TestMode.eq(test_mode))
        .group_by(balance_transaction::Column::Currency)
        .group_by(balance_transaction::Column::Bucket)
        .into_model::<Sum>()
        .all(db)
        .await?;
    let mut out: Vec<(String, i64, i64)> = Vec::new();
    for s in sums {
        let i = match out.iter().position(|(c, _, _)| *c == s.currency) {
            Some(i) => i,
            None => {
                out.push((s.currency.clone(), 0, 0));
                out.len() - 1
            }
        };
        match s.bucket {
            Bucket::Pending => out[i].2 += s.total.unwrap_or(0),
            Bucket::Available => out[i].1 += s.total.unwrap_or(0),
        }
    }
    out.sort();
    Ok(out)
}

/// A shop's entries in one mode, newest first.
pub async fn list(
    db: &impl ConnectionTrait,
    profile_id: &str,
    test_mode: bool,
    f: &ListTransactionsQuery,
    page: &Page,
) -> Result<List<balance_transaction::Model>, PageError> {
    let mut q = balance_transaction::Entity::find()
        .filter(balance_transaction::Column::ProfileId.eq(profile_id))
        .filter(balance_transaction::Column::TestMode.eq(test_mode));
    let visible = q.clone();
    if let Some(k) = &f.kind {
        q = q.filter(balance_transaction::Column::Kind.eq(k.as_str()));
    }
    if let Some(s) = &f.source_id {
        q = q.filter(balance_transaction::Column::SourceId.eq(s.as_str()));
    }
    if let Some(c) = &f.currency {
        q = q.filter(balance_transaction::Column::Currency.eq(c.to_ascii_uppercase()));
    }
    q = created_between(
        q,
        balance_transaction::Column::CreatedAt,
        f.created_after,
        f.created_before,
    );
    paginate(db, visible, q, balance_transaction::Column::Id, page).await
}

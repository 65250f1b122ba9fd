//! The ledger's writes and reads. Entries are inserted in the same commit as the change that
//! moves the money (a payment's, a dispute's, a payout's); they are never updated. A payout's
//! reservation first updates its shop's lock row, which serializes reservations of one shop's
//! currency on every database, then requires the available sum to cover it.

use chrono::{DateTime, Utc};
use payd_entity::{balance_lock, balance_transaction, payment};
use sea_orm::{
    sea_query::{Alias, Expr, ExprTrait, Func, OnConflict, Query},
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, FromQueryResult, IntoActiveModel,
    QueryFilter, QuerySelect, QueryTrait,
};

use super::{
    api::ListTransactionsQuery,
    machine::{self, Bucket, Move},
};
use crate::{
    commit::{self, Write},
    ids::new_id,
    pagination::{created_between, paginate, List, Page, PageError},
};

/// The refusal code of a reservation the available balance does not cover.
pub const INSUFFICIENT: &str = "insufficient_balance";

/// Whose money: a shop's in one mode and currency.
#[derive(Debug, Clone)]
pub struct Account<'a> {
    pub merchant_id: &'a str,
    pub profile_id: &'a str,
    pub test_mode: bool,
    pub currency: &'a str,
}

/// The inserts of `moves` of `account`, caused by `source_id`.
///
/// A debit is written in its place: a reservation later in the same transaction sums the
/// entries and must see it, or two payouts could both spend the same money. A credit is
/// appended (written after every change of the transaction, with the others' entries): a
/// reservation that does not see it yet refuses no more than if the credit's change had
/// come after it, which is as valid an order for changes committed together; and a refused
/// reservation sends the batch again under savepoints, each change's entries in their place.
pub fn writes(
    account: &Account,
    moves: &[Move],
    source_id: &str,
    now: DateTime<Utc>,
) -> Vec<Write> {
    moves
        .iter()
        .map(|m| {
            let entry = balance_transaction::Model {
                id: new_id("bt"),
                merchant_id: account.merchant_id.to_owned(),
                profile_id: account.profile_id.to_owned(),
                test_mode: account.test_mode,
                currency: account.currency.to_owned(),
                bucket: m.bucket.as_str().to_owned(),
                amount: m.amount,
                kind: m.kind.as_str().to_owned(),
                source_id: source_id.to_owned(),
                created_at: now,
            };
            if m.amount > 0 {
                commit::append(entry)
            } else {
                commit::insert(entry)
            }
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
    let cancelled = after.status == "cancelled_post_capture" && before.status != after.status;
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
/// reservations), then the condition that the available sum covers it, refused as
/// [`INSUFFICIENT`].
pub fn reserve(account: &Account, amount: i64) -> Vec<Write> {
    let first = balance_lock::Model {
        profile_id: account.profile_id.to_owned(),
        test_mode: account.test_mode,
        currency: account.currency.to_owned(),
        reservations: 0,
    };
    let create = balance_lock::Entity::insert(first.into_active_model())
        .on_conflict(
            OnConflict::columns([
                balance_lock::Column::ProfileId,
                balance_lock::Column::TestMode,
                balance_lock::Column::Currency,
            ])
            .do_nothing()
            .to_owned(),
        )
        .into_query();
    let lock = balance_lock::Entity::update_many()
        .col_expr(
            balance_lock::Column::Reservations,
            Expr::col(balance_lock::Column::Reservations).add(1),
        )
        .filter(balance_lock::Column::ProfileId.eq(account.profile_id))
        .filter(balance_lock::Column::TestMode.eq(account.test_mode))
        .filter(balance_lock::Column::Currency.eq(account.currency))
        .into_query();
    // One row (the aggregate's) when the available sum covers the amount, none otherwise.
    let covered = Query::select()
        .expr(Func::sum(Expr::col(balance_transaction::Column::Amount)))
        .from(balance_transaction::Entity)
        .and_where(balance_transaction::Column::ProfileId.eq(account.profile_id))
        .and_where(balance_transaction::Column::TestMode.eq(account.test_mode))
        .and_where(balance_transaction::Column::Currency.eq(account.currency))
        .and_where(balance_transaction::Column::Bucket.eq(Bucket::Available.as_str()))
        .and_having(
            Expr::expr(Func::coalesce([
                Expr::from(Func::sum(Expr::col(balance_transaction::Column::Amount))),
                Expr::val(0i64),
            ]))
            .gte(amount),
        )
        .to_owned();
    vec![
        Write::Insert(create),
        Write::Update(lock),
        Write::Require {
            query: covered,
            exists: true,
            refusal: INSUFFICIENT,
        },
    ]
}

#[derive(Debug, FromQueryResult)]
struct Sum {
    currency: String,
    bucket: String,
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
        match s.bucket.as_str() {
            "pending" => out[i].2 += s.total.unwrap_or(0),
            _ => out[i].1 += s.total.unwrap_or(0),
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

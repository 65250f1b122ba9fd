//! What a transaction writes after its changes: the rows they append ([`super::Write::Append`]),
//! their events with the deliveries those queue, and their jobs — the rows of every change of
//! the transaction together, a table's rows as one multi-row statement. A batch of b changes
//! writes its history rows, attempts, events, deliveries and jobs in a handful of statements
//! instead of a few per change.
//!
//! Invariant: nothing a change writes or reads in the transaction depends on these rows (an
//! appended row refers only to rows written before it, and no write reads an appended table,
//! the events, the deliveries or the jobs). Writing them last is then the same as writing each
//! change's in its place. One reader is allowed, because what it can miss is only a moment
//! earlier: a payout's reservation folds the balance deltas, where a credit's is appended and
//! a debit's written in place; one that is refused fails its change, and the batch is written
//! again under savepoints, each change with its own rows.

use std::collections::HashSet;

use chrono::{DateTime, Utc};

use sea_orm::{
    sea_query::{
        Alias, CommonTableExpression, Expr, InsertStatement, OnConflict, Query, TableRef,
        WithClause,
    },
    ActiveModelTrait, ActiveValue, ColumnTrait, ConnectionTrait, DbBackend, DbErr, DynIden,
    EntityName, EntityTrait, IdenStatic, IntoActiveModel, Iterable,
};

use crate::{db::ROWS_PER_INSERT, outbox, scheduler::JobWrite};

/// What a commit wrote.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Committed {
    /// Webhook deliveries its events queued (the caller wakes the dispatcher when > 0).
    pub deliveries: usize,
    /// How many changes its transaction wrote (1 when it was alone).
    pub shared: usize,
}

/// A row a change appends: written after every change of its transaction, with the rows the
/// other changes append to its table, as one `INSERT` of many rows.
#[derive(Debug, Clone)]
pub struct Row {
    table: TableRef,
    table_name: &'static str,
    /// The name of its conflict clause ("" for none).
    conflict_name: &'static str,
    columns: Vec<DynIden>,
    values: Vec<Expr>,
    conflict: Option<OnConflict>,
}

impl Row {
    /// The whole row (every column set); with `conflict`, an upsert named `name` (rows with
    /// the same name share the clause of the first).
    pub(super) fn of<M, A>(row: M, conflict: Option<(&'static str, OnConflict)>) -> Self
    where
        M: IntoActiveModel<A>,
        A: ActiveModelTrait,
    {
        let mut model = row.into_active_model().reset_all();
        let entity = A::Entity::default();
        let (mut columns, mut values) = (Vec::new(), Vec::new());
        for col in <A::Entity as EntityTrait>::Column::iter() {
            if let ActiveValue::Set(v) | ActiveValue::Unchanged(v) = model.take(col) {
                columns.push(DynIden::from(col.as_str()));
                values.push(col.save_as(Expr::val(v)));
            }
        }
        let (name, conflict) = conflict.unzip();
        Self {
            table: entity.table_ref(),
            table_name: entity.table_name(),
            conflict_name: name.unwrap_or(""),
            columns,
            values,
            conflict,
        }
    }

    /// Rows of one group share a statement: the same table, conflict clause and columns.
    fn group(&self) -> (&'static str, &'static str, usize) {
        (self.table_name, self.conflict_name, self.columns.len())
    }

    /// One `INSERT` of these rows (of one group), with the first one's columns and clause.
    fn insert(rows: &[&Row]) -> InsertStatement {
        let first = rows[0];
        let mut stmt = Query::insert();
        stmt.into_table(first.table.clone())
            .columns(first.columns.clone());
        for row in rows {
            stmt.values_panic(row.values.clone());
        }
        if let Some(conflict) = &first.conflict {
            stmt.on_conflict(conflict.clone());
        }
        stmt
    }

    /// This row alone.
    pub(super) fn statement(&self) -> InsertStatement {
        Self::insert(&[self])
    }
}

/// Bound values at most in one statement of several tables' rows: half of what PostgreSQL
/// takes.
const VALUES_TOGETHER: usize = 32_000;

/// The appended rows' `INSERT`s as they go out. On PostgreSQL those without a conflict clause
/// go out together, all but the last inside a `WITH` (`WITH a0 AS (INSERT …) INSERT …`): one
/// statement, and one round trip, for a transaction's history rows, attempts, ledger entries
/// and deltas. The statements of a `WITH` see the same snapshot and none reads another's
/// tables, so together they write what they would one after the other; foreign keys are
/// checked at the end of the whole statement. An upsert goes alone: two parts of one statement
/// must not touch the same row.
struct Appends {
    postgres: bool,
    waiting: Vec<InsertStatement>,
    values: usize,
}

impl Appends {
    fn new(postgres: bool) -> Self {
        Self {
            postgres,
            waiting: Vec::new(),
            values: 0,
        }
    }

    async fn add(&mut self, txn: &impl ConnectionTrait, chunk: &[&Row]) -> Result<(), DbErr> {
        let insert = Row::insert(chunk);
        if !self.postgres || chunk[0].conflict.is_some() {
            txn.execute(&insert).await?;
            return Ok(());
        }
        let values = chunk.len() * chunk[0].columns.len();
        if self.values + values > VALUES_TOGETHER {
            self.flush(txn).await?;
        }
        self.waiting.push(insert);
        self.values += values;
        Ok(())
    }

    async fn flush(&mut self, txn: &impl ConnectionTrait) -> Result<(), DbErr> {
        self.values = 0;
        let Some(last) = self.waiting.pop() else {
            return Ok(());
        };
        if self.waiting.is_empty() {
            txn.execute(&last).await?;
            return Ok(());
        }
        let mut with = WithClause::new();
        for (i, insert) in self.waiting.drain(..).enumerate() {
            with.cte(
                CommonTableExpression::new()
                    .query(insert)
                    .table_name(Alias::new(format!("a{i}")))
                    .to_owned(),
            );
        }
        txn.execute(&with.query(last)).await?;
        Ok(())
    }
}

/// The rows, events and jobs of a transaction's changes, kept until they are all written.
#[derive(Default)]
pub(super) struct Later {
    /// The change being written (its events' deliveries are counted to it).
    change: usize,
    rows: Vec<Row>,
    /// Each event with its change and the (base) time its deliveries are due.
    events: Vec<(usize, (payd_entity::event::Model, DateTime<Utc>))>,
    jobs: Vec<JobWrite>,
}

impl Later {
    /// What follows is the change at `index` of the transaction.
    pub fn at(&mut self, index: usize) {
        self.change = index;
    }

    pub fn row(&mut self, row: Row) {
        self.rows.push(row);
    }

    /// An event, its deliveries due at `send_at` (base time).
    pub fn event(&mut self, event: payd_entity::event::Model, send_at: DateTime<Utc>) {
        self.events.push((self.change, (event, send_at)));
    }

    pub fn job(&mut self, job: JobWrite) {
        self.jobs.push(job);
    }

    /// Writes everything kept, and answers what each of the first `changes` changes wrote
    /// (the deliveries its events queued).
    pub async fn write(
        self,
        txn: &impl ConnectionTrait,
        changes: usize,
    ) -> Result<Vec<Committed>, DbErr> {
        // Groups in the order their first row came; rows in the order they came.
        let mut groups = Vec::new();
        let mut seen = HashSet::new();
        for row in &self.rows {
            if seen.insert(row.group()) {
                groups.push(row.group());
            }
        }
        let mut appends = Appends::new(txn.get_database_backend() == DbBackend::Postgres);
        for group in groups {
            let rows: Vec<&Row> = self.rows.iter().filter(|r| r.group() == group).collect();
            for chunk in rows.chunks(ROWS_PER_INSERT) {
                appends.add(txn, chunk).await?;
            }
        }
        appends.flush(txn).await?;
        let (owners, events): (Vec<usize>, Vec<_>) = self.events.into_iter().unzip();
        let queued = outbox::record(txn, &events).await?;
        let mut committed = vec![
            Committed {
                deliveries: 0,
                shared: 1,
            };
            changes
        ];
        for (owner, n) in owners.into_iter().zip(queued) {
            committed[owner].deliveries += n;
        }
        crate::scheduler::write_jobs(txn, &self.jobs).await?;
        Ok(committed)
    }
}

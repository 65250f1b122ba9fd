//! Recording what the delivery actors sent: a batch's attempt rows, its deliveries' new states
//! and its endpoints' health, in one transaction, and the endpoints that batch left failing
//! too long disabled afterwards.

use payd_model::webhooks::AttemptTrigger;
use payd_model::webhooks::DeliveryStatus;
use std::collections::HashMap;

use chrono::{DateTime, Duration, Utc};
use payd_entity::{delivery, webhook_endpoint};
use sea_orm::{
    sea_query::{Alias, Expr, ExprTrait, Func, IntoIden, TableRef, UpdateStatement, ValueTuple},
    ColumnTrait, EntityTrait, QueryFilter, QueryTrait, UpdateMany,
};

use super::{
    attempt::{attempt_row, Outcome},
    health,
    policy::{self, Answer},
};
use crate::commit::{self, Change, CommitError, Db, Write};

/// A sent delivery whose outcome is still to be written.
pub struct Finished {
    pub delivery: delivery::Model,
    /// As claimed: its health as it stood then.
    pub endpoint: webhook_endpoint::Model,
    pub lease: String,
    pub outcome: Outcome,
    pub next: policy::Next,
    pub at: DateTime<Utc>,
}

impl Finished {
    pub fn status(&self) -> DeliveryStatus {
        match (self.next.delivered, self.next.retry_at) {
            (true, _) => DeliveryStatus::Delivered,
            (false, Some(_)) => DeliveryStatus::Pending,
            (false, None) => DeliveryStatus::Failed,
        }
    }
}

/// One `UPDATE` for a batch's deliveries, joined by id to a `VALUES` list of their new states
/// (`UPDATE … FROM (VALUES …)`, on both databases). A row is only written under its own lease
/// token and while still `pending` or `paused` (a manual retry may have delivered it meanwhile:
/// that stands); an attempt under way when its endpoint was paused is recorded, and the
/// delivery stays paused unless the attempt ended it. Each row is found by its primary key,
/// whatever the backlog: a `WHERE id IN (…)` with `CASE` per column led SQLite to walk every
/// pending delivery through `idx_deliveries_due` instead, on every batch.
fn outcomes(batch: &[Finished]) -> UpdateStatement {
    let rows = batch
        .iter()
        .map(|f| {
            let ended = match f.status() {
                DeliveryStatus::Pending => None,
                ended => Some(ended),
            };
            ValueTuple::Many(vec![
                f.delivery.id.clone().into(),
                f.lease.clone().into(),
                ended.into(),
                (f.delivery.attempts + 1).into(),
                f.next.transient_failures.into(),
                f.next.auth_failures.into(),
                f.next.retry_at.unwrap_or(f.delivery.next_attempt_at).into(),
                match f.outcome.answer {
                    Answer::Status { code, .. } => Some(i32::from(code)),
                    _ => None,
                }
                .into(),
                policy::error_kind(f.outcome.answer)
                    .map(|k| k.as_str().to_owned())
                    .into(),
                f.next.delivered.then_some(f.at).into(),
            ])
        })
        .collect();
    // A `VALUES` list's columns are `column1`, `column2`, … on both databases.
    let new = |n: usize| Expr::col((Alias::new("new"), Alias::new(format!("column{n}"))));
    let old = |c: delivery::Column| Expr::col((delivery::Entity, c));
    without_lease(delivery::Entity::update_many())
        .col_expr(
            delivery::Column::Status,
            Func::coalesce([new(3), old(delivery::Column::Status)]).into(),
        )
        .col_expr(delivery::Column::Attempts, new(4))
        .col_expr(delivery::Column::TransientFailures, new(5))
        .col_expr(delivery::Column::AuthFailures, new(6))
        .col_expr(delivery::Column::NextAttemptAt, new(7))
        .col_expr(delivery::Column::LastStatusCode, new(8))
        .col_expr(delivery::Column::LastError, new(9))
        .col_expr(delivery::Column::DeliveredAt, new(10))
        .filter(old(delivery::Column::Id).eq(new(1)))
        .filter(old(delivery::Column::LeaseOwner).eq(new(2)))
        .filter(delivery::Column::Status.is_in([DeliveryStatus::Pending, DeliveryStatus::Paused]))
        .into_query()
        .from(TableRef::ValuesList(rows, Alias::new("new").into_iden()))
        .to_owned()
}

/// Writes sent deliveries' attempts and new states in one transaction. If it fails, their
/// leases run out and they are sent again: at least once, never lost.
pub async fn write(db: &Db, batch: &[Finished]) -> Result<(), CommitError> {
    let rows = batch.iter().map(|f| {
        let d = &f.delivery;
        let trigger = if d.attempts == 0 {
            AttemptTrigger::Initial
        } else {
            AttemptTrigger::Automatic
        };
        attempt_row(
            d,
            d.attempts + 1,
            trigger,
            &f.outcome,
            f.next.retry_at,
            f.at,
        )
    });
    let attempts = rows.map(commit::append);
    let deliveries = outcomes(batch);
    let at = batch.iter().map(|f| f.at).max().unwrap_or_default();
    // The endpoints' rows first, then their deliveries: the order in which pausing, resuming
    // and parking lock them too, so that these writers never wait on each other in a cycle.
    let mut change = Change::at(at);
    for w in health::streak_writes(&to_record(batch)) {
        change = change.write(w);
    }
    let change = attempts.fold(change, Change::write);
    commit::commit(db, change.write(Write::Update(deliveries)))
        .await
        .map(drop)
}

/// The batch's attempts as their endpoints' health counts them.
fn answered(batch: &[Finished]) -> Vec<health::Answered<'_>> {
    batch
        .iter()
        .map(|f| health::Answered {
            endpoint_id: &f.endpoint.id,
            at: f.at,
            delivered: f.next.delivered,
        })
        .collect()
}

/// The batch's attempts whose endpoints' health they change (see [`health::unchanged`]),
/// judged once per endpoint on its claimed copy.
fn to_record(batch: &[Finished]) -> Vec<health::Answered<'_>> {
    let all = answered(batch);
    let mut judged: HashMap<&str, bool> = HashMap::new();
    batch
        .iter()
        .zip(&all)
        .filter(|(f, a)| {
            *judged.entry(a.endpoint_id).or_insert_with(|| {
                let mine: Vec<_> = all
                    .iter()
                    .filter(|x| x.endpoint_id == a.endpoint_id)
                    .copied()
                    .collect();
                !health::unchanged(&f.endpoint, &mine)
            })
        })
        .map(|(_, a)| *a)
        .collect()
}

/// After a batch is written: disables the endpoints it left failing for longer than
/// `webhooks.disable_after_secs` (judged first on the claimed copies, so a healthy batch costs
/// no statement).
pub async fn disable_failing(db: &Db, after: Duration, now: DateTime<Utc>, batch: &[Finished]) {
    let failing = health::left_failing(&answered(batch));
    let mut checked: Vec<&str> = Vec::new();
    for f in batch {
        let id = f.endpoint.id.as_str();
        if !failing.contains(&id) || checked.contains(&id) {
            continue;
        }
        checked.push(id);
        if health::may_be_due(&f.endpoint, after, now) {
            if let Err(e) = health::disable_if_failing(db, &f.endpoint, after, now).await {
                tracing::warn!(error = %e, endpoint = id, "could not disable a failing endpoint");
            }
        }
    }
}

/// The update also releases the rows' leases.
pub fn without_lease(update: UpdateMany<delivery::Entity>) -> UpdateMany<delivery::Entity> {
    update
        .col_expr(
            delivery::Column::LeaseOwner,
            Expr::value(Option::<String>::None),
        )
        .col_expr(
            delivery::Column::LeaseUntil,
            Expr::value(Option::<DateTime<Utc>>::None),
        )
}

#[cfg(test)]
pub(in crate::webhooks) mod tests {
    use sea_orm::{ConnectionTrait, DbBackend, EntityTrait, Statement};

    use super::*;

    /// An in-memory SQLite database with payd's schema and no foreign keys, for deliveries
    /// without their events and endpoints.
    pub(in crate::webhooks) async fn scratch_db() -> sea_orm::DatabaseConnection {
        let url = "sqlite::memory:";
        let db = crate::db::connect(url, Some(1)).await.unwrap();
        crate::db::migrate(url, &db).await.unwrap();
        db.execute_unprepared("PRAGMA foreign_keys = OFF")
            .await
            .unwrap();
        db
    }

    fn claimed(
        id: &str,
        status: DeliveryStatus,
        lease: &str,
        now: DateTime<Utc>,
    ) -> delivery::Model {
        delivery::Model {
            id: id.to_owned(),
            event_id: format!("evt_{id}"),
            merchant_id: "mer_1".into(),
            endpoint_id: "whep_1".into(),
            status,
            attempts: 1,
            transient_failures: 1,
            auth_failures: 0,
            next_attempt_at: now,
            lease_owner: Some(lease.to_owned()),
            lease_until: Some(now + Duration::seconds(60)),
            last_status_code: None,
            last_error: None,
            delivered_at: None,
            created_at: now,
        }
    }

    fn finished(delivery: delivery::Model, code: u16, at: DateTime<Utc>) -> Finished {
        let answer = Answer::Status {
            code,
            retry_after: None,
        };
        let endpoint = webhook_endpoint::Model {
            id: "whep_1".into(),
            merchant_id: crate::ids::MerchantId::new(),
            profile_id: crate::ids::ProfileId::new(),
            url: "https://shop.example/hooks".into(),
            secret: String::new(),
            previous_secret: None,
            previous_secret_expires_at: None,
            enabled: true,
            created_at: at,
            updated_at: at,
            consecutive_failures: 0,
            failing_since: None,
            last_success_at: None,
            disabled_reason: None,
            max_per_second: None,
            next_send_at: None,
            test_mode: true,
        };
        let next = policy::after_attempt(answer, 1, 0, &[5, 300], &[5], at, 0.0);
        Finished {
            lease: "lease_a".into(),
            delivery,
            endpoint,
            outcome: Outcome {
                answer,
                request_headers: Vec::new(),
                response_body: None,
                duration_ms: 1,
            },
            next,
            at,
        }
    }

    /// A batch's outcomes are found by primary key, not by walking the backlog through
    /// `idx_deliveries_due` (which SQLite chose for `WHERE id IN (…)` with a `CASE` per
    /// column), and each row gets its own values: delivered, retried, a paused one left
    /// paused, and one whose lease another sender holds left alone.
    #[tokio::test]
    async fn a_batch_of_outcomes_finds_each_row_by_key_and_writes_its_own() {
        let db = scratch_db().await;
        let now = DateTime::from_timestamp(1_800_000_000, 0).unwrap();
        let mut rows: Vec<_> = (0..40)
            .map(|i| {
                claimed(
                    &format!("dlv_{i:02}"),
                    DeliveryStatus::Pending,
                    "lease_a",
                    now,
                )
            })
            .collect();
        rows.push(claimed(
            "dlv_paused",
            DeliveryStatus::Paused,
            "lease_a",
            now,
        ));
        rows.push(claimed(
            "dlv_theirs",
            DeliveryStatus::Pending,
            "lease_b",
            now,
        ));
        let active: Vec<delivery::ActiveModel> = rows.iter().cloned().map(Into::into).collect();
        delivery::Entity::insert_many(active)
            .exec(&db)
            .await
            .unwrap();

        let at = now + Duration::seconds(1);
        let batch: Vec<Finished> = rows
            .iter()
            .enumerate()
            .map(|(i, d)| {
                let retry = i % 2 == 1 || d.status == DeliveryStatus::Paused;
                finished(d.clone(), if retry { 503 } else { 200 }, at)
            })
            .collect();
        let built = DbBackend::Sqlite.build(&outcomes(&batch));

        let plan = db
            .query_all_raw(Statement {
                sql: format!("EXPLAIN QUERY PLAN {}", built.sql),
                ..built.clone()
            })
            .await
            .unwrap();
        let plan: Vec<String> = plan
            .iter()
            .map(|r| r.try_get::<String>("", "detail").unwrap())
            .collect();
        assert!(
            plan.iter()
                .any(|d| d
                    .starts_with("SEARCH deliveries USING INDEX sqlite_autoindex_deliveries_1")),
            "{plan:?}"
        );
        assert!(
            !plan.iter().any(|d| d.contains("idx_deliveries_due")),
            "{plan:?}"
        );

        let written = db.execute_raw(built).await.unwrap();
        assert_eq!(
            written.rows_affected(),
            41,
            "all but the row under another lease"
        );
        let after: HashMap<String, delivery::Model> = delivery::Entity::find()
            .all(&db)
            .await
            .unwrap()
            .into_iter()
            .map(|d| (d.id.clone(), d))
            .collect();
        let delivered = &after["dlv_00"];
        assert_eq!(delivered.status, DeliveryStatus::Delivered);
        assert_eq!(delivered.attempts, 2);
        assert_eq!(delivered.last_status_code, Some(200));
        assert_eq!(delivered.delivered_at, Some(at));
        assert_eq!(delivered.lease_owner, None);
        let retried = &after["dlv_01"];
        assert_eq!(retried.status, DeliveryStatus::Pending);
        assert_eq!(retried.attempts, 2);
        assert_eq!(retried.transient_failures, 2);
        assert_eq!(retried.last_status_code, Some(503));
        assert_eq!(retried.next_attempt_at, at + Duration::seconds(300));
        assert_eq!(retried.delivered_at, None);
        assert_eq!(retried.lease_until, None);
        // A retry: it stays paused.
        assert_eq!(after["dlv_paused"].status, DeliveryStatus::Paused);
        assert_eq!(after["dlv_paused"].attempts, 2);
        let theirs = &after["dlv_theirs"];
        assert_eq!(theirs.attempts, 1);
        assert_eq!(theirs.lease_owner.as_deref(), Some("lease_b"));
    }
}

//! Retention: the scheduled purge (`webhooks.purge_interval_secs`) deletes delivery attempts
//! older than `webhooks.attempt_retention_secs` and replaces event payloads older than
//! `webhooks.payload_retention_secs` with a tombstone (`null`, and `purged_at`): the event
//! stays listed. A payload whose delivery is still pending or paused is kept until that
//! delivery ends. Work goes in batches, each its own statement, within a time budget per run;
//! what is left waits for the next run. The same run sweeps for endpoints to disable.

use payd_model::webhooks::DeliveryStatus;
use std::time::{Duration as StdDuration, Instant};

use chrono::{DateTime, Duration, Utc};
use payd_entity::{delivery, delivery_attempt, event};
use sea_orm::{
    sea_query::{Expr, Query},
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter,
};

use crate::{commit::Db, settings::WebhookSettings};

/// The scheduled job of the purge (one for the deployment, rescheduled by each run).
pub const PURGE_JOB: &str = "webhook_purge";

/// Rows one statement purges.
const BATCH: u64 = 1000;

/// How long one run may purge; the rest is left to the next.
const BUDGET: StdDuration = StdDuration::from_secs(10);

/// The payload of a purged event.
pub const TOMBSTONE: &str = "null";

fn secs(s: u64) -> Duration {
    Duration::seconds(s as i64)
}

/// Registers [`PURGE_JOB`]: a run every `webhooks.purge_interval_secs`.
pub fn register(scheduler: &mut crate::scheduler::Scheduler, db: &Db, settings: &WebhookSettings) {
    let (db, settings) = (db.clone(), std::sync::Arc::new(settings.clone()));
    let every = secs(settings.purge_interval_secs);
    scheduler.register_periodic(PURGE_JOB, every, move |now| {
        let (db, settings) = (db.clone(), settings.clone());
        async move { run(&db, &settings, now).await }
    });
}

/// One run of the purge and the sweep.
pub async fn run(db: &Db, settings: &WebhookSettings, now: DateTime<Utc>) -> Result<(), DbErr> {
    let started = Instant::now();
    let attempts = in_batches(started, || {
        purge_attempts(db, now - secs(settings.attempt_retention_secs))
    })
    .await?;
    let payloads = in_batches(started, || {
        purge_payloads(db, now - secs(settings.payload_retention_secs), now)
    })
    .await?;
    metrics::counter!("payd_webhook_purged_rows_total", "kind" => "attempt").increment(attempts);
    metrics::counter!("payd_webhook_purged_rows_total", "kind" => "payload").increment(payloads);
    if attempts + payloads > 0 {
        tracing::info!(attempts, payloads, "webhook retention purge");
    }
    // Each endpoint it disables is logged where it is disabled.
    super::health::sweep(db, secs(settings.disable_after_secs), now).await?;
    Ok(())
}

/// Runs `batch` until it purges less than a whole batch or the run's budget is spent.
async fn in_batches<F, Fut>(started: Instant, mut batch: F) -> Result<u64, DbErr>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<u64, DbErr>>,
{
    let mut total = 0;
    loop {
        let n = batch().await?;
        total += n;
        if n < BATCH || started.elapsed() >= BUDGET {
            return Ok(total);
        }
    }
}

/// Deletes up to a batch of attempts made before `before`.
async fn purge_attempts(db: &impl ConnectionTrait, before: DateTime<Utc>) -> Result<u64, DbErr> {
    let old = Query::select()
        .column(delivery_attempt::Column::Id)
        .from(delivery_attempt::Entity)
        .and_where(delivery_attempt::Column::CreatedAt.lt(before))
        .limit(BATCH)
        .to_owned();
    let res = delivery_attempt::Entity::delete_many()
        .filter(delivery_attempt::Column::Id.in_subquery(old))
        .exec(db)
        .await?;
    Ok(res.rows_affected)
}

/// Replaces up to a batch of payloads of events recorded before `before` with the tombstone,
/// skipping events with a delivery still pending or paused.
async fn purge_payloads(
    db: &impl ConnectionTrait,
    before: DateTime<Utc>,
    now: DateTime<Utc>,
) -> Result<u64, DbErr> {
    let waiting = Query::select()
        .column(delivery::Column::EventId)
        .from(delivery::Entity)
        .and_where(
            delivery::Column::Status.is_in([DeliveryStatus::Pending, DeliveryStatus::Paused]),
        )
        .to_owned();
    let old = Query::select()
        .column(event::Column::Id)
        .from(event::Entity)
        .and_where(event::Column::CreatedAt.lt(before))
        .and_where(event::Column::PurgedAt.is_null())
        .and_where(event::Column::Id.not_in_subquery(waiting))
        .limit(BATCH)
        .to_owned();
    let res = event::Entity::update_many()
        .col_expr(event::Column::Payload, Expr::value(TOMBSTONE))
        .col_expr(event::Column::PurgedAt, Expr::value(Some(now)))
        .filter(event::Column::Id.in_subquery(old))
        .exec(db)
        .await?;
    Ok(res.rows_affected)
}

/// What replaces a customer's personal data inside a stored text (an attempt's answer, or a
/// longer string of a payload).
const REDACTED: &str = "[redacted]";

/// The writes that erase a deleted customer's personal data (`personal`: the values its
/// fields held) from the stored webhook data of its merchant: in the payload of every event
/// that names the customer, a string equal to one of the values becomes `null` and one
/// containing it has it replaced with `[redacted]` (field names are left alone); in the
/// recorded answers to those events' attempts, it is replaced with `[redacted]`. For the
/// customer's deletion to commit with it. Values shorter than three characters are not
/// searched for, and only values of six characters or more with a character no id has (ids
/// are lowercase hex after their prefix) are searched for inside longer strings: no id is
/// ever altered.
pub async fn redaction_writes(
    db: &impl ConnectionTrait,
    merchant_id: &str,
    customer_id: &str,
    personal: &[String],
) -> Result<Vec<sea_orm::sea_query::UpdateStatement>, DbErr> {
    use sea_orm::QueryTrait;
    let personal: Vec<&str> = personal
        .iter()
        .map(String::as_str)
        .filter(|v| v.chars().count() >= 3)
        .collect();
    if personal.is_empty() {
        return Ok(Vec::new());
    }
    let naming = event::Entity::find()
        .filter(event::Column::MerchantId.eq(merchant_id))
        .filter(event::Column::Payload.contains(customer_id))
        .all(db)
        .await?;
    let mut writes = Vec::new();
    for e in &naming {
        if let Some(payload) = redact_payload(&e.payload, &personal) {
            writes.push(
                event::Entity::update_many()
                    .col_expr(event::Column::Payload, Expr::value(payload))
                    .filter(event::Column::Id.eq(e.id.as_str()))
                    .into_query(),
            );
        }
    }
    let answers = delivery_attempt::Entity::find()
        .filter(delivery_attempt::Column::EventId.is_in(naming.iter().map(|e| e.id.as_str())))
        .filter(delivery_attempt::Column::ResponseBody.is_not_null())
        .all(db)
        .await?;
    for a in answers {
        let Some(body) = a.response_body.as_deref() else {
            continue;
        };
        let redacted = redact_text(body, &personal);
        if redacted != body {
            writes.push(
                delivery_attempt::Entity::update_many()
                    .col_expr(
                        delivery_attempt::Column::ResponseBody,
                        Expr::value(Some(redacted)),
                    )
                    .filter(delivery_attempt::Column::Id.eq(a.id.as_str()))
                    .into_query(),
            );
        }
    }
    Ok(writes)
}

fn redact_text(text: &str, personal: &[&str]) -> String {
    personal
        .iter()
        .filter(|v| found_inside(v))
        .fold(text.to_owned(), |t, v| t.replace(*v, REDACTED))
}

/// Whether a value is searched for inside longer strings (see [`redaction_writes`]).
fn found_inside(v: &str) -> bool {
    v.chars().count() >= 6 && v.chars().any(|c| !c.is_ascii_hexdigit() && c != '_')
}

/// The stored envelope, in its field order, with the object as a value.
#[derive(serde::Deserialize, serde::Serialize)]
struct Envelope {
    merchant_id: String,
    event_id: String,
    event_type: String,
    timestamp: String,
    content: Content,
}

#[derive(serde::Deserialize, serde::Serialize)]
struct Content {
    #[serde(rename = "type")]
    kind: String,
    object: serde_json::Value,
}

/// The payload with the values erased; `None` when it holds none of them (or is purged).
fn redact_payload(payload: &str, personal: &[&str]) -> Option<String> {
    if !personal.iter().any(|v| payload.contains(v)) {
        return None;
    }
    let mut envelope: Envelope = serde_json::from_str(payload).ok()?;
    redact_value(&mut envelope.content.object, personal);
    serde_json::to_string(&envelope).ok()
}

fn redact_value(v: &mut serde_json::Value, personal: &[&str]) {
    use serde_json::Value;
    match v {
        Value::String(s) if personal.contains(&s.as_str()) => *v = Value::Null,
        Value::String(s) => *s = redact_text(s, personal),
        Value::Array(items) => items.iter_mut().for_each(|i| redact_value(i, personal)),
        Value::Object(fields) => fields.values_mut().for_each(|f| redact_value(f, personal)),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn personal_values_are_erased_from_values_not_from_field_names() {
        let payload = r#"{"merchant_id":"mer_1","event_id":"evt_1","event_type":"invoice_finalized","timestamp":"t","content":{"type":"merchant_invoice_details","object":{"email":"ana@example.com","name":"Ana Lima","note":"for ana@example.com","lines":[{"name":"Tea"}],"n":1}}}"#;
        let personal = ["ana@example.com", "Ana Lima", "name"];
        let out = redact_payload(payload, &personal).unwrap();
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        let o = &v["content"]["object"];
        assert_eq!(o["email"], serde_json::Value::Null);
        assert_eq!(o["name"], serde_json::Value::Null);
        assert_eq!(o["note"], "for [redacted]");
        assert_eq!(o["lines"][0]["name"], "Tea");
        assert_eq!(o["n"], 1);
        assert!(
            out.starts_with(r#"{"merchant_id":"mer_1","event_id":"evt_1""#),
            "{out}"
        );
        assert_eq!(redact_payload(payload, &["bo@example.org"]), None);
        assert_eq!(redact_text("echo: Ana Lima", &personal), "echo: [redacted]");
        // A postal code is erased where it is a whole value, never inside an id.
        assert_eq!(redact_text("pay_0a10115f", &["10115"]), "pay_0a10115f");
    }
}

//! The transactional outbox. `record` is called with the transaction that makes a state
//! change: the event and one delivery per endpoint of its shop commit with the change or not at
//! all, so a crash can neither lose an event nor announce a change that was rolled back.

use chrono::{DateTime, SecondsFormat, Utc};
use payd_entity::{delivery, event, webhook_endpoint};
use sea_orm::{
    ActiveModelTrait, ActiveValue::Set, ColumnTrait, ConnectionTrait, DbErr, EntityTrait,
    IntoActiveModel, QueryFilter,
};
use serde::Serialize;
use serde_json::value::RawValue;

use crate::{
    ids::new_id,
    webhooks::store::{delivery_row, ENDPOINT_DISABLED},
};

/// An event about to be recorded. `object` is the object's JSON exactly as the API renders it.
pub struct NewEvent<'a> {
    pub merchant_id: &'a str,
    pub profile_id: Option<&'a str>,
    pub test_mode: bool,
    pub event_type: &'a str,
    pub object_id: &'a str,
    /// `payment_details`, `refund_details`, …
    pub content_type: &'a str,
    pub object: String,
}

/// The spec's envelope, in its field order.
#[derive(Serialize)]
struct Envelope<'a> {
    merchant_id: &'a str,
    event_id: &'a str,
    event_type: &'a str,
    timestamp: String,
    content: Content<'a>,
}

#[derive(Serialize)]
struct Content<'a> {
    #[serde(rename = "type")]
    kind: &'a str,
    object: &'a RawValue,
}

/// Records the event and its deliveries; returns how many deliveries it queued (the writer
/// wakes the dispatcher only when there are some). A paused endpoint gets its delivery too: the
/// dispatcher parks it when it claims it, and it is sent when the endpoint resumes.
pub async fn record(
    db: &impl ConnectionTrait,
    e: NewEvent<'_>,
    now: DateTime<Utc>,
) -> Result<usize, DbErr> {
    let id = new_id("evt");
    let object = RawValue::from_string(e.object)
        .map_err(|err| DbErr::Custom(format!("event object is not JSON: {err}")))?;
    let envelope = Envelope {
        merchant_id: e.merchant_id,
        event_id: &id,
        event_type: e.event_type,
        timestamp: now.to_rfc3339_opts(SecondsFormat::Micros, true),
        content: Content {
            kind: e.content_type,
            object: &object,
        },
    };
    let payload = serde_json::to_string(&envelope).map_err(|err| DbErr::Custom(err.to_string()))?;
    let row = event::ActiveModel {
        id: Set(id.clone()),
        merchant_id: Set(e.merchant_id.to_owned()),
        profile_id: Set(e.profile_id.map(str::to_owned)),
        test_mode: Set(e.test_mode),
        event_type: Set(e.event_type.to_owned()),
        object_id: Set(e.object_id.to_owned()),
        payload: Set(payload),
        created_at: Set(now),
        purged_at: Set(None),
    }
    .insert(db)
    .await?;
    let Some(profile_id) = e.profile_id.filter(|_| e.event_type != ENDPOINT_DISABLED) else {
        return Ok(0);
    };
    let endpoints = webhook_endpoint::Entity::find()
        .filter(webhook_endpoint::Column::ProfileId.eq(profile_id))
        .all(db)
        .await?;
    for endpoint in &endpoints {
        insert_delivery(db, &row, &endpoint.id, now).await?;
    }
    Ok(endpoints.len())
}

/// A pending delivery of `event` to an endpoint, due now.
async fn insert_delivery(
    db: &impl ConnectionTrait,
    event: &event::Model,
    endpoint_id: &str,
    now: DateTime<Utc>,
) -> Result<(), DbErr> {
    delivery::Entity::insert(delivery_row(event, endpoint_id, now).into_active_model())
        .exec_without_returning(db)
        .await?;
    Ok(())
}

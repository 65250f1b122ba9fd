//! The transactional outbox. `record` is called with the transaction that makes a state
//! change (the commit path writes the events of all the changes of a transaction together,
//! after them): the event and one delivery per endpoint of its shop commit with the change or
//! not at all, so a crash can neither lose an event nor announce a change that was rolled back.
//! It sits below the commit path and imports nothing of the resources: the webhook module
//! writes its manual retries' delivery rows with [`delivery_row`] too.

use chrono::{DateTime, SecondsFormat, Utc};
use payd_entity::{delivery, event, webhook_endpoint};
use std::collections::BTreeSet;

use sea_orm::{
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, IntoActiveModel, QueryFilter, QueryOrder,
    QuerySelect,
};
use serde::Serialize;
use serde_json::value::RawValue;

use crate::ids::{new_id, EventId, MerchantId, ProfileId};

/// Recorded when payd disables an endpoint that kept failing: listed with the merchant's
/// events, never posted (the endpoint it is about is the one not answering).
pub const ENDPOINT_DISABLED: &str = "webhook_endpoint_disabled";

/// The row of a pending delivery of `event` to an endpoint, due now.
pub fn delivery_row(
    event: &event::Model,
    endpoint_id: &str,
    now: DateTime<Utc>,
) -> delivery::Model {
    delivery::Model {
        id: new_id("dlv"),
        event_id: event.id.to_string(),
        merchant_id: event.merchant_id.to_string(),
        endpoint_id: endpoint_id.to_owned(),
        status: payd_model::webhooks::DeliveryStatus::Pending,
        attempts: 0,
        transient_failures: 0,
        auth_failures: 0,
        next_attempt_at: now,
        lease_owner: None,
        lease_until: None,
        last_status_code: None,
        last_error: None,
        delivered_at: None,
        created_at: now,
    }
}

/// An event about to be recorded. `object` is the object's JSON exactly as the API renders it.
pub struct NewEvent<'a> {
    pub merchant_id: &'a MerchantId,
    pub profile_id: Option<&'a ProfileId>,
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

/// The event's row: its envelope, stamped `now`, with a new id. Written by [`record`].
pub fn row(e: NewEvent<'_>, now: DateTime<Utc>) -> Result<event::Model, DbErr> {
    debug_assert!(
        crate::event_types::listed(e.event_type, e.content_type),
        "event type `{}` with content `{}` is not in event_types::EVENT_TYPES: add its row, then PAYD_UPDATE_DOCS=1 cargo test --lib event_types",
        e.event_type,
        e.content_type
    );
    let id = EventId::new();
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
    Ok(event::Model {
        id,
        merchant_id: e.merchant_id.clone(),
        profile_id: e.profile_id.cloned(),
        test_mode: e.test_mode,
        event_type: e.event_type.to_owned(),
        object_id: e.object_id.to_owned(),
        payload,
        created_at: now,
        purged_at: None,
    })
}

/// Records events and one delivery of each per endpoint of its shop and mode, each due at its
/// `send_at`, in three statements however many there are (the events, the shops' endpoints,
/// the deliveries); answers how many deliveries each event queued (the writer wakes the
/// dispatcher only when there are some). A paused endpoint gets its delivery too: the
/// dispatcher parks it when it claims it, and it is sent when the endpoint resumes.
///
/// `send_at` is base time (the dispatcher's clock), while an event's `created_at` is the time
/// on its merchant's timeline: a sandbox merchant whose test clock was advanced records its
/// events in its own future, and they are still sent at once.
pub async fn record(
    db: &impl ConnectionTrait,
    events: &[(event::Model, DateTime<Utc>)],
) -> Result<Vec<usize>, DbErr> {
    let rows: Vec<event::ActiveModel> = events
        .iter()
        .map(|(e, _)| e.clone().into_active_model())
        .collect();
    crate::db::insert_rows(db, &rows, None).await?;
    let shop = |e: &event::Model| {
        e.profile_id
            .clone()
            .filter(|_| e.event_type != ENDPOINT_DISABLED)
    };
    let shops: BTreeSet<ProfileId> = events.iter().filter_map(|(e, _)| shop(e)).collect();
    if shops.is_empty() {
        return Ok(vec![0; events.len()]);
    }
    let endpoints: Vec<(String, String, bool)> = webhook_endpoint::Entity::find()
        .select_only()
        .column(webhook_endpoint::Column::Id)
        .column(webhook_endpoint::Column::ProfileId)
        .column(webhook_endpoint::Column::TestMode)
        .filter(webhook_endpoint::Column::ProfileId.is_in(shops))
        .order_by_asc(webhook_endpoint::Column::Id)
        .into_tuple()
        .all(db)
        .await?;
    let mut queued = Vec::with_capacity(events.len());
    let mut deliveries = Vec::new();
    for (e, send_at) in events {
        let before = deliveries.len();
        if let Some(profile_id) = shop(e) {
            // Invariant: an event goes only to its shop's endpoint of its own mode.
            let mine = |(_, p, test_mode): &&(String, String, bool)| {
                *p == profile_id && *test_mode == e.test_mode
            };
            for (endpoint_id, _, _) in endpoints.iter().filter(mine) {
                deliveries.push(delivery_row(e, endpoint_id, *send_at).into_active_model());
            }
        }
        queued.push(deliveries.len() - before);
    }
    crate::db::insert_rows(db, &deliveries, None).await?;
    Ok(queued)
}

//! The events' reads: a page of a caller's events with how their delivery stands, an event's
//! attempts, and the events a replay sends again with the manual retries it queues.

use chrono::{DateTime, Utc};
use payd_entity::{delivery, delivery_attempt, event};
use payd_model::webhooks::DeliveryStatus;
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};

use super::api::{AttemptView, EventView, ListEventsRequest, Replay, ReplayQueued};
use crate::{
    auth::keys::Caller,
    commit::Db,
    error::ApiError,
    pagination::{created_between, paginate, List, Page},
    webhooks::store::{manual_retries, ManualRetry},
};

/// A page of the caller's events matching `req`, each with how its delivery stands.
pub async fn list(
    db: &Db,
    caller: &Caller,
    req: &ListEventsRequest,
    page: &Page,
) -> Result<List<EventView>, ApiError> {
    let mut q = visible_events(caller, req.profile_id.as_deref())?;
    let visible = q.clone();
    if let Some(o) = &req.object_id {
        q = q.filter(event::Column::ObjectId.eq(o.as_str()));
    }
    if let Some(t) = &req.event_type {
        q = q.filter(event::Column::EventType.eq(t.as_str()));
    }
    q = created_between(
        q,
        event::Column::CreatedAt,
        req.created_after,
        req.created_before,
    );
    if let Some(delivered) = req.delivered {
        // Delivered: at least one delivery, and every one of them delivered.
        let with = |delivered: bool| {
            let status = delivery::Column::Status;
            with_deliveries(
                caller,
                if delivered {
                    status.eq(DeliveryStatus::Delivered)
                } else {
                    status.ne(DeliveryStatus::Delivered)
                },
            )
        };
        let done = sea_orm::Condition::all()
            .add(event::Column::Id.in_subquery(with(true)))
            .add(event::Column::Id.not_in_subquery(with(false)));
        q = q.filter(if delivered { done } else { done.not() });
    }
    let events = paginate(db, visible, q, event::Column::Id, page).await?;
    let deliveries = delivery::Entity::find()
        .filter(delivery::Column::EventId.is_in(events.data.iter().map(|e| e.id.clone())))
        .all(db)
        .await?;
    let list = events.map(|e| {
        let mine: Vec<delivery::Model> = deliveries
            .iter()
            .filter(|d| d.event_id == e.id)
            .cloned()
            .collect();
        EventView {
            delivery_status: delivery_status(&mine).to_owned(),
            envelope: serde_json::value::RawValue::from_string(e.payload).unwrap_or_else(|_| {
                serde_json::value::RawValue::from_string("null".into()).expect("null is JSON")
            }),
            purged: e.purged_at.is_some(),
            event_id: e.id.into(),
            event_type: e.event_type,
            object_id: e.object_id,
            test_mode: e.test_mode,
            created: e.created_at,
        }
    });
    Ok(list)
}

/// An event the caller sees, by id.
pub async fn find_event(
    db: &Db,
    caller: &Caller,
    event_id: &crate::ids::EventId,
) -> Result<event::Model, ApiError> {
    // An event of no shop (merchant-wide) is seen by merchant-wide callers only.
    let scope = caller.scope();
    event::Entity::find_by_id(event_id.clone())
        .one(db)
        .await?
        .filter(|e| {
            let shop = e.profile_id.as_deref().unwrap_or_default();
            scope.sees(&e.merchant_id, e.test_mode, shop)
        })
        .ok_or_else(|| ApiError::not_found("event"))
}

fn delivery_status(deliveries: &[delivery::Model]) -> &'static str {
    if deliveries.is_empty() {
        "none"
    } else if deliveries
        .iter()
        .all(|d| d.status == DeliveryStatus::Delivered)
    {
        "delivered"
    } else if deliveries
        .iter()
        .any(|d| d.status == DeliveryStatus::Pending)
    {
        "pending"
    } else if deliveries
        .iter()
        .any(|d| d.status == DeliveryStatus::Paused)
    {
        "paused"
    } else {
        "failed"
    }
}

/// The caller's events in its mode, of the shop it names or is scoped to (all its shops'
/// otherwise).
fn visible_events(
    caller: &Caller,
    profile_id: Option<&str>,
) -> Result<sea_orm::Select<event::Entity>, ApiError> {
    let mut q = event::Entity::find()
        .filter(event::Column::MerchantId.eq(caller.merchant_id.as_str()))
        .filter(event::Column::TestMode.eq(caller.test_mode()));
    if let Some(shop) = caller.scope().list_shop(profile_id)? {
        q = q.filter(event::Column::ProfileId.eq(shop));
    }
    Ok(q)
}

/// The ids of the caller's events with a delivery matching `status` (a subquery).
fn with_deliveries(
    caller: &Caller,
    status: sea_orm::sea_query::SimpleExpr,
) -> sea_orm::sea_query::SelectStatement {
    sea_orm::sea_query::Query::select()
        .column(delivery::Column::EventId)
        .from(delivery::Entity)
        .and_where(delivery::Column::MerchantId.eq(caller.merchant_id.as_str()))
        .and_where(status)
        .to_owned()
}

/// Every attempt of an event, oldest first.
pub async fn attempts(db: &Db, event: &event::Model) -> Result<Vec<AttemptView>, ApiError> {
    Ok(delivery_attempt::Entity::find()
        .filter(delivery_attempt::Column::EventId.eq(event.id.as_str()))
        .order_by_asc(delivery_attempt::Column::CreatedAt)
        .order_by_asc(delivery_attempt::Column::Id)
        .all(db)
        .await?
        .into_iter()
        .map(AttemptView::from)
        .collect())
}

/// The page of events `replay` sends again, oldest first, and whether more match.
pub async fn replay_page(
    db: &Db,
    caller: &Caller,
    replay: &Replay,
) -> Result<(Vec<event::Model>, bool), ApiError> {
    let mut q = visible_events(caller, replay.profile_id.as_deref())?
        .filter(event::Column::CreatedAt.gte(replay.since));
    if let Some(until) = replay.until {
        q = q.filter(event::Column::CreatedAt.lt(until));
    }
    if !replay.event_types.is_empty() {
        q = q.filter(event::Column::EventType.is_in(replay.event_types.iter().map(String::as_str)));
    }
    if replay.only_failed {
        let failed = with_deliveries(caller, delivery::Column::Status.eq("failed"));
        q = q.filter(event::Column::Id.in_subquery(failed));
    }
    if let Some(after) = &replay.starting_after {
        q = q.filter(event::Column::Id.gt(after.as_str()));
    }
    let mut events = q
        .order_by_asc(event::Column::Id)
        .limit(replay.limit + 1)
        .all(db)
        .await?;
    let has_more = events.len() as u64 > replay.limit;
    events.truncate(replay.limit as usize);
    Ok((events, has_more))
}

/// The manual retries of `events` (a page of a replay); the events of shops with no endpoint
/// to send to (or only a paused one), and those not to be sent, are skipped.
pub async fn queue(
    db: &Db,
    events: &[event::Model],
    has_more: bool,
    now: DateTime<Utc>,
) -> Result<(ReplayQueued, Vec<ManualRetry>), ApiError> {
    let (mut retries, mut event_ids, mut skipped) = (Vec::new(), Vec::new(), Vec::new());
    for e in events {
        match manual_retries(db, e, now).await {
            Ok(r) => {
                retries.extend(r);
                event_ids.push(e.id.to_string());
            }
            // The shop has no endpoint to send to, or only a paused one; or the event is not
            // to be sent (purged, or about the endpoint itself).
            Err(err)
                if matches!(
                    err.code,
                    "no_endpoint" | "endpoint_disabled" | "event_payload_purged" | "event_not_sent"
                ) =>
            {
                skipped.push(e.id.to_string())
            }
            Err(err) => return Err(err),
        }
    }
    let queued = ReplayQueued {
        queued: event_ids.len(),
        delivery_ids: retries.iter().map(|r| r.delivery.id.clone()).collect(),
        event_ids,
        skipped,
        has_more,
        next: has_more
            .then(|| events.last().map(|e| e.id.to_string()))
            .flatten(),
    };
    Ok((queued, retries))
}

//! Delivery records: list events, show an event's delivery attempts, and send an event again.

use actix_web::{web, HttpResponse};
use chrono::{DateTime, Utc};
use payd_entity::{delivery, delivery_attempt, event};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder, QuerySelect};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::{
    auth::{Caller, SecretKey},
    error::ApiError,
    http::{ApiJson, PathId},
    pagination::{created_between, paginate, List, ListQuery, Page},
    state::AppState,
    webhooks::{dispatcher::Dispatcher, store::manual_retries},
};

crate::http::routes! {
    "/events/{merchant_id}" => { post: list_events },
    "/events/{merchant_id}/{event_id}/attempts" => { get: list_attempts },
    "/events/{merchant_id}/{event_id}/retry" => { post: retry_event },
    "/events/{merchant_id}/replay" => { post: replay_events },
}

/// `POST /events/{merchant_id}/replay`: the caller's events created in `[since, until)`,
/// oldest first, each sent again as a manual attempt.
#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplayRequest {
    pub since: DateTime<Utc>,
    /// Events created before this moment (none: up to the newest).
    #[serde(default)]
    pub until: Option<DateTime<Utc>>,
    /// Only events of these types.
    #[serde(default)]
    pub event_types: Option<Vec<String>>,
    /// Only events with a delivery that failed (its automatic schedule ran out).
    #[serde(default)]
    pub only_failed: bool,
    /// Only this shop's events (a caller scoped to a shop replays only its own anyway).
    #[serde(default)]
    pub profile_id: Option<String>,
    /// At most this many events (1 to `webhooks.replay_max`, which is also the default).
    #[serde(default)]
    pub limit: Option<u64>,
    /// Continue after this event (the `next` of the previous call).
    #[serde(default)]
    pub starting_after: Option<String>,
}

/// A replay, accepted: the events queued (oldest first) and where to continue.
#[derive(Debug, Serialize, ToSchema)]
pub struct ReplayQueued {
    pub queued: usize,
    pub event_ids: Vec<String>,
    pub delivery_ids: Vec<String>,
    /// Matching events of shops with no webhook endpoint (or only a paused one): not queued.
    pub skipped: Vec<String>,
    /// More events match: send the same request with `starting_after` = `next`.
    pub has_more: bool,
    pub next: Option<String>,
}

#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ListEventsRequest {
    /// Only this shop's events (a caller scoped to a shop sees only its own anyway).
    #[serde(default)]
    pub profile_id: Option<String>,
    /// Only events about this object (payment id, refund id, …).
    #[serde(default)]
    pub object_id: Option<String>,
    /// 1 to 100 (default 10).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 100)]
    pub limit: Option<i64>,
    #[serde(default)]
    pub event_type: Option<String>,
    #[serde(default)]
    pub created_after: Option<DateTime<Utc>>,
    #[serde(default)]
    pub created_before: Option<DateTime<Utc>>,
    /// Only events whose every delivery succeeded (`true`) or not (`false`).
    #[serde(default)]
    pub delivered: Option<bool>,
    #[serde(default)]
    pub starting_after: Option<String>,
    #[serde(default)]
    pub ending_before: Option<String>,
}

/// An event and how its delivery stands.
#[derive(Debug, Serialize, ToSchema)]
pub struct EventView {
    pub event_id: String,
    pub event_type: String,
    pub object_id: String,
    pub test_mode: bool,
    pub created: DateTime<Utc>,
    /// `delivered`, `pending`, `paused` (its endpoint is paused), `failed`, or `none` (no
    /// endpoint was configured).
    pub delivery_status: String,
    /// The envelope exactly as posted; `null` once purged.
    #[schema(value_type = Option<Object>)]
    pub envelope: Box<serde_json::value::RawValue>,
    /// The payload is past `webhooks.payload_retention_secs` and was purged: the event stays
    /// listed, and cannot be sent again (410 `event_payload_purged`).
    pub purged: bool,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct AttemptView {
    pub attempt_id: String,
    pub delivery_id: String,
    pub number: i32,
    /// `initial`, `automatic` or `manual`.
    pub trigger: String,
    #[schema(value_type = Object)]
    pub request_headers: serde_json::Value,
    pub response_status: Option<i32>,
    pub response_body: Option<String>,
    pub error_kind: Option<String>,
    pub duration_ms: i64,
    pub next_attempt_at: Option<DateTime<Utc>>,
    pub created: DateTime<Utc>,
}

impl TryFrom<delivery_attempt::Model> for AttemptView {
    type Error = sea_orm::DbErr;

    fn try_from(a: delivery_attempt::Model) -> Result<Self, Self::Error> {
        Ok(Self {
            request_headers: crate::stored::json("request_headers", &a.id, &a.request_headers)?,
            attempt_id: a.id,
            delivery_id: a.delivery_id,
            number: a.number,
            trigger: a.trigger,
            response_status: a.response_status,
            response_body: a.response_body,
            error_kind: a.error_kind,
            duration_ms: a.duration_ms,
            next_attempt_at: a.next_attempt_at,
            created: a.created_at,
        })
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct Attempts {
    pub data: Vec<AttemptView>,
}

/// A manual retry, accepted: the deliveries it will be sent on. Its attempts appear under
/// `GET /events/{merchant_id}/{event_id}/attempts` with trigger `manual`.
#[derive(Debug, Serialize, ToSchema)]
pub struct RetryQueued {
    pub event_id: String,
    pub delivery_ids: Vec<String>,
}

/// The path's merchant must be the caller's; anyone else's reads as missing.
fn own_merchant(caller: &Caller, merchant_id: &str) -> Result<(), ApiError> {
    if caller.merchant_id.as_str() != merchant_id {
        return Err(ApiError::not_found("merchant"));
    }
    Ok(())
}

async fn find_event(
    state: &AppState,
    caller: &Caller,
    event_id: &str,
) -> Result<event::Model, ApiError> {
    // An event of no shop (merchant-wide) is seen by merchant-wide callers only.
    let scope = caller.scope();
    event::Entity::find_by_id(event_id)
        .one(&state.db)
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
    } else if deliveries.iter().all(|d| d.status == "delivered") {
        "delivered"
    } else if deliveries.iter().any(|d| d.status == "pending") {
        "pending"
    } else if deliveries.iter().any(|d| d.status == "paused") {
        "paused"
    } else {
        "failed"
    }
}

/// List events, newest first.
#[utoipa::path(post, path = "/events/{merchant_id}", tag = "events",
    params(("merchant_id" = String, Path)), request_body = ListEventsRequest,
    responses((status = 200, body = List<EventView>), (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn list_events(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathId(merchant_id): PathId<crate::ids::MerchantId>,
    ApiJson(req): ApiJson<ListEventsRequest>,
) -> Result<HttpResponse, ApiError> {
    own_merchant(&caller, &merchant_id)?;
    let page = Page::parse::<crate::ids::EventId>(&ListQuery {
        limit: req.limit,
        starting_after: req.starting_after.clone(),
        ending_before: req.ending_before.clone(),
    })?;
    let mut q = visible_events(&caller, req.profile_id.as_deref())?;
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
                &caller,
                if delivered {
                    status.eq("delivered")
                } else {
                    status.ne("delivered")
                },
            )
        };
        let done = sea_orm::Condition::all()
            .add(event::Column::Id.in_subquery(with(true)))
            .add(event::Column::Id.not_in_subquery(with(false)));
        q = q.filter(if delivered { done } else { done.not() });
    }
    let events = paginate(&state.db, visible, q, event::Column::Id, &page).await?;
    let deliveries = delivery::Entity::find()
        .filter(delivery::Column::EventId.is_in(events.data.iter().map(|e| e.id.clone())))
        .all(&state.db)
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
            event_id: e.id,
            event_type: e.event_type,
            object_id: e.object_id,
            test_mode: e.test_mode,
            created: e.created_at,
        }
    });
    Ok(HttpResponse::Ok().json(list))
}

/// Every delivery attempt of an event, oldest first.
#[utoipa::path(get, path = "/events/{merchant_id}/{event_id}/attempts", tag = "events",
    params(("merchant_id" = String, Path), ("event_id" = String, Path)),
    responses((status = 200, body = Attempts), (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn list_attempts(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (merchant_id, event_id) = path.into_inner();
    own_merchant(&caller, &merchant_id)?;
    let event = find_event(&state, &caller, &event_id).await?;
    let data = delivery_attempt::Entity::find()
        .filter(delivery_attempt::Column::EventId.eq(event.id.as_str()))
        .order_by_asc(delivery_attempt::Column::CreatedAt)
        .order_by_asc(delivery_attempt::Column::Id)
        .all(&state.db)
        .await?
        .into_iter()
        .map(AttemptView::try_from)
        .collect::<Result<_, _>>()?;
    Ok(HttpResponse::Ok().json(Attempts { data }))
}

/// Send the event again (a manual attempt): queued with the merchant's deliveries and sent
/// within its in-flight bound; the automatic schedule is left as it is.
#[utoipa::path(post, path = "/events/{merchant_id}/{event_id}/retry", tag = "events",
    params(("merchant_id" = String, Path), ("event_id" = String, Path)),
    responses((status = 202, body = RetryQueued), (status = 404, body = crate::error::ErrorBody),
        (status = 409, body = crate::error::ErrorBody), (status = 410, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn retry_event(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    dispatcher: web::Data<Dispatcher>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (merchant_id, event_id) = path.into_inner();
    own_merchant(&caller, &merchant_id)?;
    let event = find_event(&state, &caller, &event_id).await?;
    let retries = manual_retries(&state.db, &event, state.clock.base()).await?;
    let queued = RetryQueued {
        event_id: event.id.clone(),
        delivery_ids: retries.iter().map(|r| r.delivery.id.clone()).collect(),
    };
    if !dispatcher
        .retry(caller.merchant_id.as_str(), retries)
        .await?
    {
        return Err(too_many_retries());
    }
    Ok(HttpResponse::Accepted().json(queued))
}

/// Send a time range of events again (manual attempts, oldest first), as a receiver recovers
/// from an outage; the automatic schedule is left as it is. At most `webhooks.replay_max`
/// events per call; `has_more` and `next` continue.
#[utoipa::path(post, path = "/events/{merchant_id}/replay", tag = "events",
    params(("merchant_id" = String, Path)), request_body = ReplayRequest,
    responses((status = 202, body = ReplayQueued), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody), (status = 429, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn replay_events(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    dispatcher: web::Data<Dispatcher>,
    PathId(merchant_id): PathId<crate::ids::MerchantId>,
    ApiJson(req): ApiJson<ReplayRequest>,
) -> Result<HttpResponse, ApiError> {
    own_merchant(&caller, &merchant_id)?;
    let max = state.settings.webhooks.replay_bound();
    let limit = req.limit.unwrap_or(max);
    if !(1..=max).contains(&limit) {
        return Err(ApiError::invalid_param(
            "limit",
            format!("a replay queues 1 to {max} events per call; continue with starting_after"),
        ));
    }
    if req.until.is_some_and(|until| until <= req.since) {
        return Err(ApiError::invalid_param(
            "until",
            "until must be after since",
        ));
    }
    let types = req.event_types.unwrap_or_default();
    if types.len() > 50 || types.iter().any(|t| !is_event_type(t)) {
        return Err(ApiError::invalid_param(
            "event_types",
            "at most 50 event types, each like payment_succeeded",
        ));
    }
    if let Some(after) = &req.starting_after {
        if crate::ids::EventId::parse(after).is_none() {
            return Err(ApiError::invalid_param("starting_after", "not an event id"));
        }
    }
    let mut q = visible_events(&caller, req.profile_id.as_deref())?
        .filter(event::Column::CreatedAt.gte(req.since));
    if let Some(until) = req.until {
        q = q.filter(event::Column::CreatedAt.lt(until));
    }
    if !types.is_empty() {
        q = q.filter(event::Column::EventType.is_in(types));
    }
    if req.only_failed {
        let failed = with_deliveries(&caller, delivery::Column::Status.eq("failed"));
        q = q.filter(event::Column::Id.in_subquery(failed));
    }
    if let Some(after) = &req.starting_after {
        q = q.filter(event::Column::Id.gt(after.as_str()));
    }
    let mut events = q
        .order_by_asc(event::Column::Id)
        .limit(limit + 1)
        .all(&state.db)
        .await?;
    let has_more = events.len() as u64 > limit;
    events.truncate(limit as usize);
    let now = state.clock.base();
    let (mut retries, mut event_ids, mut skipped) = (Vec::new(), Vec::new(), Vec::new());
    for e in &events {
        match manual_retries(&state.db, e, now).await {
            Ok(r) => {
                retries.extend(r);
                event_ids.push(e.id.clone());
            }
            // The shop has no endpoint to send to, or only a paused one; or the event is not
            // to be sent (purged, or about the endpoint itself).
            Err(err)
                if matches!(
                    err.code,
                    "no_endpoint" | "endpoint_disabled" | "event_payload_purged" | "event_not_sent"
                ) =>
            {
                skipped.push(e.id.clone())
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
            .then(|| events.last().map(|e| e.id.clone()))
            .flatten(),
    };
    if !retries.is_empty()
        && !dispatcher
            .retry(caller.merchant_id.as_str(), retries)
            .await?
    {
        return Err(too_many_retries());
    }
    Ok(HttpResponse::Accepted().json(queued))
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

fn too_many_retries() -> ApiError {
    ApiError::rate_limited(
        "too_many_retries",
        "the merchant's queue of manual retries is full; retry in a few seconds",
        5,
    )
}

/// An event type's shape: `payment_succeeded`.
fn is_event_type(t: &str) -> bool {
    (1..=64).contains(&t.len()) && t.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
}

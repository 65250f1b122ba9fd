//! Delivery records: list events, show an event's delivery attempts, and send an event again.

use actix_web::{web, HttpResponse};
use chrono::{DateTime, Utc};
use payd_entity::{delivery, delivery_attempt, event};
use sea_orm::{ColumnTrait, EntityTrait, QueryFilter, QueryOrder};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::{
    auth::{Caller, SecretKey},
    error::ApiError,
    http::ApiJson,
    pagination::{created_between, paginate, List, ListQuery, Page},
    state::AppState,
    webhooks::delivery::manual_retries,
};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/events/{merchant_id}").route(web::post().to(list_events)))
        .service(
            web::resource("/events/{merchant_id}/{event_id}/attempts")
                .route(web::get().to(list_attempts)),
        )
        .service(
            web::resource("/events/{merchant_id}/{event_id}/retry")
                .route(web::post().to(retry_event)),
        );
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
    /// The envelope exactly as posted.
    #[schema(value_type = Object)]
    pub envelope: Box<serde_json::value::RawValue>,
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

impl From<delivery_attempt::Model> for AttemptView {
    fn from(a: delivery_attempt::Model) -> Self {
        Self {
            attempt_id: a.id,
            delivery_id: a.delivery_id,
            number: a.number,
            trigger: a.trigger,
            request_headers: serde_json::from_str(&a.request_headers).unwrap_or_default(),
            response_status: a.response_status,
            response_body: a.response_body,
            error_kind: a.error_kind,
            duration_ms: a.duration_ms,
            next_attempt_at: a.next_attempt_at,
            created: a.created_at,
        }
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
    merchant_id: web::Path<String>,
    ApiJson(req): ApiJson<ListEventsRequest>,
) -> Result<HttpResponse, ApiError> {
    own_merchant(&caller, &merchant_id)?;
    let page = Page::parse(
        &ListQuery {
            limit: req.limit,
            starting_after: req.starting_after.clone(),
            ending_before: req.ending_before.clone(),
        },
        "evt",
    )?;
    let mut q = event::Entity::find()
        .filter(event::Column::MerchantId.eq(caller.merchant_id.as_str()))
        .filter(event::Column::TestMode.eq(caller.test_mode()));
    if let Some(shop) = caller.scope().list_shop(req.profile_id.as_deref())? {
        q = q.filter(event::Column::ProfileId.eq(shop));
    }
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
            sea_orm::sea_query::Query::select()
                .column(delivery::Column::EventId)
                .from(delivery::Entity)
                .and_where(delivery::Column::MerchantId.eq(caller.merchant_id.as_str()))
                .and_where(if delivered {
                    status.eq("delivered")
                } else {
                    status.ne("delivered")
                })
                .to_owned()
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
        .map(AttemptView::from)
        .collect();
    Ok(HttpResponse::Ok().json(Attempts { data }))
}

/// Send the event again (a manual attempt): queued with the merchant's deliveries and sent
/// within its in-flight bound; the automatic schedule is left as it is.
#[utoipa::path(post, path = "/events/{merchant_id}/{event_id}/retry", tag = "events",
    params(("merchant_id" = String, Path), ("event_id" = String, Path)),
    responses((status = 202, body = RetryQueued), (status = 404, body = crate::error::ErrorBody),
        (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn retry_event(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
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
    if !state
        .dispatcher
        .retry(caller.merchant_id.as_str(), retries)
        .await?
    {
        return Err(ApiError::rate_limited(
            "too_many_retries",
            "the merchant's queue of manual retries is full; retry in a few seconds",
            5,
        ));
    }
    Ok(HttpResponse::Accepted().json(queued))
}

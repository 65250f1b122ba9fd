//! Delivery records: list events, show an event's delivery attempts, and send an event again.

use actix_web::{web, HttpResponse};

use super::{
    api::{Attempts, EventView, ListEventsRequest, ReplayQueued, ReplayRequest, RetryQueued},
    store::{self, find_event},
};
use crate::{
    auth::{Caller, SecretKey},
    error::ApiError,
    http::{ApiJson, PathId, PathIds},
    ids::{EventId, MerchantId},
    pagination::{List, ListQuery, Page},
    state::AppState,
    webhooks::{dispatcher::Dispatcher, store::manual_retries},
};

crate::http::routes! {
    "/events/{merchant_id}" => { post: list_events },
    "/events/{merchant_id}/{event_id}/attempts" => { get: list_attempts },
    "/events/{merchant_id}/{event_id}/retry" => { post: retry_event },
    "/events/{merchant_id}/replay" => { post: replay_events },
}

/// The path's merchant must be the caller's; anyone else's reads as missing.
fn own_merchant(caller: &Caller, merchant_id: &MerchantId) -> Result<(), ApiError> {
    if caller.merchant_id != *merchant_id {
        return Err(ApiError::not_found("merchant"));
    }
    Ok(())
}

/// List events, newest first.
///
/// The events recorded for the merchant in the key's mode (within the key's shop or the
/// `profile_id` asked for), each with how its delivery stands, filtered by object, event type,
/// creation time and whether it was delivered. The path's merchant must be the key's. Read
/// only; needs a secret key.
///
/// Fails: `resource_missing` (400), `profile_mismatch` (403), `resource_missing` (404).
///
/// Events: none.
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
    let list = store::list(&state.db, &caller, &req, &page).await?;
    Ok(HttpResponse::Ok().json(list))
}

/// Every delivery attempt of an event, oldest first.
///
/// Each attempt at each of the shop's endpoints, with its answer or error. The path's merchant
/// must be the key's. Read only; needs a secret key.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/events/{merchant_id}/{event_id}/attempts", tag = "events", operation_id = "list_event_attempts",
    params(("merchant_id" = String, Path), ("event_id" = String, Path)),
    responses((status = 200, body = Attempts), (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn list_attempts(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathIds(merchant_id, event_id): PathIds<MerchantId, EventId>,
) -> Result<HttpResponse, ApiError> {
    own_merchant(&caller, &merchant_id)?;
    let event = find_event(&state.db, &caller, &event_id).await?;
    let data = store::attempts(&state.db, &event).await?;
    Ok(HttpResponse::Ok().json(Attempts { data }))
}

/// Send the event again (a manual attempt).
///
/// Queued with the merchant's deliveries and sent within its in-flight bound (202); the
/// automatic schedule is left as it is. The event is sent as it was recorded, under its
/// `event_id`: no new event is made. Refused when the shop has no endpoint or only a paused
/// one, for a `webhook_endpoint_disabled` event (never sent), and once retention purged the
/// payload. Needs a secret key.
///
/// Fails: `resource_missing` (404), `event_not_sent` (409), `no_endpoint` (409), `endpoint_disabled` (409), `event_payload_purged` (410), `too_many_retries` (429).
///
/// Events: none.
#[utoipa::path(post, path = "/events/{merchant_id}/{event_id}/retry", tag = "events",
    params(("merchant_id" = String, Path), ("event_id" = String, Path)),
    responses((status = 202, body = RetryQueued), (status = 404, body = crate::error::ErrorBody),
        (status = 409, body = crate::error::ErrorBody), (status = 410, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn retry_event(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    dispatcher: web::Data<Dispatcher>,
    PathIds(merchant_id, event_id): PathIds<MerchantId, EventId>,
) -> Result<HttpResponse, ApiError> {
    own_merchant(&caller, &merchant_id)?;
    let event = find_event(&state.db, &caller, &event_id).await?;
    let retries = manual_retries(&state.db, &event, state.clock.base()).await?;
    let queued = RetryQueued {
        event_id: event.id.to_string(),
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

/// Send a time range of events again (manual attempts, oldest first).
///
/// For a receiver recovering from an outage: the events created since `since` (and before
/// `until`), only of the types named or only those whose delivery failed if asked, are queued
/// as manual attempts (202); the automatic schedule is left as it is. Events of shops with no
/// endpoint or only a paused one, and those not to be sent, are `skipped`. At most
/// `webhooks.replay_max` events per call; `has_more` and `next` continue. Needs a secret key.
///
/// Fails: `profile_mismatch` (403), `resource_missing` (404), `too_many_retries` (429).
///
/// Events: none.
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
    let replay = req.parse(state.settings.webhooks.replay_bound())?;
    let (events, has_more) = store::replay_page(&state.db, &caller, &replay).await?;
    let (queued, retries) = store::queue(&state.db, &events, has_more, state.clock.base()).await?;
    if !retries.is_empty()
        && !dispatcher
            .retry(caller.merchant_id.as_str(), retries)
            .await?
    {
        return Err(too_many_retries());
    }
    Ok(HttpResponse::Accepted().json(queued))
}

fn too_many_retries() -> ApiError {
    ApiError::rate_limited(
        "too_many_retries",
        "the merchant's queue of manual retries is full; retry in a few seconds",
        5,
    )
}

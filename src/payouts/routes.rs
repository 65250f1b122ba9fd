//! Handlers of the payout routes. Changes go through the payout's actor; reads go to the
//! store.

use actix_web::{web, HttpResponse};

use super::{
    actor::{Command, Exec, Patch, PayoutError, Payouts},
    api::{
        CreatePayoutRequest, ListPayoutsQuery, Payout, RetrievePayoutQuery, UpdatePayoutRequest,
    },
    machine::{self, Refusal, Status},
    store,
};
use crate::{
    auth::{Caller, SecretKey},
    clock,
    error::ApiError,
    fields::{check_metadata, check_text, parse_amount, parse_currency},
    http::{ApiJson, ApiQuery, PathId},
    ids::PayoutId,
    pagination::{List, Page},
    state::AppState,
};

crate::http::routes! {
    "/payouts/create" => { post: create_payout },
    "/payouts/list" => { get: list_payouts, post: filter_payouts },
    "/payouts/{payout_id}" => { get: retrieve_payout, put: update_payout },
    "/payouts/{payout_id}/confirm" => { post: confirm_payout },
    "/payouts/{payout_id}/cancel" => { post: cancel_payout },
    "/payouts/{payout_id}/fulfill" => { post: fulfill_payout },
}

impl From<PayoutError> for ApiError {
    #[track_caller]
    fn from(e: PayoutError) -> Self {
        match e {
            PayoutError::NotFound => ApiError::not_found("payout").param("payout_id"),
            PayoutError::Refused(r @ Refusal::InvalidState { .. }) => {
                ApiError::conflict("invalid_state", r.to_string())
            }
            PayoutError::InsufficientBalance => {
                ApiError::invalid("insufficient_balance", e.to_string()).param("amount")
            }
            PayoutError::NotCancellable => ApiError::conflict("invalid_state", e.to_string()),
            PayoutError::LostRace => ApiError::concurrent_update("payout"),
            PayoutError::Conflict(c) => c.into(),
            PayoutError::Db(e) => e.into(),
        }
    }
}

async fn run(
    payouts: &Payouts,
    caller: &Caller,
    id: &PayoutId,
    command: Command,
) -> Result<HttpResponse, ApiError> {
    let exec = Exec {
        scope: Some(caller.scope()),
        command,
        timeline: clock::current(),
    };
    let p = payouts.send(id, exec).await??;
    Ok(HttpResponse::Ok().json(Payout::render(&p)))
}

/// Create a payout of the shop's available balance to a bank account or a card.
///
/// Without `confirm` it is created `requires_confirmation`. With `confirm: true` its amount is
/// reserved at once (`requires_fulfillment`), and nothing is created when the available
/// balance does not cover it; with `auto_fulfill: true` as well it goes on to the processor
/// (`initiated`, then `pending`, `success` or `failed`; a pending one settles later,
/// asynchronously). A payout not sent to the processor within 24 hours expires. Needs a secret
/// key and a shop.
///
/// Fails: `shop_required` (400), `invalid_currency` (400), `amount_not_positive` (400), `amount_too_large` (400), `insufficient_balance` (400).
///
/// Events: `payout_initiated`, `payout_processing`, `payout_success`, `payout_failed`, `payout_reversed`, `payout_expired`.
#[utoipa::path(post, path = "/payouts/create", tag = "payouts", request_body = CreatePayoutRequest,
    responses((status = 201, body = Payout), (status = 400, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn create_payout(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    payouts: web::Data<Payouts>,
    ApiJson(req): ApiJson<CreatePayoutRequest>,
) -> Result<HttpResponse, ApiError> {
    let shop = caller.require_shop()?.clone();
    let now = state.clock.now();
    let m = req.parse(state.settings.limits.max_amount, now)?.row(
        &caller.merchant_id,
        &shop,
        caller.test_mode(),
        now,
    );
    // One created `initiated` (its reservation, event and the job that asks again recorded
    // with the row) is then asked about at the processor, as a confirm does.
    store::insert(&state.db, &m)
        .await
        .map_err(PayoutError::from)?;
    let m = match m.status == machine::Status::Initiated {
        true => {
            let exec = Exec {
                scope: Some(caller.scope()),
                command: Command::Sync,
                timeline: clock::current(),
            };
            payouts.send(&m.id, exec).await??
        }
        false => m,
    };
    Ok(HttpResponse::Created().json(Payout::render(&m)))
}

/// Retrieve a payout; `force_sync=true` asks the processor first.
///
/// Reads the payout as stored. With `force_sync=true` its actor first asks the processor about
/// a payout it has, and records what changed (`pending`, `success`, `failed`, `reversed`).
/// Needs a secret key.
///
/// Fails: `resource_missing` (404), `concurrent_update` (409).
///
/// Events: `payout_processing`, `payout_success`, `payout_failed`, `payout_reversed`.
#[utoipa::path(get, path = "/payouts/{payout_id}", tag = "payouts",
    params(("payout_id" = String, Path), RetrievePayoutQuery),
    responses((status = 200, body = Payout), (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn retrieve_payout(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    payouts: web::Data<Payouts>,
    PathId(id): PathId<crate::ids::PayoutId>,
    ApiQuery(q): ApiQuery<RetrievePayoutQuery>,
) -> Result<HttpResponse, ApiError> {
    if q.force_sync {
        return run(&payouts, &caller, &id, Command::Sync).await;
    }
    let missing = ApiError::no_such::<PayoutId>;
    let p = crate::owned::find_owned(&state.db, &id, &caller.scope())
        .await?
        .ok_or_else(missing)?;
    Ok(HttpResponse::Ok().json(Payout::render(&p)))
}

/// Update a payout before it is confirmed.
///
/// Changes the amount, currency, destination, `auto_fulfill`, description or metadata of a
/// payout that is `requires_confirmation`; any other status is 409. Needs a secret key.
///
/// Fails: `invalid_currency` (400), `amount_not_positive` (400), `amount_too_large` (400), `resource_missing` (404), `invalid_state` (409), `concurrent_update` (409).
///
/// Events: none.
#[utoipa::path(put, path = "/payouts/{payout_id}", tag = "payouts",
    params(("payout_id" = String, Path)), request_body = UpdatePayoutRequest,
    responses((status = 200, body = Payout), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody), (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn update_payout(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    payouts: web::Data<Payouts>,
    PathId(id): PathId<crate::ids::PayoutId>,
    ApiJson(req): ApiJson<UpdatePayoutRequest>,
) -> Result<HttpResponse, ApiError> {
    let max = state.settings.limits.max_amount;
    let destination = match &req.destination {
        Some(d) => {
            let (shown, recipient) = d.checked(state.clock.now())?;
            Some((shown, recipient))
        }
        None => None,
    };
    let patch = Patch {
        amount: req
            .amount
            .map(|a| parse_amount("amount", a, max))
            .transpose()?,
        currency: req
            .currency
            .as_deref()
            .map(|c| parse_currency("currency", c))
            .transpose()?,
        destination,
        auto_fulfill: req.auto_fulfill,
        description: check_text("description", req.description.as_ref(), 1_000)?,
        metadata: check_metadata(req.metadata.as_ref())?,
    };
    run(&payouts, &caller, &id, Command::Update(Box::new(patch))).await
}

/// Confirm a payout: reserve its amount out of the available balance.
///
/// From `requires_confirmation`: the amount moves from `available` to `pending`. With
/// `auto_fulfill` the payout goes on to the processor (`initiated`, then `pending`, `success`
/// or `failed`), else it is `requires_fulfillment`. When the available balance does not cover
/// it, it stays `requires_confirmation`. Needs a secret key.
///
/// Fails: `insufficient_balance` (400), `resource_missing` (404), `invalid_state` (409), `concurrent_update` (409).
///
/// Events: `payout_initiated`, `payout_processing`, `payout_success`, `payout_failed`, `payout_reversed`, `payout_expired`.
#[utoipa::path(post, path = "/payouts/{payout_id}/confirm", tag = "payouts",
    params(("payout_id" = String, Path)),
    responses((status = 200, body = Payout), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody), (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn confirm_payout(
    SecretKey(caller): SecretKey,
    payouts: web::Data<Payouts>,
    PathId(id): PathId<crate::ids::PayoutId>,
) -> Result<HttpResponse, ApiError> {
    run(&payouts, &caller, &id, Command::Confirm).await
}

/// Cancel a payout.
///
/// Before the processor has it (`requires_confirmation`, `requires_fulfillment`) it is
/// cancelled here and its reservation released; while `initiated` or `pending` it is cancelled
/// through the processor. A payout the processor paid meanwhile is recorded as paid and the
/// cancel refused; any other status is 409. Needs a secret key.
///
/// Fails: `resource_missing` (404), `invalid_state` (409), `concurrent_update` (409).
///
/// Events: `payout_cancelled`, `payout_success`.
#[utoipa::path(post, path = "/payouts/{payout_id}/cancel", tag = "payouts",
    params(("payout_id" = String, Path)),
    responses((status = 200, body = Payout), (status = 404, body = crate::error::ErrorBody),
        (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn cancel_payout(
    SecretKey(caller): SecretKey,
    payouts: web::Data<Payouts>,
    PathId(id): PathId<crate::ids::PayoutId>,
) -> Result<HttpResponse, ApiError> {
    run(&payouts, &caller, &id, Command::Cancel).await
}

/// Fulfil a confirmed payout: send it to the processor.
///
/// Only from `requires_fulfillment`: `initiated`, then as the processor answers `pending`,
/// `success` or `failed` (the amount available again); a pending one settles later,
/// asynchronously. Needs a secret key.
///
/// Fails: `resource_missing` (404), `invalid_state` (409), `concurrent_update` (409).
///
/// Events: `payout_initiated`, `payout_processing`, `payout_success`, `payout_failed`, `payout_reversed`.
#[utoipa::path(post, path = "/payouts/{payout_id}/fulfill", tag = "payouts",
    params(("payout_id" = String, Path)),
    responses((status = 200, body = Payout), (status = 404, body = crate::error::ErrorBody),
        (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn fulfill_payout(
    SecretKey(caller): SecretKey,
    payouts: web::Data<Payouts>,
    PathId(id): PathId<crate::ids::PayoutId>,
) -> Result<HttpResponse, ApiError> {
    run(&payouts, &caller, &id, Command::Fulfill).await
}

async fn listed(
    state: &AppState,
    caller: &Caller,
    q: ListPayoutsQuery,
) -> Result<HttpResponse, ApiError> {
    let page = Page::parse::<crate::ids::PayoutId>(&q.page_query())?;
    if let Some(s) = q.status.as_deref().filter(|s| Status::parse(s).is_none()) {
        return Err(ApiError::invalid_param(
            "status",
            format!("unknown status {s:?}"),
        ));
    }
    let shop = caller.scope().list_shop(q.profile_id.as_deref())?;
    let list = store::list(
        &state.db,
        caller.merchant_id.as_str(),
        caller.test_mode(),
        shop.as_deref(),
        &q,
        &page,
    )
    .await?;
    Ok(HttpResponse::Ok().json(list.map(|p| Payout::render(&p))))
}

/// List payouts, newest first.
///
/// The payouts of the key's merchant and mode, within the key's shop or the `profile_id` asked
/// for, filtered by status, currency, amount and creation time. Read only; needs a secret key.
///
/// Fails: `resource_missing` (400), `profile_mismatch` (403).
///
/// Events: none.
#[utoipa::path(get, path = "/payouts/list", tag = "payouts", params(ListPayoutsQuery),
    responses((status = 200, body = List<Payout>), (status = 400, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn list_payouts(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    ApiQuery(q): ApiQuery<ListPayoutsQuery>,
) -> Result<HttpResponse, ApiError> {
    listed(&state, &caller, q).await
}

/// List payouts with the filters in a JSON body.
///
/// The same list and filters as `GET /payouts/list`, sent as a JSON body. Read only; needs a
/// secret key.
///
/// Fails: `resource_missing` (400), `profile_mismatch` (403).
///
/// Events: none.
#[utoipa::path(post, path = "/payouts/list", tag = "payouts", request_body = ListPayoutsQuery,
    responses((status = 200, body = List<Payout>), (status = 400, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn filter_payouts(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    ApiJson(q): ApiJson<ListPayoutsQuery>,
) -> Result<HttpResponse, ApiError> {
    listed(&state, &caller, q).await
}

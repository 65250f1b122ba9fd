//! Handlers of the refund routes. Creating and settling a refund goes through the payment's
//! actor; reads go to the store.

use actix_web::{web, HttpRequest, HttpResponse};

use super::{
    api::{
        CreateRefundRequest, ListRefundsRequest, Refund, RetrieveRefundQuery, UpdateRefundRequest,
    },
    store,
};
use crate::{
    auth::{Caller, SecretKey},
    commit,
    error::ApiError,
    fields::{check_metadata, check_text, parse_currency},
    http::{ApiJson, ApiQuery, PathId},
    idempotency,
    pagination::{List, Page},
    payments::actor::{run, Access, Command, Payments},
    state::AppState,
};

crate::http::routes! {
    "/refunds" => { post: create_refund },
    "/refunds/list" => { post: list_refunds },
    "/refunds/{refund_id}" => { get: retrieve_refund, post: update_refund },
}

/// Refund a payment fully, partly, or by product line.
///
/// Refunds `amount` (by default all that is left) or the `lines` named of a payment with a
/// captured amount: never more than is captured and not yet refunded or kept by a lost
/// dispute, never while a dispute is open, and not after `cancelled_post_capture`. The refund
/// is recorded `pending`, holding its amount, before the processor is asked; it answers
/// `succeeded`, `failed` (its amount refundable again) or `pending`, which its settle job
/// settles later. Needs a secret key; a retry with the same `Idempotency-Key` answers the same
/// refund, never a second one.
///
/// Fails: `amount_exceeds_refundable` (400), `processor_unsupported` (400), `resource_missing` (404), `invalid_state` (409), `dispute_open` (409), `processor_operation_pending` (409), `concurrent_update` (409), `processor_error` (502).
///
/// Events: `refund_succeeded`, `refund_failed`.
#[utoipa::path(post, path = "/refunds", tag = "refunds", request_body = CreateRefundRequest,
    responses((status = 201, body = Refund), (status = 400, body = crate::error::ErrorBody), (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn create_refund(
    http: HttpRequest,
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    payments: web::Data<Payments>,
    ApiJson(req): ApiJson<CreateRefundRequest>,
) -> Result<HttpResponse, ApiError> {
    // The retry of a request whose refund was made but whose answer was lost answers with
    // that refund, settled with the processor if it is pending: never a second refund.
    if let Some(id) = idempotency::resumed::<crate::ids::RefundId>(&http) {
        if let Some(refund) = crate::owned::find_owned(&state.db, &id, &caller.scope()).await? {
            let settled = settled(&payments, &caller, refund).await?;
            return Ok(HttpResponse::Created().json(settled));
        }
    }
    let payment_id = req.payment_id.clone();
    let (ask, reason, metadata) = req.parse()?;
    let command = Command::Refund {
        ask,
        reason,
        metadata,
    };
    let done = run(
        &payments,
        &payment_id,
        Some(Access::of(&caller, None)?),
        command,
        idempotency::request_key(&http),
    )
    .await?;
    let refund = done
        .refund
        .ok_or_else(|| ApiError::internal("refund command made no refund"))?;
    Ok(HttpResponse::Created().json(Refund::render(&refund)?))
}

/// Retrieve a refund; `force_sync=true` asks the processor first.
///
/// Reads the refund as stored. With `force_sync=true` its payment's actor first records the
/// refunds the processor lists for the payment, then asks where this refund stands if it is
/// still `pending`: it may become `succeeded`, or `failed` with its amount refundable again.
/// Needs a secret key.
///
/// Fails: `resource_missing` (404), `processor_operation_pending` (409), `concurrent_update` (409), `processor_error` (502).
///
/// Events: `refund_succeeded`, `refund_failed`.
#[utoipa::path(get, path = "/refunds/{refund_id}", tag = "refunds",
    params(("refund_id" = String, Path), RetrieveRefundQuery),
    responses((status = 200, body = Refund), (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn retrieve_refund(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    payments: web::Data<Payments>,
    PathId(id): PathId<crate::ids::RefundId>,
    ApiQuery(q): ApiQuery<RetrieveRefundQuery>,
) -> Result<HttpResponse, ApiError> {
    let refund = crate::owned::find_owned(&state.db, &id, &caller.scope())
        .await?
        .ok_or_else(|| ApiError::not_found("refund"))?;
    if q.force_sync != Some(true) {
        return Ok(HttpResponse::Ok().json(Refund::render(&refund)?));
    }
    Ok(HttpResponse::Ok().json(settled(&payments, &caller, refund).await?))
}

/// The refund after the processor was asked where it stands (through its payment's actor).
async fn settled(
    payments: &Payments,
    caller: &Caller,
    refund: payd_entity::refund::Model,
) -> Result<Refund, ApiError> {
    let command = Command::SettleRefund {
        refund_id: refund.id.clone(),
    };
    let access = Some(Access::of(caller, None)?);
    let done = run(payments, &refund.payment_id, access, command, None).await?;
    Ok(Refund::render(&done.refund.unwrap_or(refund))?)
}

/// Change a refund's reason or metadata.
///
/// Only `reason` and `metadata` change: the write moves no money, so it does not go through
/// the payment's actor, and the refund's status and amount stay. Needs a secret key.
///
/// Fails: `resource_missing` (404), `concurrent_update` (409).
///
/// Events: none.
#[utoipa::path(post, path = "/refunds/{refund_id}", tag = "refunds", request_body = UpdateRefundRequest,
    params(("refund_id" = String, Path)),
    responses((status = 200, body = Refund), (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn update_refund(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::RefundId>,
    ApiJson(req): ApiJson<UpdateRefundRequest>,
) -> Result<HttpResponse, ApiError> {
    check_text("reason", req.reason.as_ref(), 500)?;
    let md = check_metadata(req.metadata.as_ref())?;
    // Invariant: this write moves no money, so it need not pass through the payment's actor.
    let updated = commit::retrying(3, || async {
        let current = crate::owned::find_owned(&state.db, &id, &caller.scope())
            .await?
            .ok_or_else(|| ApiError::not_found("refund"))?;
        let now = state.clock.now();
        let written =
            store::update_details(&state.db, &current, req.reason.clone(), md.clone(), now);
        Ok::<_, ApiError>(commit::or_retry(written.await)?)
    })
    .await?;
    Ok(HttpResponse::Ok().json(Refund::render(&updated)?))
}

/// Filter refunds, newest first.
///
/// The refunds of the key's merchant and mode, within the key's shop or the `profile_id` asked
/// for, filtered by payment, status (`pending`, `manual_review`, `succeeded`, `failed`),
/// currency, amount and creation time. Read only; needs a secret key.
///
/// Fails: `invalid_currency` (400), `resource_missing` (400), `profile_mismatch` (403).
///
/// Events: none.
#[utoipa::path(post, path = "/refunds/list", tag = "refunds", request_body = ListRefundsRequest,
    responses((status = 200, body = List<Refund>)), security(("api_key" = [])))]
pub async fn list_refunds(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    ApiJson(mut req): ApiJson<ListRefundsRequest>,
) -> Result<HttpResponse, ApiError> {
    let page = Page::parse::<crate::ids::RefundId>(&req.page_query())?;
    if let Some(s) = &req.status {
        if !matches!(
            s.as_str(),
            "pending" | "manual_review" | "succeeded" | "failed"
        ) {
            return Err(ApiError::invalid_param(
                "status",
                format!("unknown status {s:?}"),
            ));
        }
    }
    if let Some(c) = &req.currency {
        req.currency = Some(parse_currency("currency", c)?);
    }
    let shop = caller.scope().list_shop(req.profile_id.as_deref())?;
    let list = store::list(
        &state.db,
        caller.merchant_id.as_str(),
        caller.test_mode(),
        shop.as_deref(),
        &req,
        &page,
    )
    .await?;
    Ok(HttpResponse::Ok().json(list.try_map(|r| Refund::render(&r))?))
}

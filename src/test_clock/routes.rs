//! `GET /sandbox/clock` and `POST /sandbox/clock/advance`: the calling merchant's test clock.

use actix_web::{web, HttpResponse};
use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use super::advance::{self, AdvanceError, Reading, MAX_SECONDS};
use crate::{
    auth::{self, SecretKey},
    error::ApiError,
    http::ApiJson,
    state::AppState,
};

crate::http::routes! {
    "/sandbox/clock" => { get: read_clock },
    "/sandbox/clock/advance" => { post: advance_clock },
}

/// A merchant's sandbox time.
#[derive(Debug, Serialize, ToSchema)]
pub struct TestClock {
    /// Now on the merchant's test clock (RFC 3339).
    pub now: DateTime<Utc>,
    /// How far it is ahead of the server's time.
    pub offset_seconds: i64,
    /// The scheduled jobs (renewals, retries, expiries, deadlines) the advance ran on its way
    /// itself (another instance may have run some of the others); 0 for a read.
    pub jobs_run: usize,
}

impl From<Reading> for TestClock {
    fn from(r: Reading) -> Self {
        Self {
            now: r.now,
            offset_seconds: r.offset_seconds,
            jobs_run: r.jobs_run,
        }
    }
}

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AdvanceRequest {
    /// How far to move the clock forward: 1 second to 10 years.
    pub seconds: i64,
}

/// Sandbox: the calling merchant's test clock.
///
/// Answers now on the merchant's test clock and how far it is ahead of the server's time
/// (`jobs_run` is 0). Test secret key of a sandbox deployment only: any other key gets 404.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/sandbox/clock", tag = "sandbox",
    responses((status = 200, body = TestClock), (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn read_clock(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
) -> Result<HttpResponse, ApiError> {
    auth::sandbox_only(&state, &caller)?;
    let reading = advance::read(&state.db, &state.clock, &caller.merchant_id).await?;
    Ok(HttpResponse::Ok().json(TestClock::from(reading)))
}

/// Sandbox: move the calling merchant's test clock forward.
///
/// Moves the merchant's clock forward 1 second to 10 years, never another merchant's. The
/// merchant's renewals, retries, expiries and deadlines that fall due on the way run in time
/// order, each at its own due time, before the answer, each announcing what it changes. Every
/// instance's requests run on the moved clock when this answers (after
/// `database.lookup_staleness_ms`).
///
/// An advance that would charge more than `sandbox.max_advance_charges` renewals is refused,
/// naming `seconds`, and moves nothing; of two advances at once, one is refused. Test secret
/// key of a sandbox deployment only: any other key gets 404.
///
/// Fails: `resource_missing` (404), `concurrent_update` (409).
///
/// Events: `subscription_active`, `subscription_cancelled`, `subscription_expired`, `subscription_past_due`, `invoice_paid`, `invoice_payment_failed`, `payment_succeeded`, `payment_failed`, `payment_expired`, `dispute_expired`, `dispute_won`, `dispute_lost`, `payout_expired`.
#[utoipa::path(post, path = "/sandbox/clock/advance", tag = "sandbox", request_body = AdvanceRequest,
    responses((status = 200, body = TestClock), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody), (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn advance_clock(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    ApiJson(req): ApiJson<AdvanceRequest>,
) -> Result<HttpResponse, ApiError> {
    auth::sandbox_only(&state, &caller)?;
    if !(1..=MAX_SECONDS).contains(&req.seconds) {
        return Err(ApiError::invalid_param(
            "seconds",
            format!(
                "seconds must be from 1 to {MAX_SECONDS} (ten years); the clock only moves forward"
            ),
        ));
    }
    let max = state.settings.sandbox.max_advance_charges;
    let advanced = advance::advance(
        &state.db,
        &state.scheduler,
        &state.clock,
        &caller.merchant_id,
        req.seconds,
        max,
    )
    .await;
    // Every instance's requests run on the moved clock when this answers (a failed advance
    // may have moved it part of the way).
    state.generation.changed().await;
    let reading = advanced.map_err(|e| match e {
        AdvanceError::TooMuchWork { renewals, max } => ApiError::invalid_param(
            "seconds",
            format!(
                "this advance would charge subscriptions {renewals} times or more; one advance makes at most sandbox.max_advance_charges ({max}): advance in smaller steps"
            ),
        ),
        AdvanceError::Commit(e) => e.into(),
    })?;
    Ok(HttpResponse::Ok().json(TestClock::from(reading)))
}

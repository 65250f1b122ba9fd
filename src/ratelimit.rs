//! Abuse limits at the edge, and a deadline for every request (503 `request_timeout`).
//!
//! Token buckets (429 with `Retry-After` when one is empty), chosen so that nobody can spend
//! another's allowance:
//!
//! - a **secret key** has its own bucket, and its merchant's bucket sits above all of its keys;
//! - a request with a **publishable key or none** (a buyer's browser, the hosted checkout) is
//!   counted against its client address and, when it names one, its payment's `client_secret`:
//!   flooding one payment or `/account` with the public key blocks no other buyer;
//! - a request whose key turns out not to be valid also costs its client address.
//!
//! Buckets live in this instance's memory, so with N instances a caller gets up to N times
//! the rate.

use std::{
    collections::HashMap,
    net::IpAddr,
    sync::{Arc, Mutex},
    time::Duration,
};

use actix_web::{
    body::{BoxBody, MessageBody},
    dev::{ServiceRequest, ServiceResponse},
    http::{header::HeaderName, StatusCode},
    middleware::Next,
    web, Error,
};
use chrono::{DateTime, Utc};
use dashmap::DashMap;
use sha2::{Digest, Sha256};

use crate::{
    auth::{self, KeyKind},
    error::{ApiError, ErrorType},
    settings::LimitSettings,
    state::AppState,
};

/// A token bucket: `rate` tokens a second, at most `burst`.
#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: DateTime<Utc>,
}

/// How fast a bucket refills and how much it holds.
#[derive(Debug, Clone, Copy)]
struct Rate {
    per_sec: f64,
    burst: f64,
}

impl Rate {
    fn new(per_sec: u32, burst: u32) -> Self {
        Self {
            per_sec: f64::from(per_sec),
            burst: f64::from(burst.max(1)),
        }
    }

    fn off(self) -> bool {
        self.per_sec <= 0.0
    }
}

/// Whose allowance a request spends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Holder {
    Key,
    Address,
    Payment,
    Merchant,
}

impl Holder {
    fn tag(self) -> &'static [u8] {
        match self {
            Holder::Key => b"key",
            Holder::Address => b"address",
            Holder::Payment => b"payment",
            Holder::Merchant => b"merchant",
        }
    }

    fn whose(self) -> &'static str {
        match self {
            Holder::Key => "this API key",
            Holder::Address => "this client address",
            Holder::Payment => "this payment",
            Holder::Merchant => "this merchant",
        }
    }
}

/// The buckets of every caller seen lately (app data).
pub struct RateLimiter {
    caller: Rate,
    merchant: Rate,
    address_header: Option<HeaderName>,
    buckets: DashMap<[u8; 32], Mutex<Bucket>>,
}

impl RateLimiter {
    /// `requests_per_second` 0 turns every limit off.
    pub fn new(limits: &LimitSettings) -> Arc<Self> {
        let caller = Rate::new(limits.requests_per_second, limits.burst);
        let merchant = if caller.off() {
            caller
        } else {
            Rate::new(limits.merchant_requests_per_second, limits.merchant_burst)
        };
        Arc::new(Self {
            caller,
            merchant,
            address_header: limits
                .client_address_header
                .as_deref()
                .and_then(|h| HeaderName::try_from(h).ok()),
            buckets: DashMap::new(),
        })
    }

    /// Takes one token from `holder`'s bucket `id`; when there is none, the seconds until
    /// there will be.
    fn take(&self, holder: Holder, id: &[u8], now: DateTime<Utc>) -> Result<(), u32> {
        let rate = match holder {
            Holder::Merchant => self.merchant,
            _ => self.caller,
        };
        if rate.off() {
            return Ok(());
        }
        let mut h = Sha256::new();
        h.update(holder.tag());
        h.update([0u8]);
        h.update(id);
        let entry = self.buckets.entry(h.finalize().into()).or_insert_with(|| {
            Mutex::new(Bucket {
                tokens: rate.burst,
                at: now,
            })
        });
        let mut b = entry.lock().unwrap_or_else(|e| e.into_inner());
        let elapsed = seconds(b.at, now);
        b.tokens = (b.tokens + elapsed * rate.per_sec).min(rate.burst);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Ok(())
        } else {
            Err(((1.0 - b.tokens) / rate.per_sec).ceil().max(1.0) as u32)
        }
    }

    /// Forgets buckets that have been full for a while (called now and then).
    fn sweep(&self, now: DateTime<Utc>) {
        let slowest = |r: Rate| (r.burst / r.per_sec.max(0.001)).max(1.0);
        let idle = slowest(self.caller).max(slowest(self.merchant)) * 2.0;
        self.buckets.retain(|_, b| {
            let b = b.get_mut().unwrap_or_else(|e| e.into_inner());
            seconds(b.at, now) < idle
        });
    }

    /// The client's address: the header a trusted proxy sets, else the TCP peer. IPv6 clients
    /// are counted by their /64, which is what one subscriber usually holds.
    fn address(&self, req: &ServiceRequest) -> Vec<u8> {
        let forwarded = self.address_header.as_ref().and_then(|name| {
            let value = req.headers().get(name)?.to_str().ok()?;
            value.trim().parse::<IpAddr>().ok()
        });
        let ip = forwarded.or_else(|| req.peer_addr().map(|a| a.ip()));
        match ip {
            Some(IpAddr::V4(v4)) => v4.octets().to_vec(),
            Some(IpAddr::V6(v6)) => v6.octets()[..8].to_vec(),
            None => Vec::new(),
        }
    }
}

/// Seconds from `then` to `now` (0 if the clock went back).
fn seconds(then: DateTime<Utc>, now: DateTime<Utc>) -> f64 {
    (now - then).num_milliseconds().max(0) as f64 / 1000.0
}

/// The `client_secret` a browser request names in its query, if any.
fn client_secret(req: &ServiceRequest) -> Option<String> {
    let query = web::Query::<HashMap<String, String>>::from_query(req.query_string()).ok()?;
    query.0.get("client_secret").cloned()
}

fn too_many(holder: Holder, wait: u32) -> ApiError {
    metrics::counter!("payd_http_rate_limited_total").increment(1);
    ApiError::rate_limited(
        "rate_limited",
        format!(
            "too many requests for {}; retry in {wait} s",
            holder.whose()
        ),
        wait,
    )
}

/// Spends the allowances a request is counted against (see the module notes).
async fn spend(
    req: &ServiceRequest,
    limiter: &RateLimiter,
    state: &AppState,
) -> Result<(), ApiError> {
    if limiter.caller.off() {
        return Ok(());
    }
    let now = state.clock.base();
    let take = |holder: Holder, id: &[u8]| {
        limiter
            .take(holder, id, now)
            .map_err(|w| too_many(holder, w))
    };
    let presented = req.headers().get("api-key").map(|v| v.as_bytes());
    let secret = presented
        .and_then(|k| std::str::from_utf8(k).ok())
        .and_then(auth::parse_key)
        .is_some_and(|(kind, _)| kind == KeyKind::Secret);
    if let (true, Some(key)) = (secret, presented) {
        take(Holder::Key, key)?;
        match auth::authenticate(req.request(), state).await {
            Ok(caller) => take(Holder::Merchant, caller.merchant_id.as_str().as_bytes())?,
            // Refused: the route answers 401/403, at the cost of whoever sent it.
            Err(_) => take(Holder::Address, &limiter.address(req))?,
        }
    } else {
        take(Holder::Address, &limiter.address(req))?;
        if let Some(secret) = client_secret(req) {
            take(Holder::Payment, secret.as_bytes())?;
        }
    }
    if limiter.buckets.len() > 10_000 {
        limiter.sweep(now);
    }
    Ok(())
}

/// Limits each caller's request rate.
pub async fn rate_limit(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let limiter = req.app_data::<web::Data<RateLimiter>>().cloned();
    let state = req.app_data::<web::Data<AppState>>().cloned();
    if let (Some(limiter), Some(state)) = (limiter, state) {
        if let Err(err) = spend(&req, &limiter, &state).await {
            return Ok(req.error_response(err));
        }
    }
    Ok(next.call(req).await?.map_into_boxed_body())
}

/// The request deadline (app data).
#[derive(Clone, Copy)]
pub struct RequestTimeout(pub Duration);

/// Answers 503 `request_timeout` when a request outlives its deadline. A change already
/// under way still completes; an `Idempotency-Key` retry then finds its answer.
pub async fn deadline(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    let Some(RequestTimeout(limit)) = req.app_data::<RequestTimeout>().copied() else {
        return Ok(next.call(req).await?.map_into_boxed_body());
    };
    // No clone of the request may be held here (routing needs it unshared), so a timeout is
    // answered as an error that carries its own request id.
    match tokio::time::timeout(limit, next.call(req)).await {
        Ok(res) => Ok(res?.map_into_boxed_body()),
        Err(_) => {
            let mut err = ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                ErrorType::Unavailable,
                "request_timeout",
                format!("the request took longer than {} s", limit.as_secs()),
            );
            err.retry_after = Some(1);
            err.request_id = Some(crate::error::current_request_id());
            Err(err.into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(rate: u32, burst: u32, merchant: u32) -> LimitSettings {
        LimitSettings {
            requests_per_second: rate,
            burst,
            merchant_requests_per_second: merchant,
            merchant_burst: merchant,
            client_address_header: None,
            max_file_bytes: 1,
            max_api_keys_per_merchant: 1,
            max_shops_per_merchant: 1,
            max_files_per_merchant: 1,
            max_file_bytes_per_merchant: 1,
            max_amount: 1,
            max_image_bytes: 1,
            max_products_per_shop: 1,
        }
    }

    #[test]
    fn buckets_refill_at_the_rate() {
        let limiter = RateLimiter::new(&limits(2, 3, 5));
        let t0 = crate::clock::wall_now();
        for _ in 0..3 {
            assert!(limiter.take(Holder::Key, b"k", t0).is_ok());
        }
        assert_eq!(limiter.take(Holder::Key, b"k", t0), Err(1));
        assert!(
            limiter.take(Holder::Key, b"other", t0).is_ok(),
            "keys have their own buckets"
        );
        assert!(
            limiter.take(Holder::Address, b"k", t0).is_ok(),
            "holders of the same name have their own buckets"
        );
        let half = t0 + chrono::Duration::milliseconds(500);
        assert!(limiter.take(Holder::Key, b"k", half).is_ok());
        assert!(limiter.take(Holder::Key, b"k", half).is_err());
        for _ in 0..5 {
            assert!(limiter.take(Holder::Merchant, b"m", t0).is_ok());
        }
        assert!(
            limiter.take(Holder::Merchant, b"m", t0).is_err(),
            "merchants have their own rate"
        );
        let off = RateLimiter::new(&limits(0, 0, 5));
        for _ in 0..10 {
            assert!(
                off.take(Holder::Merchant, b"m", t0).is_ok(),
                "0 turns every limit off"
            );
        }
    }
}

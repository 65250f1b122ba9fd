//! Abuse limits at the edge: a token bucket per API key (429 with `Retry-After` when empty)
//! and a deadline for every request (503 `request_timeout`). Buckets live in this instance's
//! memory, so with N instances a key gets up to N times the rate.

use std::{
    sync::{Arc, Mutex},
    time::{Duration, Instant},
};

use actix_web::{
    body::{BoxBody, MessageBody},
    dev::{ServiceRequest, ServiceResponse},
    http::StatusCode,
    middleware::Next,
    web, Error,
};
use dashmap::DashMap;
use sha2::{Digest, Sha256};

use crate::error::{ApiError, ErrorType};

/// A token bucket: `rate` tokens a second, at most `burst`.
#[derive(Debug)]
struct Bucket {
    tokens: f64,
    at: Instant,
}

/// The buckets of every key seen lately (app data).
pub struct RateLimiter {
    rate: f64,
    burst: f64,
    buckets: DashMap<[u8; 32], Mutex<Bucket>>,
}

impl RateLimiter {
    /// `rate` 0 turns limiting off.
    pub fn new(rate: u32, burst: u32) -> Arc<Self> {
        Arc::new(Self {
            rate: f64::from(rate),
            burst: f64::from(burst.max(1)),
            buckets: DashMap::new(),
        })
    }

    /// Takes one token for `key`; when there is none, the seconds until there will be.
    pub fn take(&self, key: &[u8], now: Instant) -> Result<(), u32> {
        if self.rate <= 0.0 {
            return Ok(());
        }
        let id: [u8; 32] = Sha256::digest(key).into();
        let entry = self.buckets.entry(id).or_insert_with(|| {
            Mutex::new(Bucket {
                tokens: self.burst,
                at: now,
            })
        });
        let mut b = entry.lock().unwrap_or_else(|e| e.into_inner());
        let elapsed = now.saturating_duration_since(b.at).as_secs_f64();
        b.tokens = (b.tokens + elapsed * self.rate).min(self.burst);
        b.at = now;
        if b.tokens >= 1.0 {
            b.tokens -= 1.0;
            Ok(())
        } else {
            Err(((1.0 - b.tokens) / self.rate).ceil().max(1.0) as u32)
        }
    }

    /// Forgets buckets that have been full for a while (called now and then).
    pub fn sweep(&self, now: Instant) {
        let idle = Duration::from_secs_f64((self.burst / self.rate.max(0.001)).max(1.0) * 2.0);
        self.buckets.retain(|_, b| {
            let b = b.get_mut().unwrap_or_else(|e| e.into_inner());
            now.saturating_duration_since(b.at) < idle
        });
    }
}

/// The request deadline (app data).
#[derive(Clone, Copy)]
pub struct RequestTimeout(pub Duration);

/// Limits each API key's request rate.
pub async fn rate_limit(
    req: ServiceRequest,
    next: Next<impl MessageBody + 'static>,
) -> Result<ServiceResponse<BoxBody>, Error> {
    if let (Some(limiter), Some(key)) = (
        req.app_data::<web::Data<RateLimiter>>().cloned(),
        req.headers().get("api-key").map(|v| v.as_bytes().to_vec()),
    ) {
        let now = Instant::now();
        if let Err(wait) = limiter.take(&key, now) {
            metrics::counter!("payd_http_rate_limited_total").increment(1);
            let mut err = ApiError::new(
                StatusCode::TOO_MANY_REQUESTS,
                ErrorType::RateLimited,
                "rate_limited",
                format!("too many requests for this API key; retry in {wait} s"),
            );
            err.retry_after = Some(wait);
            return Ok(req.error_response(err));
        }
        if limiter.buckets.len() > 10_000 {
            limiter.sweep(now);
        }
    }
    Ok(next.call(req).await?.map_into_boxed_body())
}

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

    #[test]
    fn buckets_refill_at_the_rate() {
        let limiter = RateLimiter::new(2, 3);
        let t0 = Instant::now();
        for _ in 0..3 {
            assert!(limiter.take(b"k", t0).is_ok());
        }
        assert_eq!(limiter.take(b"k", t0), Err(1));
        assert!(
            limiter.take(b"other", t0).is_ok(),
            "keys have their own buckets"
        );
        assert!(limiter.take(b"k", t0 + Duration::from_millis(500)).is_ok());
        assert!(limiter.take(b"k", t0 + Duration::from_millis(500)).is_err());
        assert!(
            RateLimiter::new(0, 0).take(b"k", t0).is_ok(),
            "0 turns it off"
        );
    }
}

//! A shop's webhook endpoint as the API shows it: its settings and its health.

use chrono::{DateTime, Utc};
use payd_entity::webhook_endpoint;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::error::ApiError;

#[derive(Debug, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PutEndpointRequest {
    /// http(s) URL events are posted to.
    pub url: String,
    /// `false` pauses it (its deliveries wait); `true` resumes it, also after payd disabled it.
    #[serde(default)]
    pub enabled: Option<bool>,
    /// The most requests a second payd sends it (1–1000); `null` (or absent on creation): no
    /// limit. Absent on a change: as it was.
    #[serde(default, deserialize_with = "present")]
    #[schema(value_type = Option<i32>, minimum = 1, maximum = 1000)]
    pub max_per_second: Option<Option<i32>>,
}

impl PutEndpointRequest {
    /// The rate asked for, checked: 1 to 1000 requests a second, or `null` for no limit.
    pub fn max_per_second(&self) -> Result<Option<Option<i32>>, ApiError> {
        match self.max_per_second {
            Some(Some(rate)) if !(1..=1000).contains(&rate) => Err(ApiError::invalid_param(
                "max_per_second",
                "the rate is 1 to 1000 requests a second, or null for no limit",
            )),
            rate => Ok(rate),
        }
    }
}

/// Tells an absent field (`None`) from an explicit `null` (`Some(None)`).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<Option<i32>>, D::Error> {
    Option::<i32>::deserialize(d).map(Some)
}

/// How the endpoint has answered lately.
#[derive(Debug, Serialize, ToSchema)]
pub struct EndpointHealth {
    /// `healthy`, `failing` (no success since `failing_since`) or `disabled` (see
    /// `disabled_reason`).
    pub status: &'static str,
    /// Attempts failed since the last success.
    pub consecutive_failures: i32,
    pub failing_since: Option<DateTime<Utc>>,
    pub last_success_at: Option<DateTime<Utc>>,
    /// `failing`: payd disabled it after `webhooks.disable_after_secs` without a success;
    /// `merchant`: paused with `enabled: false`.
    pub disabled_reason: Option<String>,
}

impl EndpointHealth {
    pub fn of(m: &webhook_endpoint::Model) -> Self {
        let status = if !m.enabled {
            "disabled"
        } else if m.failing_since.is_some() {
            "failing"
        } else {
            "healthy"
        };
        Self {
            status,
            consecutive_failures: m.consecutive_failures,
            failing_since: m.failing_since,
            last_success_at: m.last_success_at,
            disabled_reason: (!m.enabled).then(|| {
                m.disabled_reason
                    .unwrap_or(DisabledReason::Merchant)
                    .to_string()
            }),
        }
    }
}

pub use payd_model::webhooks::DisabledReason;

/// A shop's endpoint. `secret` appears only when it is created or rotated.
#[derive(Debug, Serialize, ToSchema)]
pub struct Endpoint {
    pub endpoint_id: String,
    pub profile_id: String,
    pub url: String,
    pub enabled: bool,
    /// The most requests a second payd sends it (all instances together); `null`: no limit.
    pub max_per_second: Option<i32>,
    pub health: EndpointHealth,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
    /// Until when the previous secret still signs, after a rotation.
    pub previous_secret_expires_at: Option<DateTime<Utc>>,
    pub created: DateTime<Utc>,
    pub updated: DateTime<Utc>,
}

impl Endpoint {
    pub fn of(m: &webhook_endpoint::Model, show_secret: bool) -> Self {
        Self {
            endpoint_id: m.id.clone(),
            profile_id: m.profile_id.to_string(),
            url: m.url.clone(),
            enabled: m.enabled,
            max_per_second: m.max_per_second,
            health: EndpointHealth::of(m),
            secret: show_secret.then(|| m.secret.clone()),
            previous_secret_expires_at: m.previous_secret_expires_at,
            created: m.created_at,
            updated: m.updated_at,
        }
    }
}

//! The events' requests and answers, and a replay as parsed from its request.

use chrono::{DateTime, Utc};
use payd_entity::delivery_attempt;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::{error::ApiError, ids::EventId};

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
    pub request_headers: std::collections::BTreeMap<String, String>,
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
            request_headers: a.request_headers.0,
            attempt_id: a.id,
            delivery_id: a.delivery_id,
            number: a.number,
            trigger: a.trigger.to_string(),
            response_status: a.response_status,
            response_body: a.response_body,
            error_kind: a.error_kind.map(|k| k.to_string()),
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

/// A replay as its request asks for it, checked: a page of at most `limit` events created in
/// `[since, until)`, of the types named (all if none), after `starting_after`.
#[derive(Debug)]
pub struct Replay {
    pub since: DateTime<Utc>,
    pub until: Option<DateTime<Utc>>,
    pub event_types: Vec<String>,
    pub only_failed: bool,
    pub profile_id: Option<String>,
    pub limit: u64,
    pub starting_after: Option<EventId>,
}

impl ReplayRequest {
    /// The replay, with at most `max` events per call (`webhooks.replay_max`).
    pub fn parse(self, max: u64) -> Result<Replay, ApiError> {
        let limit = self.limit.unwrap_or(max);
        if !(1..=max).contains(&limit) {
            return Err(ApiError::invalid_param(
                "limit",
                format!("a replay queues 1 to {max} events per call; continue with starting_after"),
            ));
        }
        if self.until.is_some_and(|until| until <= self.since) {
            return Err(ApiError::invalid_param(
                "until",
                "until must be after since",
            ));
        }
        let event_types = self.event_types.unwrap_or_default();
        if event_types.len() > 50 || event_types.iter().any(|t| !is_event_type(t)) {
            return Err(ApiError::invalid_param(
                "event_types",
                "at most 50 event types, each like payment_succeeded",
            ));
        }
        let starting_after = match &self.starting_after {
            None => None,
            Some(after) => Some(
                EventId::parse(after)
                    .ok_or_else(|| ApiError::invalid_param("starting_after", "not an event id"))?,
            ),
        };
        Ok(Replay {
            since: self.since,
            until: self.until,
            event_types,
            only_failed: self.only_failed,
            profile_id: self.profile_id,
            limit,
            starting_after,
        })
    }
}

/// An event type's shape: `payment_succeeded`.
fn is_event_type(t: &str) -> bool {
    (1..=64).contains(&t.len()) && t.bytes().all(|b| b.is_ascii_lowercase() || b == b'_')
}

//! A shop's endpoint as a PUT sets it, and rows of webhook deliveries beyond the outbox's: a
//! manual retry's (an event recorded before its shop had an endpoint); what pausing or
//! resuming an endpoint does to its deliveries; and the turns of a rate-limited endpoint's
//! requests.

use chrono::{DateTime, Duration, Utc};
use payd_entity::{delivery, event, webhook_endpoint};
use payd_model::webhooks::DeliveryStatus;
use sea_orm::{
    sea_query::{Expr, LockType, Query, UpdateStatement},
    ActiveValue::Set,
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QuerySelect, QueryTrait,
};

use super::{api::DisabledReason, signer::new_secret};
use crate::commit::{self, Change, CommitError, Db, Write};
use crate::{
    conflict::Conflict,
    error::ApiError,
    ids::new_id,
    outbox::{delivery_row, ENDPOINT_DISABLED},
    sealed::Keyring,
};

/// What a PUT of a shop's endpoint sets (`None`: keep what it has).
pub struct EndpointPut {
    pub merchant_id: crate::ids::MerchantId,
    pub profile_id: crate::ids::ProfileId,
    pub url: String,
    pub enabled: Option<bool>,
    pub max_per_second: Option<Option<i32>>,
    /// The mode of the key that puts it: each mode has its own endpoint.
    pub test_mode: bool,
}

/// The endpoint after `put`, and the change that writes only what the request sets: the
/// health columns belong to the attempts recorded meanwhile, and `enabled` to payd's
/// disabling unless the request names it. Enabled again (also after payd disabled it), its
/// health starts afresh; its deliveries follow it either way.
fn updated_endpoint(
    existing: &webhook_endpoint::Model,
    put: EndpointPut,
    now: DateTime<Utc>,
) -> (webhook_endpoint::Model, Change) {
    let enabled = put.enabled.unwrap_or(existing.enabled);
    let mut m = webhook_endpoint::Model {
        url: put.url,
        enabled,
        max_per_second: put.max_per_second.unwrap_or(existing.max_per_second),
        test_mode: put.test_mode,
        updated_at: now,
        ..existing.clone()
    };
    let mut set = webhook_endpoint::ActiveModel {
        url: Set(m.url.clone()),
        max_per_second: Set(m.max_per_second),
        test_mode: Set(m.test_mode),
        updated_at: Set(now),
        ..Default::default()
    };
    if enabled && !existing.enabled {
        m.disabled_reason = None;
        m.consecutive_failures = 0;
        m.failing_since = None;
        set.enabled = Set(true);
        set.disabled_reason = Set(None);
        set.consecutive_failures = Set(0);
        set.failing_since = Set(None);
    } else if !enabled && existing.enabled {
        m.disabled_reason = Some(DisabledReason::Merchant);
        set.enabled = Set(false);
        set.disabled_reason = Set(m.disabled_reason);
    }
    let mut change = Change::at(now).write(Write::Update(
        webhook_endpoint::Entity::update_many()
            .set(set)
            .filter(webhook_endpoint::Column::Id.eq(m.id.as_str()))
            .into_query(),
    ));
    if m.enabled != existing.enabled {
        change = change.write(Write::Update(follow_endpoint(&m.id, m.enabled)));
    }
    (m, change)
}

/// The endpoint with a new signing secret (`sealed`), the old one signing beside it for 24
/// hours, and the write of just those columns.
pub fn rotated(
    existing: webhook_endpoint::Model,
    sealed: String,
    now: DateTime<Utc>,
) -> (webhook_endpoint::Model, Write) {
    let m = webhook_endpoint::Model {
        previous_secret: Some(existing.secret.clone()),
        previous_secret_expires_at: Some(now + Duration::hours(24)),
        secret: sealed,
        updated_at: now,
        ..existing
    };
    let rotate = webhook_endpoint::Entity::update_many()
        .set(webhook_endpoint::ActiveModel {
            secret: Set(m.secret.clone()),
            previous_secret: Set(m.previous_secret.clone()),
            previous_secret_expires_at: Set(m.previous_secret_expires_at),
            updated_at: Set(now),
            ..Default::default()
        })
        .filter(webhook_endpoint::Column::Id.eq(m.id.as_str()))
        .into_query();
    (m, Write::Update(rotate))
}

/// What a PUT of the endpoint did: made it, or enabled it again (what waited is due).
pub struct EndpointPutDone {
    pub created: bool,
    pub resumed: bool,
}

/// Sets the shop's endpoint as `put` says, with the audit entry `url_changed` gives for a new
/// URL; the endpoint is answered with its secret as it is (stored sealed) when it is new.
pub async fn put_endpoint(
    db: &Db,
    keyring: &Keyring,
    put: EndpointPut,
    url_changed: impl Fn(&str) -> Write,
    now: DateTime<Utc>,
) -> Result<(webhook_endpoint::Model, EndpointPutDone), CommitError> {
    let existing = webhook_endpoint::Entity::find()
        .filter(webhook_endpoint::Column::ProfileId.eq(put.profile_id.as_str()))
        .filter(webhook_endpoint::Column::TestMode.eq(put.test_mode))
        .one(db)
        .await?;
    let Some(existing) = existing else {
        let m = new_endpoint(put, now);
        let stored = webhook_endpoint::Model {
            secret: keyring.seal(&m.secret),
            ..m.clone()
        };
        let change = Change::at(now)
            .write(commit::insert(stored))
            .write(url_changed(&m.url));
        commit::commit(db, change).await?;
        let done = EndpointPutDone {
            created: true,
            resumed: false,
        };
        return Ok((m, done));
    };
    let (m, mut change) = updated_endpoint(&existing, put, now);
    if m.url != existing.url {
        change = change.write(url_changed(&m.url));
    }
    commit::commit(db, change).await?;
    let done = EndpointPutDone {
        created: false,
        resumed: m.enabled && !existing.enabled,
    };
    Ok((m, done))
}

/// A shop's first endpoint, with a new signing secret (as it is: sealed before it is stored).
fn new_endpoint(put: EndpointPut, now: DateTime<Utc>) -> webhook_endpoint::Model {
    webhook_endpoint::Model {
        id: new_id("whep"),
        merchant_id: put.merchant_id,
        profile_id: put.profile_id,
        url: put.url,
        secret: new_secret(),
        previous_secret: None,
        previous_secret_expires_at: None,
        enabled: put.enabled.unwrap_or(true),
        created_at: now,
        updated_at: now,
        consecutive_failures: 0,
        failing_since: None,
        last_success_at: None,
        disabled_reason: (put.enabled == Some(false)).then_some(DisabledReason::Merchant),
        max_per_second: put.max_per_second.flatten(),
        next_send_at: None,
        test_mode: put.test_mode,
    }
}

/// An endpoint's deliveries follow it: pausing parks those still pending (their attempts and
/// next attempt as they stand; a lease held by a sender stays with it), resuming makes the
/// parked ones pending again, due when their schedule said. Written in the endpoint's commit.
pub fn follow_endpoint(endpoint_id: &str, enabled: bool) -> UpdateStatement {
    let (from, to) = if enabled {
        (DeliveryStatus::Paused, DeliveryStatus::Pending)
    } else {
        (DeliveryStatus::Pending, DeliveryStatus::Paused)
    };
    delivery::Entity::update_many()
        .col_expr(delivery::Column::Status, Expr::value(to))
        .filter(delivery::Column::EndpointId.eq(endpoint_id))
        .filter(delivery::Column::Status.eq(from))
        .into_query()
}

/// Takes the next turn to send to a rate-limited endpoint, `gap` after the turn before it
/// (or now, if that is past): a compare-and-set on `next_send_at`, so instances sending to
/// one endpoint take turns and together keep to its rate. Wall time: a rate is real time,
/// whatever a sandbox clock says. Returns when the request may start; `None` if the turn
/// could not be taken in a few tries (the caller's own spacing still holds).
pub async fn take_turn(
    db: &impl ConnectionTrait,
    endpoint_id: &str,
    gap: Duration,
) -> Result<Option<DateTime<Utc>>, DbErr> {
    for _ in 0..8 {
        let now = crate::clock::wall_now();
        let Some(stored) = webhook_endpoint::Entity::find_by_id(endpoint_id)
            .select_only()
            .column(webhook_endpoint::Column::NextSendAt)
            .into_tuple::<Option<DateTime<Utc>>>()
            .one(db)
            .await?
        else {
            return Ok(None);
        };
        let turn = stored.map_or(now, |at| at.max(now));
        let held = match stored {
            Some(at) => webhook_endpoint::Column::NextSendAt.eq(at),
            None => webhook_endpoint::Column::NextSendAt.is_null(),
        };
        let taken = webhook_endpoint::Entity::update_many()
            .col_expr(
                webhook_endpoint::Column::NextSendAt,
                Expr::value(Some(turn + gap)),
            )
            .filter(webhook_endpoint::Column::Id.eq(endpoint_id))
            .filter(held)
            .exec(db)
            .await?;
        if taken.rows_affected == 1 {
            return Ok(Some(turn));
        }
    }
    Ok(None)
}

/// A manual retry of one delivery: one attempt to its endpoint, sent by the merchant's
/// delivery actor within its in-flight bound, recorded as a `manual` attempt.
#[derive(Debug, Clone)]
pub struct ManualRetry {
    pub delivery: delivery::Model,
    pub event: event::Model,
    pub endpoint: webhook_endpoint::Model,
}

/// The manual retries of an event: one per delivery to the shop's endpoint of the event's mode
/// (an event recorded before the shop had one gets a delivery to the one it has now). 409 when the shop
/// has no endpoint, or only a paused one, or the event is one never sent; 410 when retention
/// purged its payload.
pub async fn manual_retries(
    db: &Db,
    event: &event::Model,
    now: DateTime<Utc>,
) -> Result<Vec<ManualRetry>, ApiError> {
    if event.purged_at.is_some() {
        return Err(ApiError::gone(
            "event_payload_purged",
            "the event's payload is past webhooks.payload_retention_secs and was purged; the event stays listed",
        ));
    }
    if event.event_type == ENDPOINT_DISABLED {
        return Err(ApiError::conflict(
            "event_not_sent",
            "webhook_endpoint_disabled is listed for the merchant and never sent to the endpoint it is about",
        ));
    }
    let endpoints = webhook_endpoint::Entity::find()
        .filter(
            webhook_endpoint::Column::ProfileId.eq(event.profile_id.clone().unwrap_or_default()),
        )
        .filter(webhook_endpoint::Column::TestMode.eq(event.test_mode))
        .all(db)
        .await?;
    if endpoints.is_empty() {
        return Err(ApiError::conflict(
            "no_endpoint",
            "the shop has no webhook endpoint",
        ));
    }
    let endpoints: Vec<_> = endpoints.into_iter().filter(|e| e.enabled).collect();
    if endpoints.is_empty() {
        return Err(ApiError::conflict(
            "endpoint_disabled",
            "the shop's webhook endpoint is paused; enable it to send events",
        ));
    }
    let of_event =
        || delivery::Entity::find().filter(delivery::Column::EventId.eq(event.id.as_str()));
    let mut deliveries = of_event().all(db).await?;
    if deliveries.is_empty() {
        // Invariant: an event has one delivery per endpoint, even when retries race (on two
        // instances): the event's row is locked first, and the deliveries are added only if it
        // still has none; the loser reads the winner's.
        let lock_event = Query::select()
            .column(event::Column::Id)
            .from(event::Entity)
            .and_where(event::Column::Id.eq(event.id.as_str()))
            .lock(LockType::Update)
            .to_owned();
        let mut new = Change::at(now)
            .write(Write::Require {
                query: lock_event,
                exists: true,
                refusal: Conflict::EventMissing,
            })
            .write(Write::Require {
                query: of_event()
                    .select_only()
                    .column(delivery::Column::Id)
                    .into_query(),
                exists: false,
                refusal: Conflict::DeliveriesMade,
            });
        for endpoint in &endpoints {
            let d = delivery_row(event, &endpoint.id, now);
            new = new.write(commit::insert(d));
        }
        match commit::commit(db, new).await {
            Ok(_) | Err(CommitError::Refused(Conflict::DeliveriesMade)) => {}
            Err(e) => return Err(e.into()),
        }
        deliveries = of_event().all(db).await?;
    }
    Ok(deliveries
        .into_iter()
        .filter_map(|delivery| {
            let endpoint = endpoints.iter().find(|e| e.id == delivery.endpoint_id)?;
            Some(ManualRetry {
                delivery,
                event: event.clone(),
                endpoint: endpoint.clone(),
            })
        })
        .collect())
}

//! An endpoint's health: its failure streak, brought up to date in the commit that records
//! attempts, and the rule that disables an endpoint that has failed without one success for
//! `webhooks.disable_after_secs` — checked with each failed attempt and by the retention
//! sweep, so an endpoint whose deliveries only wait for their next retry is disabled on time.

use std::collections::BTreeMap;

use chrono::{DateTime, Duration, Utc};
use payd_entity::webhook_endpoint;
use sea_orm::{
    sea_query::{Expr, ExprTrait, Func},
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, PaginatorTrait, QueryFilter, QueryTrait,
};

use super::{
    api::{DisabledReason, Endpoint},
    store,
};
use crate::commit::{self, Change, CommitError, Db, Event, Write};

/// An endpoint failing for longer than this counts in `payd_webhook_endpoints_failing`.
const FAILING_GAUGE_AFTER: i64 = 3600;

/// One recorded attempt, as the endpoint's health counts it.
#[derive(Debug, Clone, Copy)]
pub struct Answered<'a> {
    pub endpoint_id: &'a str,
    pub at: DateTime<Utc>,
    pub delivered: bool,
}

/// Where attempts leave each endpoint's streak.
#[derive(Debug, Default, PartialEq, Eq)]
struct Streak {
    last_success: Option<DateTime<Utc>>,
    /// Failures after the last success (all of them when none succeeded).
    failures: i32,
    first_failure: Option<DateTime<Utc>>,
}

fn streaks<'a>(answered: &[Answered<'a>]) -> BTreeMap<&'a str, Streak> {
    let mut in_order = answered.to_vec();
    in_order.sort_by_key(|a| a.at);
    let mut streaks: BTreeMap<&str, Streak> = BTreeMap::new();
    for a in in_order {
        let s = streaks.entry(a.endpoint_id).or_default();
        if a.delivered {
            *s = Streak {
                last_success: Some(a.at),
                ..Streak::default()
            };
        } else {
            s.failures += 1;
            s.first_failure.get_or_insert(a.at);
        }
    }
    streaks
}

/// The writes that bring each endpoint's streak up to date with these attempts, for the
/// commit that records them. A success resets the streak; failures add to it (an addition, so
/// two instances recording at once both count), and the first failure after a success starts
/// `failing_since`.
pub fn streak_writes(answered: &[Answered<'_>]) -> Vec<Write> {
    streaks(answered)
        .into_iter()
        .map(|(id, s)| {
            let update =
                webhook_endpoint::Entity::update_many().filter(webhook_endpoint::Column::Id.eq(id));
            let update = match s.last_success {
                Some(at) => update
                    .col_expr(
                        webhook_endpoint::Column::ConsecutiveFailures,
                        Expr::value(s.failures),
                    )
                    .col_expr(
                        webhook_endpoint::Column::FailingSince,
                        Expr::value(s.first_failure),
                    )
                    .col_expr(
                        webhook_endpoint::Column::LastSuccessAt,
                        Expr::value(Some(at)),
                    ),
                None => update
                    .col_expr(
                        webhook_endpoint::Column::ConsecutiveFailures,
                        Expr::col(webhook_endpoint::Column::ConsecutiveFailures).add(s.failures),
                    )
                    .col_expr(
                        webhook_endpoint::Column::FailingSince,
                        Func::coalesce([
                            Expr::col(webhook_endpoint::Column::FailingSince),
                            Expr::value(s.first_failure),
                        ])
                        .into(),
                    ),
            };
            Write::Update(update.into_query())
        })
        .collect()
}

/// A healthy endpoint's `last_success_at` is written again only once it is this old: its
/// successes cost no statement in between (the time is exact to within this).
const SUCCESS_REFRESH_SECS: i64 = 60;

/// Whether these attempts (all to `endpoint`) leave its stored health as it is, judged on a
/// copy read earlier (the claim's): every one delivered, the copy healthy, and its last
/// success recent. Then their commit skips the endpoint's row — the common case costs no
/// statement. A copy stale about a failure recorded since is set right by the next failure
/// or success written.
pub fn unchanged(endpoint: &webhook_endpoint::Model, answered: &[Answered<'_>]) -> bool {
    let latest = answered.iter().map(|a| a.at).max();
    answered.iter().all(|a| a.delivered)
        && endpoint.consecutive_failures == 0
        && endpoint.failing_since.is_none()
        && match (endpoint.last_success_at, latest) {
            (Some(last), Some(latest)) => latest - last < Duration::seconds(SUCCESS_REFRESH_SECS),
            _ => false,
        }
}

/// The endpoints these attempts leave failing (a failure after their last success here): the
/// ones whose disabling is checked in the same commit.
pub fn left_failing<'a>(answered: &[Answered<'a>]) -> Vec<&'a str> {
    streaks(answered)
        .into_iter()
        .filter(|(_, s)| s.failures > 0)
        .map(|(id, _)| id)
        .collect()
}

/// Disables `endpoint` if it is enabled and has failed without a success since
/// `now - disable_after` (as stored when the commit runs): `enabled: false`,
/// `disabled_reason: failing`, its pending deliveries paused, and `webhook_endpoint_disabled`
/// recorded, in one commit; then a warning is logged. `false` when it was not (or no longer)
/// such an endpoint: then nothing was written.
pub async fn disable_if_failing(
    db: &Db,
    endpoint: &webhook_endpoint::Model,
    disable_after: Duration,
    now: DateTime<Utc>,
) -> Result<bool, CommitError> {
    let disable = webhook_endpoint::Entity::update_many()
        .col_expr(webhook_endpoint::Column::Enabled, Expr::value(false))
        .col_expr(
            webhook_endpoint::Column::DisabledReason,
            Expr::value(DisabledReason::Failing),
        )
        .col_expr(webhook_endpoint::Column::UpdatedAt, Expr::value(now))
        .filter(webhook_endpoint::Column::Id.eq(endpoint.id.as_str()))
        .filter(webhook_endpoint::Column::Enabled.eq(true))
        .filter(webhook_endpoint::Column::FailingSince.lte(now - disable_after))
        .into_query();
    // The event shows the endpoint as the commit leaves it (its streak as last read).
    let disabled = webhook_endpoint::Model {
        enabled: false,
        disabled_reason: Some(DisabledReason::Failing),
        updated_at: now,
        ..endpoint.clone()
    };
    let event = Event {
        merchant_id: endpoint.merchant_id.clone(),
        profile_id: Some(endpoint.profile_id.clone()),
        test_mode: endpoint.test_mode,
        event_type: crate::outbox::ENDPOINT_DISABLED.to_owned(),
        object_id: endpoint.id.clone(),
        content_type: "webhook_endpoint_details",
        object: serde_json::to_string(&Endpoint::of(&disabled, false)).unwrap_or_default(),
    };
    let change = Change::at(now)
        .write(Write::Cas(disable))
        .write(Write::Update(store::follow_endpoint(&endpoint.id, false)))
        .event(event);
    match commit::or_retry(commit::commit(db, change).await)? {
        Some(_) => {
            warn_disabled(endpoint);
            Ok(true)
        }
        None => Ok(false),
    }
}

/// Whether the stored endpoint may be due for disabling, judged on a copy read earlier (the
/// claim's): failing since before `now - disable_after`. A copy that says no is right unless
/// a failure older than the copy was recorded after it, which a later check or the sweep sees.
pub fn may_be_due(
    endpoint: &webhook_endpoint::Model,
    disable_after: Duration,
    now: DateTime<Utc>,
) -> bool {
    endpoint.enabled
        && endpoint
            .failing_since
            .is_some_and(|since| since <= now - disable_after)
}

/// The sweep: disables every enabled endpoint failing since before `now - disable_after`
/// (deliveries waiting hours for their next retry make no attempt that would check it).
/// Each one it disables is logged there.
pub async fn sweep(db: &Db, disable_after: Duration, now: DateTime<Utc>) -> Result<(), DbErr> {
    let due = webhook_endpoint::Entity::find()
        .filter(webhook_endpoint::Column::Enabled.eq(true))
        .filter(webhook_endpoint::Column::FailingSince.lte(now - disable_after))
        .all(db)
        .await?;
    for endpoint in &due {
        if let Err(e) = disable_if_failing(db, endpoint, disable_after, now).await {
            tracing::warn!(error = %e, endpoint = %endpoint.id, "could not disable a failing endpoint");
        }
    }
    Ok(())
}

/// The warning an operator sees when payd disables an endpoint.
fn warn_disabled(endpoint: &webhook_endpoint::Model) {
    tracing::warn!(
        endpoint = %endpoint.id,
        merchant = %endpoint.merchant_id,
        profile = %endpoint.profile_id,
        failing_since = ?endpoint.failing_since,
        "a webhook endpoint failing without a success was disabled; its deliveries wait until it is enabled again"
    );
}

/// `payd_webhook_endpoints_disabled` (disabled by payd for failing, still disabled) and
/// `payd_webhook_endpoints_failing` (enabled, failing for more than an hour).
pub async fn measure(db: &impl ConnectionTrait, now: DateTime<Utc>) -> Result<(), DbErr> {
    let disabled = webhook_endpoint::Entity::find()
        .filter(webhook_endpoint::Column::Enabled.eq(false))
        .filter(webhook_endpoint::Column::DisabledReason.eq(DisabledReason::Failing))
        .count(db)
        .await?;
    let failing = webhook_endpoint::Entity::find()
        .filter(webhook_endpoint::Column::Enabled.eq(true))
        .filter(
            webhook_endpoint::Column::FailingSince
                .lte(now - Duration::seconds(FAILING_GAUGE_AFTER)),
        )
        .count(db)
        .await?;
    metrics::gauge!("payd_webhook_endpoints_disabled").set(disabled as f64);
    metrics::gauge!("payd_webhook_endpoints_failing").set(failing as f64);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_success_resets_the_streak_and_failures_after_it_start_another() {
        let t = |s: i64| DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap();
        let answered = [
            Answered {
                endpoint_id: "a",
                at: t(3),
                delivered: false,
            },
            Answered {
                endpoint_id: "a",
                at: t(1),
                delivered: false,
            },
            Answered {
                endpoint_id: "a",
                at: t(2),
                delivered: true,
            },
            Answered {
                endpoint_id: "b",
                at: t(5),
                delivered: true,
            },
        ];
        let s = streaks(&answered);
        assert_eq!(
            s["a"],
            Streak {
                last_success: Some(t(2)),
                failures: 1,
                first_failure: Some(t(3)),
            }
        );
        assert_eq!(s["b"].failures, 0);
        assert_eq!(left_failing(&answered), ["a"]);
    }

    #[test]
    fn successes_of_a_healthy_endpoint_skip_its_row_until_its_last_success_is_a_minute_old() {
        let t = |s: i64| DateTime::from_timestamp(1_800_000_000 + s, 0).unwrap();
        let endpoint = webhook_endpoint::Model {
            id: "whep_1".into(),
            merchant_id: crate::ids::MerchantId::new(),
            profile_id: crate::ids::ProfileId::new(),
            url: "https://shop.example/hooks".into(),
            secret: String::new(),
            previous_secret: None,
            previous_secret_expires_at: None,
            enabled: true,
            created_at: t(0),
            updated_at: t(0),
            consecutive_failures: 0,
            failing_since: None,
            last_success_at: Some(t(100)),
            disabled_reason: None,
            max_per_second: None,
            next_send_at: None,
            test_mode: true,
        };
        let at = |s: i64, delivered: bool| Answered {
            endpoint_id: "whep_1",
            at: t(s),
            delivered,
        };
        assert!(unchanged(&endpoint, &[at(130, true), at(150, true)]));
        assert!(!unchanged(&endpoint, &[at(130, true), at(161, true)]));
        assert!(!unchanged(&endpoint, &[at(130, true), at(131, false)]));
        let failing = webhook_endpoint::Model {
            consecutive_failures: 2,
            failing_since: Some(t(90)),
            ..endpoint.clone()
        };
        assert!(!unchanged(&failing, &[at(130, true)]));
        let never = webhook_endpoint::Model {
            last_success_at: None,
            ..endpoint
        };
        assert!(!unchanged(&never, &[at(130, true)]));
    }
}

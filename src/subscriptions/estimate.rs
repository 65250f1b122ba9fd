//! An estimate: what a plan would charge first, or a subscription's next renewal (with the
//! proration of a plan change), computed as the renewal computes it; nothing is stored. The
//! query was parsed at the edge (`EstimateAsk`); what can go wrong here is an
//! [`EstimateError`], which the routes map to the API's error.

use chrono::{DateTime, Utc};
use sea_orm::DbErr;

use super::{
    api::{Estimate, EstimateAsk, ItemInput, PlanOf},
    create::{self, CreateError},
    cycles::{self, SubscriptionError},
    machine, plans,
};
use crate::{auth::keys::Scope, commit::Db, ids::SubscriptionId};

/// Why an estimate could not be made.
#[derive(Debug, thiserror::Error)]
pub enum EstimateError {
    #[error("no such subscription")]
    NoSuchSubscription,
    /// The price's plan, as a new subscription's would be refused (its one item is the
    /// query's own fields).
    #[error(transparent)]
    Plan(CreateError),
    #[error("a plan change keeps the subscription's currency and interval")]
    OtherTerms,
    #[error(transparent)]
    Subscription(#[from] SubscriptionError),
    #[error("database: {0}")]
    Db(#[from] DbErr),
}

/// The estimate asked for: of a billing processor's plan, of a new plan of one price, of a
/// subscription's next renewal, or of a change of its plan.
pub async fn estimate(
    db: &Db,
    scope: &Scope,
    ask: EstimateAsk,
    max: i64,
    now: DateTime<Utc>,
) -> Result<Estimate, EstimateError> {
    match ask {
        EstimateAsk::ProcessorPlan { plan, quantity } => processor_estimate(plan, quantity, now),
        EstimateAsk::Price {
            price_id,
            quantity,
            of,
        } => {
            let items = [ItemInput { price_id, quantity }];
            // A plan change is priced in the subscription's shop.
            let (shop, s) = match of {
                PlanOf::Shop(shop) => (shop, None),
                PlanOf::Subscription(id) => {
                    let s = owned(db, scope, &id).await?;
                    (s.profile_id.clone(), Some(s))
                }
            };
            let plan = create::plan(db, scope, &shop, &items, max, now)
                .await
                .map_err(EstimateError::Plan)?;
            let Some(s) = s else {
                return Ok(Estimate {
                    amount: plan.amount,
                    proration: None,
                    currency: plan.currency,
                    interval: plan.interval.to_string(),
                    interval_count: plan.interval_count,
                    period_start: now,
                    period_end: plan.period_end,
                    items: plan.items,
                    subscription_id: None,
                });
            };
            // A change of the subscription's plan: the renewal after it, with its proration.
            if !plan.keeps_terms_of(&s) {
                return Err(EstimateError::OtherTerms);
            }
            let owed = machine::proration(
                s.paid_rate,
                plan.amount,
                s.current_period_start,
                s.current_period_end,
                now,
            );
            let next = cycles::next_period(&s).ok_or(SubscriptionError::PastCalendar)?;
            Ok(Estimate {
                amount: plan.amount + s.pending_adjustment + owed,
                proration: Some(owed),
                currency: plan.currency,
                interval: plan.interval.to_string(),
                interval_count: plan.interval_count,
                period_start: next.current_period_start,
                period_end: next.current_period_end,
                items: plan.items,
                subscription_id: Some(s.id.into()),
            })
        }
        EstimateAsk::Renewal(id) => {
            let s = owned(db, scope, &id).await?;
            let next = cycles::next_period(&s).ok_or(SubscriptionError::PastCalendar)?;
            Ok(Estimate {
                amount: s.amount + s.pending_adjustment,
                proration: None,
                currency: s.currency.clone(),
                interval: s.interval.to_string(),
                interval_count: s.interval_count,
                period_start: next.current_period_start,
                period_end: next.current_period_end,
                items: s.items.0.clone(),
                subscription_id: Some(s.id.into()),
            })
        }
    }
}

/// The caller's subscription `id`.
async fn owned(
    db: &Db,
    scope: &Scope,
    id: &SubscriptionId,
) -> Result<payd_entity::subscription::Model, EstimateError> {
    crate::owned::find_owned(db, id, scope)
        .await?
        .ok_or(EstimateError::NoSuchSubscription)
}

/// What a plan of the billing processor collects first, from now.
fn processor_estimate(
    plan: &'static plans::PlanItem,
    quantity: i64,
    now: DateTime<Utc>,
) -> Result<Estimate, EstimateError> {
    let item = super::api::plan_item(plan, quantity);
    Ok(Estimate {
        amount: item.unit_amount * item.quantity,
        proration: None,
        currency: plan.currency.to_owned(),
        interval: plan.interval.to_string(),
        interval_count: plan.interval_count,
        period_start: now,
        period_end: plan
            .period_end(now)
            .ok_or(SubscriptionError::PastCalendar)?,
        items: vec![item],
        subscription_id: None,
    })
}

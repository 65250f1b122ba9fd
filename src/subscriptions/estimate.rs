//! An estimate: what a plan would charge first, or a subscription's next renewal (with the
//! proration of a plan change), computed as the renewal computes it; nothing is stored.

use chrono::{DateTime, Utc};

use super::{
    api::{check_quantity, Estimate, EstimateQuery, Item, ItemInput},
    create, cycles, machine, plans, store,
};
use crate::{
    auth::keys::Caller, commit::Db, error::ApiError, fields::parse_id, ids::SubscriptionId,
};

/// The estimate the query asks for: of a billing processor's plan (`plan_id`), of a new plan
/// (`price_id`), of a subscription's next renewal (`subscription_id`), or of a plan change
/// (both).
pub async fn estimate(
    db: &Db,
    caller: &Caller,
    q: &EstimateQuery,
    max: i64,
    now: DateTime<Utc>,
) -> Result<Estimate, ApiError> {
    if let Some(plan_id) = &q.plan_id {
        return processor_estimate(plan_id, q.quantity, now);
    }
    let new_plan = match &q.price_id {
        Some(price) => {
            let items = [ItemInput {
                price_id: price.clone(),
                quantity: q.quantity.unwrap_or(1),
            }];
            let s = match &q.subscription_id {
                Some(id) => Some(owned(db, caller, id).await?),
                None => None,
            };
            let shop = match &s {
                Some(s) => s.profile_id.clone(),
                None => caller.require_shop()?.to_string(),
            };
            let plan = create::plan(db, &caller.scope(), &shop, &items, max, now)
                .await
                // The item is the query's own fields.
                .map_err(|e| {
                    let mut e = ApiError::from(e);
                    e.param = e
                        .param
                        .map(|p| p.trim_start_matches("items[0].").to_owned());
                    e
                })?;
            Some((plan, s))
        }
        None => None,
    };
    let out = match (new_plan, &q.subscription_id) {
        // A change of a subscription's plan: the renewal after it, with its proration.
        (Some((plan, Some(s))), _) => {
            if !plan.keeps_terms_of(&s) {
                return Err(ApiError::invalid_param("price_id", "a plan change keeps the subscription's currency and interval"));
            }
            let owed = machine::proration(s.paid_rate, plan.amount, s.current_period_start, s.current_period_end, now);
            let next = cycles::next_period(&s)
                .ok_or_else(|| ApiError::internal("a period past the calendar"))?;
            Estimate {
                amount: plan.amount + s.pending_adjustment + owed,
                proration: Some(owed),
                currency: plan.currency,
                interval: plan.interval,
                interval_count: plan.interval_count,
                period_start: next.current_period_start,
                period_end: next.current_period_end,
                items: plan.items,
                subscription_id: Some(s.id),
            }
        }
        (Some((plan, None)), _) => Estimate {
            amount: plan.amount,
            proration: None,
            currency: plan.currency,
            interval: plan.interval,
            interval_count: plan.interval_count,
            period_start: now,
            period_end: plan.period_end,
            items: plan.items,
            subscription_id: None,
        },
        (None, Some(id)) => {
            let s = owned(db, caller, id).await?;
            let next = cycles::next_period(&s)
                .ok_or_else(|| ApiError::internal("a period past the calendar"))?;
            Estimate {
                amount: s.amount + s.pending_adjustment,
                proration: None,
                currency: s.currency.clone(),
                interval: s.interval.clone(),
                interval_count: s.interval_count,
                period_start: next.current_period_start,
                period_end: next.current_period_end,
                items: crate::stored::json("items", &s.id, &s.items)?,
                subscription_id: Some(s.id),
            }
        }
        (None, None) => {
            return Err(ApiError::invalid_param(
                "price_id",
                "send price_id (and quantity) for a new plan, subscription_id for the next renewal, or both for a plan change",
            ))
        }
    };
    Ok(out)
}

/// The caller's subscription `id`.
async fn owned(
    db: &Db,
    caller: &Caller,
    id: &str,
) -> Result<payd_entity::subscription::Model, ApiError> {
    let id: SubscriptionId = parse_id(id)?;
    store::find_owned(db, &id, &caller.scope())
        .await?
        .ok_or_else(ApiError::no_such::<SubscriptionId>)
}

/// What a plan of the billing processor collects first, from now.
fn processor_estimate(
    plan_id: &str,
    quantity: Option<i64>,
    now: DateTime<Utc>,
) -> Result<Estimate, ApiError> {
    let plan = plans::plan(plan_id).ok_or_else(|| ApiError::not_found("plan").param("plan_id"))?;
    let quantity = quantity.unwrap_or(1);
    check_quantity(quantity)?;
    let item = Item::of_plan(plan, quantity);
    Ok(Estimate {
        amount: item.unit_amount * item.quantity,
        proration: None,
        currency: plan.currency.to_owned(),
        interval: plan.interval.to_owned(),
        interval_count: plan.interval_count,
        period_start: now,
        period_end: plan
            .period_end(now)
            .ok_or_else(|| ApiError::internal("a period past the calendar"))?,
        items: vec![item],
        subscription_id: None,
    })
}

//! Taking over subscriptions that exist at the billing processor: one (`POST
//! /subscriptions/adopt`), or a reviewed set (`POST /subscriptions/import/preview`, then
//! `/import/apply`). An adopted subscription keeps the processor's status, plan and period;
//! the processor collects each cycle, payd renews, follows and announces it.

use chrono::{DateTime, Utc};
use payd_entity::{billing_subscription, subscription, subscription_preview};
use payd_model::subscriptions::ProcessorStatus;
use sea_orm::{DbErr, EntityTrait};
use serde::Serialize;
use utoipa::ToSchema;

use super::{actor::Subscriptions, cycles::SubscriptionError, machine::Status, plans, store};
use crate::commit::Db;
use crate::stored::Json;
use crate::{
    auth::keys::{Caller, Scope},
    commit::{self, Change, CommitError},
    customers::{self, api::CustomerFields},
    ids::new_id,
};

/// Why a processor subscription could not be adopted, or an import applied. The routes map it
/// to the API's error.
#[derive(Debug, thiserror::Error)]
pub enum AdoptError {
    #[error("no such processor subscription")]
    NoSuchProcessorSubscription,
    #[error("the subscription is cancelled at the billing processor")]
    Cancelled,
    #[error("a subscription of payd already follows this processor subscription")]
    AlreadyAdopted,
    #[error("no such customer")]
    NoSuchCustomer,
    #[error("no such import preview")]
    NoSuchPreview,
    #[error(transparent)]
    Subscription(#[from] SubscriptionError),
    #[error(transparent)]
    Commit(#[from] CommitError),
    #[error("database: {0}")]
    Db(#[from] DbErr),
}

/// A subscription at the processor, as an import preview lists it.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ProcessorSubscription {
    pub processor_subscription_id: String,
    pub customer_name: String,
    pub customer_email: Option<String>,
    pub plan_id: String,
    pub quantity: i64,
    /// What a cycle collects, in minor units.
    pub amount: i64,
    pub currency: String,
    /// `active`, `paused` or `cancelled`, at the processor.
    pub status: String,
    pub current_period_end: DateTime<Utc>,
    /// The payd subscription that adopted it, if one has.
    pub subscription_id: Option<String>,
}

impl ProcessorSubscription {
    pub fn render(p: &billing_subscription::Model, adopted_by: Option<String>) -> Self {
        let plan = plans::plan(&p.plan_id);
        Self {
            processor_subscription_id: p.id.to_string(),
            customer_name: p.customer_name.clone(),
            customer_email: p.customer_email.clone(),
            plan_id: p.plan_id.clone(),
            quantity: p.quantity,
            amount: plan.map_or(0, |pl| pl.unit_amount * p.quantity),
            currency: plan.map_or("EUR", |pl| pl.currency).to_owned(),
            status: p.status.to_string(),
            current_period_end: p.current_period_end,
            subscription_id: adopted_by,
        }
    }
}

/// `POST /subscriptions/import/preview`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ImportPreview {
    pub preview_id: String,
    /// What the apply adopts: the shop's processor subscriptions not cancelled and not
    /// adopted yet.
    pub subscriptions: Vec<ProcessorSubscription>,
    /// Adopted before: left alone.
    pub already_adopted: Vec<ProcessorSubscription>,
}

/// `POST /subscriptions/import/apply`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ImportApplied {
    pub preview_id: String,
    /// Adopted by this call.
    pub adopted: Vec<String>,
    /// The payd subscription of every processor subscription the preview listed (by this call
    /// or an earlier one); a second apply answers the same list and adopts nothing.
    pub subscriptions: Vec<String>,
    /// Listed subscriptions the processor cancelled since the preview: not adopted.
    pub skipped: Vec<String>,
}

/// The payd subscription that adopted this processor subscription, if any.
async fn adopted_by(
    db: &Db,
    processor_subscription_id: &str,
) -> Result<Option<subscription::Model>, DbErr> {
    store::by_processor_subscription(db, processor_subscription_id).await
}

/// Adopts the processor subscription `id` into the caller's shop, for `customer_id` or, with
/// none, a new customer made from the processor's customer.
pub async fn adopt(
    subscriptions: &Subscriptions,
    caller: &Caller,
    shop: &crate::ids::ProfileId,
    id: &str,
    customer_id: Option<&str>,
) -> Result<subscription::Model, AdoptError> {
    let deps = subscriptions.deps();
    let scope = caller.scope();
    let found = match crate::ids::ProcessorSubscriptionId::parse(id) {
        Some(id) => deps.billing.find(&scope, &id).await?,
        None => None,
    };
    let p = found
        .filter(|p| p.profile_id == *shop)
        .ok_or(AdoptError::NoSuchProcessorSubscription)?;
    if p.status == ProcessorStatus::Cancelled {
        return Err(AdoptError::Cancelled);
    }
    if adopted_by(&deps.db, &p.id).await?.is_some() {
        return Err(AdoptError::AlreadyAdopted);
    }
    store::check_sandbox_room(&deps.db, caller, deps.sandbox_max)
        .await
        .map_err(SubscriptionError::from)?;
    let customer_id = match customer_id {
        Some(c) => {
            let found = match crate::ids::CustomerId::parse(c) {
                Some(id) => crate::owned::find_owned(&deps.db, &id, &scope).await?,
                None => None,
            };
            found.ok_or(AdoptError::NoSuchCustomer)?.id
        }
        None => new_customer(deps, &scope, &p).await?,
    };
    let s = adopted(&p, &scope, customer_id, deps.clock.now())?;
    let status = s.status;
    // Announced in the state it is adopted in (`subscription_created` is for one that waits
    // for its buyer).
    let events = vec![store::event(
        &s,
        match status {
            Status::Paused => "subscription_paused",
            _ => "subscription_active",
        },
    )?];
    let due = store::next_due(&s, None, deps.confirm_within);
    match store::insert(&deps.db, &s, None, events, due).await {
        Ok(()) => {}
        // Another request adopted it meanwhile (the unique index on the processor's id).
        Err(CommitError::Db(e))
            if matches!(
                e.sql_err(),
                Some(sea_orm::SqlErr::UniqueConstraintViolation(_))
            ) =>
        {
            return Err(AdoptError::AlreadyAdopted);
        }
        Err(e) => return Err(e.into()),
    }
    deps.wake.now();
    Ok(s)
}

async fn new_customer(
    deps: &super::cycles::SubscriptionDeps,
    scope: &Scope,
    p: &billing_subscription::Model,
) -> Result<crate::ids::CustomerId, CommitError> {
    let fields = CustomerFields {
        name: Some(p.customer_name.clone()),
        email: p.customer_email.clone(),
        phone: None,
        description: Some(format!("Adopted from {} with {}", plans::NAME, p.id)),
        address: None,
        metadata: None,
    };
    let c = customers::store::insert(
        &deps.db,
        &scope.merchant_id,
        scope.test_mode,
        &fields,
        deps.clock.now(),
        None,
    )
    .await?;
    Ok(c.id)
}

/// The payd subscription that follows `p`: its status, plan and period as the processor has
/// them.
pub fn adopted(
    p: &billing_subscription::Model,
    scope: &Scope,
    customer_id: crate::ids::CustomerId,
    now: DateTime<Utc>,
) -> Result<subscription::Model, DbErr> {
    let plan = plans::plan(&p.plan_id).ok_or_else(|| {
        DbErr::Custom(format!(
            "processor subscription {} has an unknown plan {}",
            p.id, p.plan_id
        ))
    })?;
    let item = super::api::plan_item(plan, p.quantity);
    let status = match p.status {
        ProcessorStatus::Paused => Status::Paused,
        // A cancelled one is refused before this (`AdoptError::Cancelled`).
        ProcessorStatus::Active | ProcessorStatus::Cancelled => Status::Active,
    };
    Ok(subscription::Model {
        id: crate::ids::SubscriptionId::new(),
        merchant_id: scope.merchant_id.clone(),
        profile_id: crate::stored::id("profile_id", &p.id, &p.profile_id)?,
        test_mode: scope.test_mode,
        customer_id,
        payment_method_id: None,
        mandate_id: None,
        checkout_url: None,
        items: Json(vec![item.clone()]),
        amount: item.unit_amount * item.quantity,
        pending_adjustment: 0,
        currency: plan.currency.to_owned(),
        interval: plan.interval,
        interval_count: plan.interval_count,
        status,
        anchor_at: p.current_period_start,
        period_index: 1,
        anchor_index: 0,
        paid_rate: item.unit_amount * item.quantity,
        term_cycles: None,
        current_period_start: p.current_period_start,
        current_period_end: p.current_period_end,
        cancel_at_period_end: false,
        cancelled_at: None,
        cancellation_reason: None,
        billing: plans::NAME,
        processor_subscription_id: Some(p.id.clone()),
        transition_id: new_id("tr"),
        ever_active: true,
        open_cycle_id: None,
        metadata: Default::default(),
        version: 1,
        created_at: now,
        updated_at: now,
    })
}

/// Lists what an apply would adopt, and stores that set under a new preview id.
pub async fn preview(
    subscriptions: &Subscriptions,
    caller: &Caller,
    shop: &crate::ids::ProfileId,
) -> Result<ImportPreview, AdoptError> {
    let deps = subscriptions.deps();
    let scope = caller.scope();
    let mut listed = Vec::new();
    let mut already = Vec::new();
    for p in deps.billing.list(&scope, shop).await? {
        match adopted_by(&deps.db, &p.id).await? {
            Some(s) => already.push(ProcessorSubscription::render(&p, Some(s.id.into()))),
            None if p.status != ProcessorStatus::Cancelled => {
                listed.push(ProcessorSubscription::render(&p, None))
            }
            None => {}
        }
    }
    let ids: Vec<String> = listed
        .iter()
        .map(|p| p.processor_subscription_id.clone())
        .collect();
    let now = deps.clock.now();
    let row = subscription_preview::Model {
        id: crate::ids::AdoptionPreviewId::new(),
        merchant_id: scope.merchant_id.clone(),
        profile_id: shop.clone(),
        test_mode: scope.test_mode,
        processor_subscription_ids: Json(ids),
        created_at: now,
    };
    commit::commit(&deps.db, Change::at(now).write(commit::insert(row.clone()))).await?;
    Ok(ImportPreview {
        preview_id: row.id.into(),
        subscriptions: listed,
        already_adopted: already,
    })
}

/// Adopts exactly the set the preview listed (those not adopted since), each for a customer
/// made from the processor's. Applying again adopts nothing and answers the same
/// subscriptions.
pub async fn apply(
    subscriptions: &Subscriptions,
    caller: &Caller,
    shop: &crate::ids::ProfileId,
    preview_id: &str,
) -> Result<ImportApplied, AdoptError> {
    let deps = subscriptions.deps();
    let scope = caller.scope();
    let found = match crate::ids::AdoptionPreviewId::parse(preview_id) {
        Some(id) => {
            subscription_preview::Entity::find_by_id(id)
                .one(&deps.db)
                .await?
        }
        None => None,
    };
    let row = found
        .filter(|r| scope.sees(&r.merchant_id, r.test_mode, &r.profile_id) && r.profile_id == *shop)
        .ok_or(AdoptError::NoSuchPreview)?;
    let ids = row.processor_subscription_ids.0;
    let mut applied = ImportApplied {
        preview_id: row.id.to_string(),
        adopted: Vec::new(),
        subscriptions: Vec::new(),
        skipped: Vec::new(),
    };
    for id in ids {
        if let Some(s) = adopted_by(&deps.db, &id).await? {
            applied.subscriptions.push(s.id.into());
            continue;
        }
        match adopt(subscriptions, caller, shop, &id, None).await {
            Ok(s) => {
                applied.adopted.push(s.id.to_string());
                applied.subscriptions.push(s.id.into());
            }
            // Adopted by a concurrent apply: its subscription is the answer.
            Err(AdoptError::AlreadyAdopted) => {
                if let Some(s) = adopted_by(&deps.db, &id).await? {
                    applied.subscriptions.push(s.id.into());
                }
            }
            Err(AdoptError::Cancelled) => applied.skipped.push(id),
            Err(e) => return Err(e),
        }
    }
    Ok(applied)
}

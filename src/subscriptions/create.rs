//! A new subscription: its customer, mandate and items checked against the customers and the
//! catalog, its first period and cycle, and the first charge — billing is in advance, so the
//! subscription is active once that charge is paid. The request was parsed at the edge
//! (`NewSubscription`); what can go wrong here is a [`CreateError`], which the routes map to
//! the API's error.

use payd_entity::{mandate, price, subscription};
use sea_orm::DbErr;

use super::{
    actor::{Command, Exec, Subscriptions},
    adopt,
    api::{Billing, Item, ItemInput, NewSubscription},
    billing,
    cycles::{cycle_charge, new_cycle, SubscriptionError},
    machine::{self, Interval, Status},
    plans::PlanItem,
    store,
};
use crate::commit::Db;
use crate::stored::Json;
use crate::{
    auth::keys::{Caller, Scope},
    customers,
    error::Unanswered,
    ids::{new_id, SubscriptionId},
    money::{Money, MoneyError},
    payments::{self, charge::Pay},
    products,
};

/// At most this many items per subscription.
pub const MAX_ITEMS: usize = 20;

/// Why a new subscription, its plan or its mandate was refused after the request was parsed:
/// what it names is not there or does not fit. `item` is an index into the items sent.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error("a subscription has 1 to {MAX_ITEMS} items")]
    ItemCount,
    #[error("quantity must be 1 to 1000")]
    Quantity { item: usize },
    #[error("no such price")]
    NoSuchPrice { item: usize },
    #[error("the price or its product is archived")]
    PriceArchived { item: usize },
    #[error("a subscription bills recurring prices")]
    NotRecurring { item: usize },
    #[error("every item bills in one currency at one interval")]
    MixedTerms { item: usize },
    #[error("a cycle charges at most {0}")]
    TooLarge(i64),
    #[error("a subscription charges more than 0 a cycle")]
    Free,
    #[error("no such customer")]
    NoSuchCustomer,
    #[error("no such mandate")]
    NoSuchMandate,
    #[error("the mandate is another customer's")]
    MandateOfAnother,
    #[error("a subscription needs an active multi-use mandate")]
    MandateInactive,
    #[error("the mandate is for another saved method")]
    OtherMethod,
    #[error(transparent)]
    Payment(#[from] payments::create::CreateError),
    #[error(transparent)]
    Subscription(#[from] SubscriptionError),
    #[error(transparent)]
    Unanswered(#[from] Unanswered),
    #[error("database: {0}")]
    Db(#[from] DbErr),
}

impl From<crate::commit::CommitError> for CreateError {
    fn from(e: crate::commit::CommitError) -> Self {
        CreateError::Subscription(e.into())
    }
}

impl<E: Into<CreateError>> From<payd_actors::ActorError<E>> for CreateError {
    fn from(e: payd_actors::ActorError<E>) -> Self {
        Unanswered::fold(e)
    }
}

/// An active multi-use mandate of the customer, in the caller's merchant and mode.
pub async fn check_mandate(
    db: &Db,
    scope: &Scope,
    customer_id: &str,
    mandate_id: &str,
) -> Result<mandate::Model, CreateError> {
    let mandate = match crate::ids::MandateId::parse(mandate_id) {
        Some(id) => customers::store::find_mandate(db, &id).await?,
        None => None,
    }
    .filter(|m| m.merchant_id == scope.merchant_id && m.test_mode == scope.test_mode)
    .ok_or(CreateError::NoSuchMandate)?;
    if mandate.customer_id != customer_id {
        return Err(CreateError::MandateOfAnother);
    }
    if mandate.status != payd_model::mandates::Status::Active
        || mandate.mandate_type != payd_model::mandates::Kind::MultiUse
    {
        return Err(CreateError::MandateInactive);
    }
    Ok(mandate)
}

/// What a subscription of these items bills: its items as stored, what a cycle charges, and
/// its first period's end from `now`. The one computation behind a new subscription and an
/// estimate.
pub struct Plan {
    pub items: Vec<Item>,
    pub amount: i64,
    pub currency: String,
    pub interval: Interval,
    pub interval_count: i64,
    pub period_end: chrono::DateTime<chrono::Utc>,
}

impl Plan {
    /// True when the plan bills in the subscription's currency at its interval: a plan change
    /// keeps both.
    pub fn keeps_terms_of(&self, s: &payd_entity::subscription::Model) -> bool {
        self.currency == s.currency
            && self.interval == s.interval
            && self.interval_count == s.interval_count
    }
}

/// Checks `items` against the shop's catalog: active recurring prices of one currency and one
/// interval.
pub async fn plan(
    db: &Db,
    scope: &Scope,
    shop: &str,
    items: &[ItemInput],
    max_amount: i64,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Plan, CreateError> {
    if items.is_empty() || items.len() > MAX_ITEMS {
        return Err(CreateError::ItemCount);
    }
    let mut out = Vec::with_capacity(items.len());
    let mut first: Option<(price::Model, Interval)> = None;
    let mut total: Option<Money> = None;
    for (i, it) in items.iter().enumerate() {
        if !(1..=1000).contains(&it.quantity) {
            return Err(CreateError::Quantity { item: i });
        }
        let (p, interval) = recurring_price(db, scope, shop, &it.price_id, i).await?;
        if first.as_ref().is_some_and(|(f, _)| {
            f.recurring_interval != Some(interval)
                || f.recurring_interval_count != p.recurring_interval_count
        }) {
            return Err(CreateError::MixedTerms { item: i });
        }
        // Every item in one currency: the sum refuses another.
        let line = Money::new(p.unit_amount, &p.currency).times(it.quantity);
        let sum = match total.take() {
            None => line,
            Some(t) => line.and_then(|line| t.plus(&line)),
        };
        total = Some(match sum {
            Err(MoneyError::Currencies(..)) => return Err(CreateError::MixedTerms { item: i }),
            Ok(sum) if sum.minor <= max_amount => sum,
            Ok(_) | Err(MoneyError::Overflow) => return Err(CreateError::TooLarge(max_amount)),
        });
        out.push(Item {
            price_id: Some(p.id.to_string()),
            product_id: Some(p.product_id.to_string()),
            plan_id: None,
            quantity: it.quantity,
            unit_amount: p.unit_amount,
        });
        first.get_or_insert((p, interval));
    }
    let (Some(first), Some(total)) = (first, total.filter(|t| t.minor > 0)) else {
        return Err(CreateError::Free);
    };
    let (first, interval) = first;
    let count = first.recurring_interval_count.unwrap_or(1);
    let end =
        machine::period_end(now, interval, count, 1).ok_or(SubscriptionError::PastCalendar)?;
    Ok(Plan {
        items: out,
        amount: total.minor,
        currency: total.currency,
        interval,
        interval_count: count,
        period_end: end,
    })
}

/// An active recurring price of the shop whose product is on sale, with its interval.
async fn recurring_price(
    db: &Db,
    scope: &Scope,
    shop: &str,
    price_id: &str,
    item: usize,
) -> Result<(price::Model, Interval), CreateError> {
    let p = match crate::ids::PriceId::parse(price_id) {
        Some(id) => products::store::find_price(db, &id).await?,
        None => None,
    }
    .filter(|p| {
        p.merchant_id == scope.merchant_id.as_str()
            && p.test_mode == scope.test_mode
            && p.profile_id == shop
    })
    .ok_or(CreateError::NoSuchPrice { item })?;
    let product = products::store::find(db, &p.product_id).await?;
    if !p.active || !product.is_some_and(|x| x.active) {
        return Err(CreateError::PriceArchived { item });
    }
    let Some(interval) = p.recurring_interval else {
        return Err(CreateError::NotRecurring { item });
    };
    Ok((p, interval))
}

/// The customer, if the caller's merchant and mode have it.
async fn find_customer(
    db: &Db,
    scope: &Scope,
    customer_id: &str,
) -> Result<payd_entity::customer::Model, CreateError> {
    match crate::ids::CustomerId::parse(customer_id) {
        Some(id) => crate::owned::find_owned(db, &id, scope).await?,
        None => None,
    }
    .ok_or(CreateError::NoSuchCustomer)
}

/// A new subscription of the asked shop for the asked customer and `items` (checked), not
/// yet stored: status `created`, its first period starting now.
async fn new_subscription(
    db: &Db,
    caller: &Caller,
    ask: &NewSubscription,
    items: &[ItemInput],
    max_amount: i64,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<subscription::Model, CreateError> {
    let scope = caller.scope();
    let customer = find_customer(db, &scope, &ask.customer_id).await?;
    let plan = plan(db, &scope, &ask.shop, items, max_amount, now).await?;
    Ok(subscription::Model {
        id: SubscriptionId::new(),
        merchant_id: scope.merchant_id.clone(),
        profile_id: ask.shop.clone(),
        test_mode: scope.test_mode,
        customer_id: customer.id,
        payment_method_id: None,
        mandate_id: None,
        checkout_url: None,
        items: Json(plan.items.clone()),
        amount: plan.amount,
        pending_adjustment: 0,
        currency: plan.currency,
        interval: plan.interval,
        interval_count: plan.interval_count,
        status: Status::Created,
        anchor_at: now,
        period_index: 1,
        anchor_index: 0,
        paid_rate: plan.amount,
        term_cycles: ask.term_cycles,
        current_period_start: now,
        current_period_end: plan.period_end,
        cancel_at_period_end: false,
        cancelled_at: None,
        cancellation_reason: None,
        billing: store::Biller::Payd,
        processor_subscription_id: None,
        transition_id: new_id("tr"),
        ever_active: false,
        open_cycle_id: None,
        metadata: Json(ask.metadata.clone()),
        version: 1,
        created_at: now,
        updated_at: now,
    })
}

/// `POST /subscriptions` and `POST /subscriptions/create`: a new subscription as `ask` bills
/// it. Under a mandate, it is inserted and its first cycle collected through its actor; with
/// a processor plan, it is made at the processor first; for the hosted checkout, it waits for
/// the buyer to pay its first cycle there.
pub async fn create(
    subscriptions: &Subscriptions,
    caller: &Caller,
    ask: NewSubscription,
    max_amount: i64,
) -> Result<subscription::Model, CreateError> {
    match &ask.billing {
        Billing::Mandate {
            items,
            mandate_id,
            payment_method_id,
        } => {
            let deps = subscriptions.deps();
            let now = deps.clock.now();
            let mut s = new_subscription(&deps.db, caller, &ask, items, max_amount, now).await?;
            let scope = caller.scope();
            let mandate = check_mandate(&deps.db, &scope, &s.customer_id, mandate_id).await?;
            if payment_method_id
                .as_ref()
                .is_some_and(|pm| *pm != mandate.payment_method_id)
            {
                return Err(CreateError::OtherMethod);
            }
            s.mandate_id = Some(mandate.id);
            s.payment_method_id = Some(mandate.payment_method_id);
            collect_first(subscriptions, s, now).await
        }
        Billing::ProcessorPlan { plan, quantity } => {
            create_at_processor(subscriptions, caller, &ask, plan, *quantity).await
        }
        Billing::Checkout { items } => {
            create_for_checkout(subscriptions, caller, &ask, items, max_amount).await
        }
    }
}

/// Inserts a `created` subscription with its first cycle and that cycle's attempt (recorded
/// before any charge), then collects it through the subscription's actor: active once paid.
async fn collect_first(
    subscriptions: &Subscriptions,
    mut s: subscription::Model,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<subscription::Model, CreateError> {
    let deps = subscriptions.deps();
    let mut cycle = new_cycle(&s, 1, now)?;
    super::cycles::taxed(deps, &s, &mut cycle, now).await?;
    s.open_cycle_id = Some(cycle.id.clone());
    // The job comes after the charge's check time: it settles the charge only if this
    // request did not (a crash), so no other instance races the charge made here.
    let due = store::next_due(&s, Some(&cycle), deps.confirm_within);
    store::insert(&deps.db, &s, Some(&cycle), vec![], due).await?;
    let exec = Exec {
        scope: None,
        command: Command::Charge,
        timeline: crate::clock::current(),
    };
    Ok(subscriptions.send(&s.id, exec).await??)
}

/// A subscription with a processor plan: made at the billing processor for the customer,
/// followed by payd like an adopted one, and its first period collected at once by the
/// processor.
async fn create_at_processor(
    subscriptions: &Subscriptions,
    caller: &Caller,
    ask: &NewSubscription,
    plan: &'static PlanItem,
    quantity: i64,
) -> Result<subscription::Model, CreateError> {
    let deps = subscriptions.deps();
    let scope = caller.scope();
    let customer = find_customer(&deps.db, &scope, &ask.customer_id).await?;
    let now = deps.clock.now();
    let new = billing::NewSubscription {
        customer_name: customer
            .name
            .clone()
            .unwrap_or_else(|| customer.id.to_string()),
        customer_email: customer.email.clone(),
        plan,
        quantity,
        declines: false,
    };
    let at_processor = deps.billing.create(&scope, &ask.shop, new, now).await?;
    let mut s = adopt::adopted(&at_processor, &scope, customer.id, now)?;
    s.status = Status::Created;
    s.ever_active = false;
    s.term_cycles = ask.term_cycles;
    s.metadata = Json(ask.metadata.clone());
    collect_first(subscriptions, s, now).await
}

/// A `created` subscription whose first cycle the buyer pays on the hosted checkout, saving
/// the card under a multi-use mandate (`subscription_created`). The checkout's payment is
/// made first, with the id its cycle records, so the subscription never points at a payment
/// that does not exist.
async fn create_for_checkout(
    subscriptions: &Subscriptions,
    caller: &Caller,
    ask: &NewSubscription,
    items: &[ItemInput],
    max_amount: i64,
) -> Result<subscription::Model, CreateError> {
    let deps = subscriptions.deps();
    let db = &deps.db;
    let now = deps.clock.now();
    let mut s = new_subscription(db, caller, ask, items, max_amount, now).await?;
    let mut cycle = new_cycle(&s, 1, now)?;
    super::cycles::taxed(deps, &s, &mut cycle, now).await?;
    let charge = cycle_charge(&s, &cycle, Pay::Checkout)?;
    let settled = payments::charge::charge(&deps.payments, charge)
        .await
        .map_err(|e| SubscriptionError::Charge(Box::new(e)))?;
    let p = settled.payment();
    s.checkout_url = payments::api::Payment::render(p, &deps.public_url)?.checkout_url;
    s.open_cycle_id = Some(cycle.id.clone());
    let created = vec![store::event(&s, "subscription_created")?];
    let due = store::next_due(&s, Some(&cycle), deps.confirm_within);
    store::insert(db, &s, Some(&cycle), created, due).await?;
    Ok(s)
}

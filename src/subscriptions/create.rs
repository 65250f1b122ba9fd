//! A new subscription: its customer, mandate and items checked against the customers and the
//! catalog, its first period and cycle, and the first charge — billing is in advance, so the
//! subscription is active once that charge is paid.

use payd_entity::{mandate, price, subscription};

use super::{
    actor::{Command, Exec, Subscriptions},
    adopt,
    api::{check_quantity, CreateSubscriptionRequest, Item, ItemInput},
    billing,
    cycles::{cycle_payment, new_cycle},
    machine::{self, Interval, Status},
    plans, store,
};
use crate::commit::Db;
use crate::{
    auth::keys::{Caller, Scope},
    customers,
    error::ApiError,
    fields::check_metadata,
    ids::new_id,
    payments, products,
};

/// At most this many items per subscription.
pub const MAX_ITEMS: usize = 20;

/// An active multi-use mandate of the customer, in the caller's merchant and mode.
pub async fn check_mandate(
    db: &Db,
    scope: &Scope,
    customer_id: &str,
    mandate_id: &str,
) -> Result<mandate::Model, ApiError> {
    let mandate = match crate::ids::MandateId::parse(mandate_id) {
        Some(_) => customers::store::find_mandate(db, mandate_id).await?,
        None => None,
    }
    .filter(|m| m.merchant_id == scope.merchant_id && m.test_mode == scope.test_mode)
    .ok_or_else(|| ApiError::not_found("mandate").param("mandate_id"))?;
    if mandate.customer_id != customer_id {
        return Err(ApiError::invalid_param(
            "mandate_id",
            "the mandate is another customer's",
        ));
    }
    if mandate.status != "active" || mandate.mandate_type != "multi_use" {
        return Err(ApiError::conflict(
            "mandate_inactive",
            "a subscription needs an active multi-use mandate",
        )
        .param("mandate_id"));
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
    pub interval: String,
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
) -> Result<Plan, ApiError> {
    if items.is_empty() || items.len() > MAX_ITEMS {
        return Err(ApiError::invalid_param(
            "items",
            format!("a subscription has 1 to {MAX_ITEMS} items"),
        ));
    }
    let mut out = Vec::with_capacity(items.len());
    let mut first: Option<price::Model> = None;
    let mut amount: i64 = 0;
    for (i, it) in items.iter().enumerate() {
        let param = |f: &str| format!("items[{i}].{f}");
        if !(1..=1000).contains(&it.quantity) {
            return Err(ApiError::invalid_param(
                &param("quantity"),
                "quantity must be 1 to 1000",
            ));
        }
        let (p, interval) = recurring_price(db, scope, shop, &it.price_id, &param).await?;
        if let Some(f) = &first {
            if f.currency != p.currency
                || f.recurring_interval.as_deref() != Some(interval.as_str())
                || f.recurring_interval_count != p.recurring_interval_count
            {
                return Err(ApiError::invalid_param(
                    &param("price_id"),
                    "every item bills in one currency at one interval",
                ));
            }
        }
        amount = it
            .quantity
            .checked_mul(p.unit_amount)
            .and_then(|a| a.checked_add(amount))
            .filter(|a| *a <= max_amount)
            .ok_or_else(|| {
                ApiError::invalid(
                    "amount_too_large",
                    format!("a cycle charges at most {max_amount}"),
                )
                .param("items")
            })?;
        out.push(Item {
            price_id: Some(p.id.clone()),
            product_id: Some(p.product_id.clone()),
            plan_id: None,
            quantity: it.quantity,
            unit_amount: p.unit_amount,
        });
        first.get_or_insert(p);
    }
    if amount <= 0 {
        return Err(ApiError::invalid_param(
            "items",
            "a subscription charges more than 0 a cycle",
        ));
    }
    let first = first.ok_or_else(|| ApiError::invalid_param("items", "no items"))?;
    let interval_name = first.recurring_interval.clone().unwrap_or_default();
    let interval = Interval::parse(&interval_name)
        .ok_or_else(|| ApiError::internal("a price with an unknown interval"))?;
    let count = first.recurring_interval_count.unwrap_or(1);
    let end = machine::period_end(now, interval, count, 1)
        .ok_or_else(|| ApiError::internal("a period past the calendar"))?;
    Ok(Plan {
        items: out,
        amount,
        currency: first.currency.clone(),
        interval: interval_name,
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
    param: &dyn Fn(&str) -> String,
) -> Result<(price::Model, String), ApiError> {
    let p = match crate::ids::PriceId::parse(price_id) {
        Some(_) => products::store::find_price(db, price_id).await?,
        None => None,
    }
    .filter(|p| {
        p.merchant_id == scope.merchant_id && p.test_mode == scope.test_mode && p.profile_id == shop
    })
    .ok_or_else(|| ApiError::not_found("price").param(param("price_id")))?;
    let product = products::store::find(db, &p.product_id).await?;
    if !p.active || !product.is_some_and(|x| x.active) {
        return Err(
            ApiError::invalid("archived", "the price or its product is archived")
                .param(param("price_id")),
        );
    }
    let Some(interval) = p.recurring_interval.clone() else {
        return Err(ApiError::invalid_param(
            &param("price_id"),
            "a subscription bills recurring prices",
        ));
    };
    Ok((p, interval))
}

/// The request's fixed term checked, and its metadata as stored.
fn check_term_and_metadata(req: &CreateSubscriptionRequest) -> Result<String, ApiError> {
    if req.term_cycles.is_some_and(|n| !(1..=1_000).contains(&n)) {
        return Err(ApiError::invalid_param(
            "term_cycles",
            "a fixed term is 1 to 1000 periods",
        ));
    }
    Ok(check_metadata(req.metadata.as_ref())?.unwrap_or_else(|| "{}".into()))
}

/// The customer, if the caller's merchant and mode have it.
async fn find_customer(
    db: &Db,
    scope: &Scope,
    customer_id: &str,
) -> Result<payd_entity::customer::Model, ApiError> {
    match crate::ids::CustomerId::parse(customer_id) {
        Some(_) => {
            customers::store::find_owned(db, customer_id, &scope.merchant_id, scope.test_mode)
                .await?
        }
        None => None,
    }
    .ok_or_else(|| ApiError::not_found("customer").param("customer_id"))
}

/// A new subscription of the caller's shop for `req`'s customer and items (checked), not yet
/// stored: status `created`, its first period starting now.
async fn new_subscription(
    db: &Db,
    caller: &Caller,
    req: &CreateSubscriptionRequest,
    max_amount: i64,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<subscription::Model, ApiError> {
    if req.plan_id.is_some() || req.quantity.is_some() {
        let field = if req.plan_id.is_some() {
            "plan_id"
        } else {
            "quantity"
        };
        return Err(ApiError::invalid_param(
            field,
            "plan_id and quantity name a processor plan, made with POST /subscriptions; items carry their own quantity",
        ));
    }
    let shop = caller.require_shop()?.to_string();
    let scope = caller.scope();
    let metadata = check_term_and_metadata(req)?;
    let customer = find_customer(db, &scope, &req.customer_id).await?;
    let plan = plan(db, &scope, &shop, &req.items, max_amount, now).await?;
    Ok(subscription::Model {
        id: new_id("sub"),
        merchant_id: scope.merchant_id.clone(),
        profile_id: shop,
        test_mode: scope.test_mode,
        customer_id: customer.id,
        payment_method_id: None,
        mandate_id: None,
        checkout_url: None,
        items: serde_json::to_string(&plan.items).unwrap_or_else(|_| "[]".into()),
        amount: plan.amount,
        pending_adjustment: 0,
        currency: plan.currency,
        interval: plan.interval,
        interval_count: plan.interval_count,
        status: Status::Created.as_str().to_owned(),
        anchor_at: now,
        period_index: 1,
        anchor_index: 0,
        paid_rate: plan.amount,
        term_cycles: req.term_cycles,
        current_period_start: now,
        current_period_end: plan.period_end,
        cancel_at_period_end: false,
        cancelled_at: None,
        cancellation_reason: None,
        billing: "payd".into(),
        processor_subscription_id: None,
        transition_id: new_id("tr"),
        ever_active: false,
        open_cycle_id: None,
        metadata,
        version: 1,
        created_at: now,
        updated_at: now,
    })
}

/// `POST /subscriptions`: checks and inserts a subscription charged under `req`'s mandate,
/// then collects its first cycle through its actor.
pub async fn create(
    subscriptions: &Subscriptions,
    caller: &Caller,
    req: CreateSubscriptionRequest,
    max_amount: i64,
) -> Result<subscription::Model, ApiError> {
    let deps = subscriptions.deps();
    store::check_sandbox_room(&deps.db, caller, deps.sandbox_max).await?;
    if let Some(plan_id) = &req.plan_id {
        return create_at_processor(subscriptions, caller, &req, plan_id).await;
    }
    let db = &deps.db;
    let now = deps.clock.now();
    let mut s = new_subscription(db, caller, &req, max_amount, now).await?;
    let mandate_id = req.mandate_id.clone().ok_or_else(|| {
        ApiError::invalid_param(
            "mandate_id",
            "a subscription is charged under a multi-use mandate of the customer: send mandate_id (or use POST /subscriptions/create for the hosted checkout)",
        )
    })?;
    let mandate = check_mandate(db, &caller.scope(), &s.customer_id, &mandate_id).await?;
    if let Some(pm) = &req.payment_method_id {
        if pm != &mandate.payment_method_id {
            return Err(ApiError::invalid_param(
                "payment_method_id",
                "the mandate is for another saved method",
            ));
        }
    }
    s.mandate_id = Some(mandate.id);
    s.payment_method_id = Some(mandate.payment_method_id);
    collect_first(subscriptions, s, now).await
}

/// Inserts a `created` subscription with its first cycle and that cycle's attempt (recorded
/// before any charge), then collects it through the subscription's actor: active once paid.
async fn collect_first(
    subscriptions: &Subscriptions,
    mut s: subscription::Model,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<subscription::Model, ApiError> {
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
        command: Command::Tick,
        timeline: crate::clock::current(),
    };
    Ok(subscriptions.send(&s.id, exec).await??)
}

/// `POST /subscriptions` with a processor plan: the subscription is made at the billing
/// processor for the customer, followed by payd like an adopted one, and its first period is
/// collected at once by the processor.
async fn create_at_processor(
    subscriptions: &Subscriptions,
    caller: &Caller,
    req: &CreateSubscriptionRequest,
    plan_id: &str,
) -> Result<subscription::Model, ApiError> {
    let deps = subscriptions.deps();
    let shop = caller.require_shop()?.to_string();
    let scope = caller.scope();
    for (field, given) in [
        ("items", !req.items.is_empty()),
        ("mandate_id", req.mandate_id.is_some()),
        ("payment_method_id", req.payment_method_id.is_some()),
    ] {
        if given {
            return Err(ApiError::invalid_param(
                field,
                "a processor plan (plan_id) is billed by the processor, which holds the buyer's method: send neither items nor a method",
            ));
        }
    }
    let plan = plans::plan(plan_id).ok_or_else(|| {
        ApiError::invalid_param("plan_id", "unknown plan; see GET /subscriptions/items")
    })?;
    let quantity = req.quantity.unwrap_or(1);
    check_quantity(quantity)?;
    let metadata = check_term_and_metadata(req)?;
    let customer = find_customer(&deps.db, &scope, &req.customer_id).await?;
    let now = deps.clock.now();
    let new = billing::NewSubscription {
        customer_name: customer.name.clone().unwrap_or_else(|| customer.id.clone()),
        customer_email: customer.email.clone(),
        plan,
        quantity,
        declines: false,
    };
    let at_processor = deps.billing.create(&scope, &shop, new, now).await?;
    let mut s = adopt::adopted(&at_processor, &scope, customer.id, now)?;
    s.status = Status::Created.as_str().to_owned();
    s.ever_active = false;
    s.term_cycles = req.term_cycles;
    s.metadata = metadata;
    collect_first(subscriptions, s, now).await
}

/// `POST /subscriptions/create`: a `created` subscription whose first cycle the buyer pays on
/// the hosted checkout, saving the card under a multi-use mandate
/// (`subscription_created`). The checkout's payment is made first, with the id its cycle
/// records, so the subscription never points at a payment that does not exist.
pub async fn create_for_checkout(
    subscriptions: &Subscriptions,
    caller: &Caller,
    req: CreateSubscriptionRequest,
    max_amount: i64,
) -> Result<subscription::Model, ApiError> {
    for (field, given) in [
        ("mandate_id", req.mandate_id.is_some()),
        ("payment_method_id", req.payment_method_id.is_some()),
    ] {
        if given {
            return Err(ApiError::invalid_param(
                field,
                "the buyer gives the method on the hosted checkout: use POST /subscriptions to charge a saved one",
            ));
        }
    }
    let deps = subscriptions.deps();
    store::check_sandbox_room(&deps.db, caller, deps.sandbox_max).await?;
    let db = &deps.db;
    let now = deps.clock.now();
    let mut s = new_subscription(db, caller, &req, max_amount, now).await?;
    let mut cycle = new_cycle(&s, 1, now)?;
    super::cycles::taxed(deps, &s, &mut cycle, now).await?;
    let pid = cycle.payment_id.clone().unwrap_or_else(|| new_id("pay"));
    let payment = cycle_payment(&s, &cycle, true)?;
    let maker = payments::create::Maker::Subscription { payment_id: pid };
    let p = payments::create::create(&deps.payments, caller, payment, None, None, maker).await?;
    s.checkout_url = payments::api::Payment::render(&p, &deps.public_url)?.checkout_url;
    s.open_cycle_id = Some(cycle.id.clone());
    let created = vec![store::event(&s, "subscription_created")?];
    let due = store::next_due(&s, Some(&cycle), deps.confirm_within);
    store::insert(db, &s, Some(&cycle), created, due).await?;
    Ok(s)
}

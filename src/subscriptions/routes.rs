//! Handlers of the subscription routes. Changes go through the subscription's actor; reads go
//! to the store.

use actix_web::{web, HttpResponse};

use super::{
    actor::{Command, Exec, Subscriptions},
    api::{
        CancelRequest, Capabilities, ConfirmRequest, CreateSubscriptionRequest, Cycle, Cycles,
        Estimate, EstimateQuery, ListSubscriptionsQuery, ResumeRequest, Subscription,
        UpdateRequest,
    },
    create::{self, CreateError},
    cycles::SubscriptionError,
    estimate::{self, EstimateError},
    machine::Status,
    store,
};
use crate::{
    auth::{Caller, SecretKey},
    error::ApiError,
    fields::check_text,
    http::{ApiJson, ApiQuery, PathId},
    ids::SubscriptionId,
    pagination::{List, Page},
    payments::charge::ChargeError,
    state::AppState,
};

crate::http::routes! {
    "/subscriptions" => { post: create_subscription },
    "/subscriptions/create" => { post: create_for_checkout },
    "/subscriptions/list" => { get: list_subscriptions },
    "/subscriptions/estimate" => { get: estimate },
    "/subscriptions/{subscription_id}" => { get: retrieve_subscription },
    "/subscriptions/{subscription_id}/capabilities" => { get: capabilities },
    "/subscriptions/{subscription_id}/confirm" => { post: confirm_subscription },
    "/subscriptions/{subscription_id}/pause" => { post: pause_subscription },
    "/subscriptions/{subscription_id}/resume" => { post: resume_subscription },
    "/subscriptions/{subscription_id}/cancel" => { post: cancel_subscription },
    "/subscriptions/{subscription_id}/update" => { put: update_subscription },
    "/subscriptions/{subscription_id}/invoices" => { get: subscription_cycles },
    "/subscriptions/{subscription_id}/sync" => { post: sync_subscription },
}

impl From<SubscriptionError> for ApiError {
    #[track_caller]
    fn from(e: SubscriptionError) -> Self {
        match e {
            SubscriptionError::NotFound => {
                ApiError::not_found("subscription").param("subscription_id")
            }
            SubscriptionError::Refused(r) => ApiError::conflict("invalid_state", r.to_string()),
            SubscriptionError::LostRace => ApiError::concurrent_update("subscription"),
            SubscriptionError::Conflict(c) => c.into(),
            SubscriptionError::Overflow => {
                ApiError::invalid_param("items", "what a cycle charges, tax included, overflows")
            }
            SubscriptionError::PastCalendar => ApiError::conflict(
                "past_calendar",
                "the subscription's next period would end past the calendar's end",
            ),
            SubscriptionError::SandboxFull(max) => {
                ApiError::limit_reached("sandbox.max_subscriptions", max)
            }
            SubscriptionError::Charge(e) => match *e {
                ChargeError::Refused(e) => e.into(),
                e @ (ChargeError::Amount { .. } | ChargeError::Lines { .. }) => {
                    ApiError::conflict("cycle_unchargeable", e.to_string())
                }
            },
            SubscriptionError::Db(e) => e.into(),
        }
    }
}

impl From<CreateError> for ApiError {
    #[track_caller]
    fn from(e: CreateError) -> Self {
        let message = e.to_string();
        let item = |i: usize, field: &str| format!("items[{i}].{field}");
        match e {
            CreateError::ItemCount | CreateError::Free => ApiError::invalid_param("items", message),
            CreateError::Quantity { item: i } => {
                ApiError::invalid_param(&item(i, "quantity"), message)
            }
            CreateError::NoSuchPrice { item: i } => {
                ApiError::not_found("price").param(item(i, "price_id"))
            }
            CreateError::PriceArchived { item: i } => {
                ApiError::invalid("archived", message).param(item(i, "price_id"))
            }
            CreateError::NotRecurring { item: i } | CreateError::MixedTerms { item: i } => {
                ApiError::invalid_param(&item(i, "price_id"), message)
            }
            CreateError::TooLarge(_) => {
                ApiError::invalid("amount_too_large", message).param("items")
            }
            CreateError::NoSuchCustomer => ApiError::not_found("customer").param("customer_id"),
            CreateError::NoSuchMandate => ApiError::not_found("mandate").param("mandate_id"),
            CreateError::MandateOfAnother => ApiError::invalid_param("mandate_id", message),
            CreateError::MandateInactive => {
                ApiError::conflict("mandate_inactive", message).param("mandate_id")
            }
            CreateError::OtherMethod => ApiError::invalid_param("payment_method_id", message),
            CreateError::Payment(e) => e.into(),
            CreateError::Subscription(e) => e.into(),
            CreateError::Unanswered(e) => e.into(),
            CreateError::Db(e) => e.into(),
        }
    }
}

impl From<EstimateError> for ApiError {
    #[track_caller]
    fn from(e: EstimateError) -> Self {
        match e {
            EstimateError::NoSuchSubscription => ApiError::no_such::<SubscriptionId>(),
            // The plan's one item is the query's own fields.
            EstimateError::Plan(e) => {
                let mut e = ApiError::from(e);
                e.param = e
                    .param
                    .map(|p| p.trim_start_matches("items[0].").to_owned());
                e
            }
            EstimateError::OtherTerms => ApiError::invalid_param("price_id", e.to_string()),
            EstimateError::Subscription(e) => e.into(),
            EstimateError::Db(e) => e.into(),
        }
    }
}

pub(super) async fn run(
    subscriptions: &Subscriptions,
    caller: &Caller,
    id: &SubscriptionId,
    command: Command,
) -> Result<HttpResponse, ApiError> {
    let exec = Exec {
        scope: Some(caller.scope()),
        command,
        timeline: crate::clock::current(),
    };
    let s = subscriptions.send(id, exec).await??;
    Ok(HttpResponse::Ok().json(Subscription::render(&s)?))
}

async fn owned(
    state: &AppState,
    caller: &Caller,
    id: &SubscriptionId,
) -> Result<payd_entity::subscription::Model, ApiError> {
    crate::owned::find_owned(&state.db, id, &caller.scope())
        .await?
        .ok_or_else(ApiError::no_such::<SubscriptionId>)
}

/// Create a subscription and charge its first period at once.
///
/// Bills recurring prices of the shop (`items`) against the customer's saved method under an
/// active multi-use mandate of theirs (`mandate_id`); with `plan_id` instead, a billing
/// processor's plan, made at the processor, which collects each cycle. Billing is in advance:
/// the subscription is `created` until the first cycle is paid, then `active`; if that charge
/// fails it stays `created` and expires after `subscriptions.confirm_within_hours`.
///
/// The first cycle's payment announces its own payment events; `subscription_expired` follows
/// later if it is never paid, and each renewal announces `invoice_paid` or
/// `invoice_payment_failed`. Needs a secret key and a shop; a sandbox merchant holds at most
/// `sandbox.max_subscriptions` subscriptions that have not ended.
///
/// Fails: `shop_required` (400), `archived` (400), `amount_too_large` (400), `resource_missing` (404), `mandate_inactive` (409), `past_calendar` (409), `limit_reached` (409), `concurrent_update` (409).
///
/// Events: `subscription_active`, `invoice_paid`, `invoice_payment_failed`, `payment_succeeded`, `payment_failed`, `subscription_expired`.
#[utoipa::path(post, path = "/subscriptions", tag = "subscriptions",
    request_body = CreateSubscriptionRequest,
    responses((status = 201, body = Subscription), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody), (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn create_subscription(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    subscriptions: web::Data<Subscriptions>,
    ApiJson(req): ApiJson<CreateSubscriptionRequest>,
) -> Result<HttpResponse, ApiError> {
    created(&state, &subscriptions, &caller, req, false).await
}

/// Both creates: the request parsed (`checkout`: for the hosted checkout), the sandbox's
/// bound on subscriptions checked before anything is made.
async fn created(
    state: &AppState,
    subscriptions: &Subscriptions,
    caller: &Caller,
    req: CreateSubscriptionRequest,
    checkout: bool,
) -> Result<HttpResponse, ApiError> {
    let ask = req.parse(caller, checkout)?;
    let deps = subscriptions.deps();
    store::check_sandbox_room(&deps.db, caller, deps.sandbox_max)
        .await
        .map_err(SubscriptionError::from)?;
    let max = state.settings.limits.max_amount;
    let s = create::create(subscriptions, caller, ask, max).await?;
    Ok(HttpResponse::Created().json(Subscription::render(&s)?))
}

/// Create a subscription for the buyer to confirm on the hosted checkout.
///
/// Makes a `created` subscription and its first cycle's payment, and answers its
/// `checkout_url`. Paying there saves the buyer's card under a multi-use mandate, and the
/// subscription is `active` at the next look at the payment (every minute at first, at most
/// hourly later). Unpaid after `subscriptions.confirm_within_hours`, it expires and the
/// checkout's payment is cancelled.
///
/// Only `subscription_created` is sent at once; the other events follow the buyer's payment,
/// or its absence. Needs a secret key and a shop; a sandbox merchant holds at most
/// `sandbox.max_subscriptions` subscriptions that have not ended.
///
/// Fails: `shop_required` (400), `archived` (400), `amount_too_large` (400), `resource_missing` (404), `customer_redacted` (409), `cycle_unchargeable` (409), `past_calendar` (409), `limit_reached` (409).
///
/// Events: `subscription_created`, `payment_succeeded`, `mandate_active`, `subscription_active`, `invoice_paid`, `subscription_expired`, `payment_cancelled`.
#[utoipa::path(post, path = "/subscriptions/create", tag = "subscriptions",
    request_body = CreateSubscriptionRequest,
    responses((status = 201, body = Subscription), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn create_for_checkout(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    subscriptions: web::Data<Subscriptions>,
    ApiJson(req): ApiJson<CreateSubscriptionRequest>,
) -> Result<HttpResponse, ApiError> {
    created(&state, &subscriptions, &caller, req, true).await
}

/// Confirm a `created` subscription with a saved method under a mandate.
///
/// Charges the first cycle under an active multi-use mandate of the subscription's customer
/// instead of the hosted checkout, whose payment is cancelled first; if the buyer paid it
/// meanwhile, that payment is the first cycle's. Paid, the subscription is `active`; declined,
/// it stays `created`. A subscription in any other status is refused with `invalid_state`.
/// Needs a secret key.
///
/// Fails: `resource_missing` (404), `mandate_inactive` (409), `invalid_state` (409), `concurrent_update` (409).
///
/// Events: `subscription_active`, `invoice_paid`, `invoice_payment_failed`, `payment_succeeded`, `payment_failed`, `payment_cancelled`.
#[utoipa::path(post, path = "/subscriptions/{subscription_id}/confirm", tag = "subscriptions",
    params(("subscription_id" = String, Path)), request_body = ConfirmRequest,
    responses((status = 200, body = Subscription), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody), (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn confirm_subscription(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    subscriptions: web::Data<Subscriptions>,
    PathId(id): PathId<crate::ids::SubscriptionId>,
    ApiJson(req): ApiJson<ConfirmRequest>,
) -> Result<HttpResponse, ApiError> {
    let s = owned(&state, &caller, &id).await?;
    let m =
        create::check_mandate(&state.db, &caller.scope(), &s.customer_id, &req.mandate_id).await?;
    let command = Command::Confirm {
        mandate: (m.id, m.payment_method_id),
    };
    run(&subscriptions, &caller, &id, command).await
}

/// What a plan would charge first, or a subscription's next renewal.
///
/// With `price_id` (and `quantity`): a new plan's first charge and period, in the request's
/// shop. With `subscription_id`: its next renewal, pending prorations included. With both: a
/// plan change, its proration for the rest of the period under `create_prorations` and the
/// renewal after it. With `plan_id`: a billing processor's plan. Computed as the renewal
/// computes it; nothing is stored. Needs a secret key.
///
/// Fails: `shop_required` (400), `archived` (400), `amount_too_large` (400), `resource_missing` (404), `past_calendar` (409).
///
/// Events: none.
#[utoipa::path(get, path = "/subscriptions/estimate", tag = "subscriptions", params(EstimateQuery),
    responses((status = 200, body = Estimate), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn estimate(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    ApiQuery(q): ApiQuery<EstimateQuery>,
) -> Result<HttpResponse, ApiError> {
    let ask = q.parse(&caller)?;
    let max = state.settings.limits.max_amount;
    let out = estimate::estimate(&state.db, &caller.scope(), ask, max, state.clock.now()).await?;
    Ok(HttpResponse::Ok().json(out))
}

/// List subscriptions, newest first.
///
/// Lists the subscriptions the key reaches, filtered by `customer_id`, `status` and
/// `profile_id`, one page at a time (`limit`, `starting_after`, `ending_before`). Needs a
/// secret key.
///
/// Fails: `resource_missing` (400), `profile_mismatch` (403).
///
/// Events: none.
#[utoipa::path(get, path = "/subscriptions/list", tag = "subscriptions",
    params(ListSubscriptionsQuery),
    responses((status = 200, body = List<Subscription>), (status = 400, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn list_subscriptions(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    ApiQuery(q): ApiQuery<ListSubscriptionsQuery>,
) -> Result<HttpResponse, ApiError> {
    let page = Page::parse::<crate::ids::SubscriptionId>(&q.page_query())?;
    if let Some(s) = q.status.as_deref().filter(|s| Status::parse(s).is_none()) {
        return Err(ApiError::invalid_param(
            "status",
            format!("unknown status {s:?}"),
        ));
    }
    let shop = caller.scope().list_shop(q.profile_id.as_deref())?;
    let list = store::list(
        &state.db,
        caller.merchant_id.as_str(),
        caller.test_mode(),
        shop.as_deref(),
        &q,
        &page,
    )
    .await?;
    Ok(HttpResponse::Ok().json(list.try_map(|s| Subscription::render(&s))?))
}

/// Retrieve a subscription.
///
/// Answers the subscription: its status, items, amount, current period, pending prorations,
/// mandate and who bills it. One of another shop, merchant or mode reads as missing. Needs a
/// secret key.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/subscriptions/{subscription_id}", tag = "subscriptions",
    params(("subscription_id" = String, Path)),
    responses((status = 200, body = Subscription), (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn retrieve_subscription(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::SubscriptionId>,
) -> Result<HttpResponse, ApiError> {
    let s = owned(&state, &caller, &id).await?;
    Ok(HttpResponse::Ok().json(Subscription::render(&s)?))
}

/// What can be done with the subscription now.
///
/// Answers the actions its status allows now, of `pause`, `resume`, `cancel` and
/// `cancel_at_period_end`, and `sync` for a subscription a billing processor bills, so a
/// client offers only what will not be refused. Needs a secret key.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/subscriptions/{subscription_id}/capabilities", tag = "subscriptions",
    params(("subscription_id" = String, Path)),
    responses((status = 200, body = Capabilities), (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn capabilities(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::SubscriptionId>,
) -> Result<HttpResponse, ApiError> {
    let s = owned(&state, &caller, &id).await?;
    let status = s.status;
    let mut actions: Vec<String> = super::machine::actions(status, s.cancel_at_period_end)
        .into_iter()
        .map(str::to_owned)
        .collect();
    // A billing processor's subscription changes plan at the processor, then syncs.
    if s.billing != store::Biller::Payd && !status.is_final() {
        actions.push("sync".into());
    }
    Ok(HttpResponse::Ok().json(Capabilities {
        subscription_id: s.id.into(),
        billing: s.billing.to_string(),
        actions,
    }))
}

/// Pause an active subscription: its periods pass without a charge until it resumes.
///
/// Moves an `active` subscription to `paused`; a cancellation scheduled for the period's end
/// stays scheduled, and the retries of a failed cycle wait for the resume. One a billing
/// processor bills is paused at the processor too. Any other status is refused with
/// `invalid_state`. Needs a secret key.
///
/// Fails: `resource_missing` (404), `invalid_state` (409), `concurrent_update` (409).
///
/// Events: `subscription_paused`.
#[utoipa::path(post, path = "/subscriptions/{subscription_id}/pause", tag = "subscriptions",
    params(("subscription_id" = String, Path)),
    responses((status = 200, body = Subscription), (status = 404, body = crate::error::ErrorBody),
        (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn pause_subscription(
    SecretKey(caller): SecretKey,
    subscriptions: web::Data<Subscriptions>,
    PathId(id): PathId<crate::ids::SubscriptionId>,
) -> Result<HttpResponse, ApiError> {
    run(&subscriptions, &caller, &id, Command::Pause).await
}

/// Resume a paused or unpaid subscription, or undo a scheduled cancellation.
///
/// A `paused` subscription becomes `active`; an `active` one's cancellation at period end is
/// undone; an `unpaid` one's open cycle is charged again at once, under `mandate_id` if given
/// (an active multi-use mandate of the same customer). A resume charges at most one period,
/// the one that starts with it; periods spent paused or unpaid are never charged. The charge,
/// if any, announces its payment and the cycle's outcome. Needs a secret key.
///
/// Fails: `resource_missing` (404), `mandate_inactive` (409), `invalid_state` (409), `past_calendar` (409), `concurrent_update` (409).
///
/// Events: `subscription_resumed`, `invoice_paid`, `invoice_payment_failed`, `subscription_past_due`, `payment_succeeded`, `payment_failed`.
#[utoipa::path(post, path = "/subscriptions/{subscription_id}/resume", tag = "subscriptions",
    params(("subscription_id" = String, Path)),
    request_body(content = ResumeRequest, description = "optional"),
    responses((status = 200, body = Subscription), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody), (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn resume_subscription(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    subscriptions: web::Data<Subscriptions>,
    PathId(id): PathId<crate::ids::SubscriptionId>,
    ApiJson(req): ApiJson<ResumeRequest>,
) -> Result<HttpResponse, ApiError> {
    let mandate = match &req.mandate_id {
        Some(m) => {
            let s = owned(&state, &caller, &id).await?;
            let m = create::check_mandate(&state.db, &caller.scope(), &s.customer_id, m).await?;
            Some((m.id, m.payment_method_id))
        }
        None => None,
    };
    run(&subscriptions, &caller, &id, Command::Resume { mandate }).await
}

/// Cancel a subscription now, or at the end of the current period.
///
/// Now: the subscription is `cancelled`, and an open cycle not being charged becomes `void`.
/// With `at_period_end`: an `active` or `paused` subscription runs to the end of its period
/// and is then cancelled without a new cycle, announced again then. A `reason` of at most 500
/// characters is kept. A subscription that has ended, or a cancellation at period end that is
/// already scheduled or of a subscription not `active` or `paused`, is refused with
/// `invalid_state`. Needs a secret key.
///
/// Fails: `resource_missing` (404), `invalid_state` (409), `concurrent_update` (409).
///
/// Events: `subscription_cancelled`.
#[utoipa::path(post, path = "/subscriptions/{subscription_id}/cancel", tag = "subscriptions",
    params(("subscription_id" = String, Path)), request_body = CancelRequest,
    responses((status = 200, body = Subscription), (status = 404, body = crate::error::ErrorBody),
        (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn cancel_subscription(
    SecretKey(caller): SecretKey,
    subscriptions: web::Data<Subscriptions>,
    PathId(id): PathId<crate::ids::SubscriptionId>,
    ApiJson(req): ApiJson<CancelRequest>,
) -> Result<HttpResponse, ApiError> {
    let reason = check_text("reason", req.reason.as_ref(), 500)?;
    let command = Command::Cancel {
        at_period_end: req.at_period_end,
        reason,
    };
    run(&subscriptions, &caller, &id, command).await
}

/// Change the plan: new items of the same currency and interval, from now on.
///
/// Replaces the items; `proration` settles the rest of the period: `create_prorations`
/// (default) adds the difference to the next renewal, `always_invoice` charges it now as a
/// cycle of its own (a credit goes to the next renewal), `none` leaves it. Only an `active`
/// subscription with no cycle being collected changes plan (`invalid_state`); one a billing
/// processor bills changes plan there, then syncs (`processor_billing`). Events come only from
/// a charge made by `always_invoice`. Needs a secret key.
///
/// Fails: `archived` (400), `amount_too_large` (400), `resource_missing` (404), `processor_billing` (409), `invalid_state` (409), `past_calendar` (409), `concurrent_update` (409).
///
/// Events: `invoice_paid`, `invoice_payment_failed`, `payment_succeeded`, `payment_failed`.
#[utoipa::path(put, path = "/subscriptions/{subscription_id}/update", tag = "subscriptions",
    params(("subscription_id" = String, Path)), request_body = UpdateRequest,
    responses((status = 200, body = Subscription), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody), (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn update_subscription(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    subscriptions: web::Data<Subscriptions>,
    PathId(id): PathId<crate::ids::SubscriptionId>,
    ApiJson(req): ApiJson<UpdateRequest>,
) -> Result<HttpResponse, ApiError> {
    let proration = req.proration()?;
    let s = owned(&state, &caller, &id).await?;
    if s.billing != store::Biller::Payd {
        return Err(processor_billed());
    }
    let max = state.settings.limits.max_amount;
    let plan = create::plan(
        &state.db,
        &caller.scope(),
        &s.profile_id,
        &req.items,
        max,
        state.clock.now(),
    )
    .await?;
    if !plan.keeps_terms_of(&s) {
        return Err(ApiError::invalid_param(
            "items",
            format!(
                "a plan change keeps the subscription's currency and interval ({} every {} {})",
                s.currency, s.interval_count, s.interval
            ),
        ));
    }
    let command = Command::Update {
        items: plan.items,
        amount: plan.amount,
        proration,
    };
    run(&subscriptions, &caller, &id, command).await
}

/// Cycles one answer shows.
const MAX_CYCLES: usize = 100;

/// The subscription's billing cycles, newest first (the newest 100).
///
/// Answers each cycle with its period, amount, `kind` (`period` or `proration`), status
/// (`open`, `paid`, `void`), attempts, next attempt and the payment of its last attempt (a
/// cycle the billing processor collected names the processor's invoice instead), and
/// `has_more` past 100. Needs a secret key.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/subscriptions/{subscription_id}/invoices", tag = "subscriptions",
    params(("subscription_id" = String, Path)),
    responses((status = 200, body = Cycles), (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn subscription_cycles(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::SubscriptionId>,
) -> Result<HttpResponse, ApiError> {
    let s = owned(&state, &caller, &id).await?;
    let all = store::cycles(&state.db, &s.id).await?;
    let data = all
        .iter()
        .take(MAX_CYCLES)
        .map(|c| Cycle::render(c, s.test_mode))
        .collect::<Result<_, _>>()?;
    Ok(HttpResponse::Ok().json(Cycles {
        data,
        has_more: all.len() > MAX_CYCLES,
    }))
}

/// A processor-billed subscription changes plan at its processor.
fn processor_billed() -> ApiError {
    ApiError::conflict(
        "processor_billing",
        "a billing processor bills this subscription: change its plan at the processor, then POST …/sync",
    )
}

/// Read the subscription again from the side that bills it and apply what differs.
///
/// For a subscription a billing processor bills: the processor's status, plan and quantity,
/// applied where they differ, each status change announced as if made here. For one payd
/// bills: a charge still in flight is settled, with the events of its outcome. When nothing
/// differs, nothing changes. Needs a secret key.
///
/// Fails: `resource_missing` (404), `concurrent_update` (409).
///
/// Events: `subscription_cancelled`, `subscription_paused`, `subscription_resumed`, `subscription_active`, `subscription_past_due`, `invoice_paid`, `invoice_payment_failed`, `payment_succeeded`, `payment_failed`.
#[utoipa::path(post, path = "/subscriptions/{subscription_id}/sync", tag = "subscriptions",
    params(("subscription_id" = String, Path)),
    responses((status = 200, body = Subscription), (status = 404, body = crate::error::ErrorBody),
        (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn sync_subscription(
    SecretKey(caller): SecretKey,
    subscriptions: web::Data<Subscriptions>,
    PathId(id): PathId<crate::ids::SubscriptionId>,
) -> Result<HttpResponse, ApiError> {
    run(&subscriptions, &caller, &id, Command::Sync).await
}

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
            SubscriptionError::Charge(e) => (*e).into(),
            SubscriptionError::Unchargeable(_) => {
                ApiError::conflict("cycle_unchargeable", e.to_string())
            }
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
    store::find_owned(&state.db, id, &caller.scope())
        .await?
        .ok_or_else(ApiError::no_such::<SubscriptionId>)
}

/// Create a subscription and charge its first period at once (billing is in advance) against
/// the customer's saved method under a multi-use mandate. Active once that charge is paid; if
/// it fails, the subscription stays `created` and expires after
/// `subscriptions.confirm_within_hours`.
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

/// Create a subscription for the buyer to confirm on the hosted checkout (`checkout_url`):
/// paying the first cycle there saves the card under a multi-use mandate, and the
/// subscription is active. Unconfirmed after `subscriptions.confirm_within_hours`, it expires.
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

/// Confirm a `created` subscription with a saved method under a multi-use mandate of its
/// customer (instead of the hosted checkout, whose payment is cancelled).
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

/// What a plan would charge first, or a subscription's next renewal — computed as the
/// renewal computes it; nothing is stored.
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
    let status = Status::parse(&s.status).unwrap_or(Status::Cancelled);
    let mut actions: Vec<String> = super::machine::actions(status, s.cancel_at_period_end)
        .into_iter()
        .map(str::to_owned)
        .collect();
    // A billing processor's subscription changes plan at the processor, then syncs.
    if s.billing != store::PAYD && !status.is_final() {
        actions.push("sync".into());
    }
    Ok(HttpResponse::Ok().json(Capabilities {
        subscription_id: s.id,
        billing: s.billing,
        actions,
    }))
}

/// Pause an active subscription: its periods pass without a charge until it resumes.
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

/// Resume a paused subscription, undo a cancellation scheduled for the period's end, or try
/// an unpaid subscription's open cycle again.
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

/// Cancel now, or at the end of the current period (`at_period_end`).
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

/// Change the plan: new items of the same currency and interval, from now on. `proration`
/// settles the rest of the period: `create_prorations` (default) adds the difference to the
/// next renewal, `always_invoice` charges it now (a credit goes to the next renewal), `none`
/// leaves it.
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
    if s.billing != store::PAYD {
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

/// Read the subscription again from the side that bills it and apply what differs: a billing
/// processor's status, plan and quantity (status changes announced as if made here), or a
/// charge of payd's own still in flight.
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

//! Handlers of the billing processor's routes: its plans, adopting and importing its
//! subscriptions, and the sandbox processor's triggers. The subscriptions they make are then
//! changed through their actors like any other (`routes.rs`).

use actix_web::{web, HttpResponse};

use super::{
    actor::{Command, Subscriptions},
    adopt,
    api::{
        check_quantity, AdoptRequest, ApplyImportRequest, ProcessorItems, SandboxProcessorChange,
        SandboxProcessorSubscription, Subscription,
    },
    billing, plans,
    routes::run,
    store,
};
use crate::{
    auth::{self, Caller, SecretKey},
    error::ApiError,
    fields::{check_text, parse_id},
    http::{ApiJson, PathId},
    ids::ProcessorSubscriptionId,
    state::AppState,
};

// Literal paths: mounted before `/subscriptions/{subscription_id}` (see the folder's `mount`).
crate::http::routes! {
    "/subscriptions/items" => { get: processor_items },
    "/subscriptions/adopt" => { post: adopt_subscription },
    "/subscriptions/import/preview" => { post: import_preview },
    "/subscriptions/import/apply" => { post: import_apply },
    "/sandbox/billing/subscriptions" => { post: sandbox_processor_subscription },
    "/sandbox/billing/subscriptions/{processor_subscription_id}" => { post: sandbox_processor_change },
    "/sandbox/billing/invoices/{processor_invoice_id}/chargeback" => { post: sandbox_chargeback },
}

impl From<adopt::AdoptError> for ApiError {
    #[track_caller]
    fn from(e: adopt::AdoptError) -> Self {
        use adopt::AdoptError;
        let message = e.to_string();
        let param = "processor_subscription_id";
        match e {
            AdoptError::NoSuchProcessorSubscription => {
                ApiError::not_found("processor subscription").param(param)
            }
            AdoptError::Cancelled => {
                ApiError::conflict("processor_subscription_cancelled", message).param(param)
            }
            AdoptError::AlreadyAdopted => {
                ApiError::conflict("already_adopted", message).param(param)
            }
            AdoptError::NoSuchCustomer => ApiError::not_found("customer").param("customer_id"),
            AdoptError::NoSuchPreview => ApiError::not_found("import preview").param("preview_id"),
            AdoptError::Subscription(e) => e.into(),
            AdoptError::Commit(e) => e.into(),
            AdoptError::Db(e) => e.into(),
        }
    }
}

/// The billing processor's plans and add-ons.
#[utoipa::path(get, path = "/subscriptions/items", tag = "subscriptions",
    responses((status = 200, body = ProcessorItems)),
    security(("api_key" = [])))]
pub async fn processor_items(SecretKey(_caller): SecretKey) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(ProcessorItems {
        processor: plans::NAME.to_owned(),
        data: plans::ITEMS.to_vec(),
    }))
}

/// Take over a subscription that exists at the billing processor: it keeps the processor's
/// status, plan and period, the processor collects each cycle (`invoice_paid` with `payment:
/// null`), and payd renews, follows and announces it. Once per processor subscription.
#[utoipa::path(post, path = "/subscriptions/adopt", tag = "subscriptions",
    request_body = AdoptRequest,
    responses((status = 201, body = Subscription), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody), (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn adopt_subscription(
    SecretKey(caller): SecretKey,
    subscriptions: web::Data<Subscriptions>,
    ApiJson(req): ApiJson<AdoptRequest>,
) -> Result<HttpResponse, ApiError> {
    let shop = caller.require_shop()?;
    let s = adopt::adopt(
        &subscriptions,
        &caller,
        shop,
        &req.processor_subscription_id,
        req.customer_id.as_deref(),
    )
    .await?;
    Ok(HttpResponse::Created().json(Subscription::render(&s)?))
}

/// List the shop's subscriptions at the billing processor that an apply would adopt, and keep
/// that set under a `preview_id`.
#[utoipa::path(post, path = "/subscriptions/import/preview", tag = "subscriptions",
    responses((status = 200, body = adopt::ImportPreview), (status = 400, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn import_preview(
    SecretKey(caller): SecretKey,
    subscriptions: web::Data<Subscriptions>,
) -> Result<HttpResponse, ApiError> {
    let shop = caller.require_shop()?;
    Ok(HttpResponse::Ok().json(adopt::preview(&subscriptions, &caller, shop).await?))
}

/// Adopt exactly the subscriptions a preview listed. Idempotent: applying again adopts
/// nothing and answers the same subscriptions.
#[utoipa::path(post, path = "/subscriptions/import/apply", tag = "subscriptions",
    request_body = ApplyImportRequest,
    responses((status = 200, body = adopt::ImportApplied), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn import_apply(
    SecretKey(caller): SecretKey,
    subscriptions: web::Data<Subscriptions>,
    ApiJson(req): ApiJson<ApplyImportRequest>,
) -> Result<HttpResponse, ApiError> {
    let shop = caller.require_shop()?;
    let applied = adopt::apply(&subscriptions, &caller, shop, &req.preview_id).await?;
    Ok(HttpResponse::Ok().json(applied))
}

/// The sandbox billing processor's shop-bound view of one of its subscriptions.
async fn processor_subscription(
    subscriptions: &Subscriptions,
    caller: &Caller,
    id: &str,
) -> Result<payd_entity::billing_subscription::Model, ApiError> {
    let found = subscriptions
        .deps()
        .billing
        .find(&caller.scope(), id)
        .await?;
    found.ok_or_else(ApiError::no_such::<ProcessorSubscriptionId>)
}

fn check_plan(plan_id: &str) -> Result<(), ApiError> {
    plans::plan(plan_id).map(|_| ()).ok_or_else(|| {
        ApiError::invalid_param(
            "plan_id",
            format!("unknown plan {plan_id:?}; see GET /subscriptions/items"),
        )
    })
}

/// Sandbox: a subscription made at the billing processor, in the caller's shop, its first
/// period starting now — to adopt or import.
#[utoipa::path(post, path = "/sandbox/billing/subscriptions", tag = "sandbox",
    request_body = SandboxProcessorSubscription,
    responses((status = 201, body = adopt::ProcessorSubscription), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn sandbox_processor_subscription(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    subscriptions: web::Data<Subscriptions>,
    ApiJson(req): ApiJson<SandboxProcessorSubscription>,
) -> Result<HttpResponse, ApiError> {
    auth::sandbox_only(&state, &caller)?;
    let shop = caller.require_shop()?.to_string();
    let name = check_text("customer_name", Some(&req.customer_name), 200)?.unwrap_or_default();
    if name.trim().is_empty() {
        return Err(ApiError::invalid_param(
            "customer_name",
            "customer_name must not be empty",
        ));
    }
    let email = check_text("customer_email", req.customer_email.as_ref(), 200)?;
    check_plan(&req.plan_id)?;
    check_quantity(req.quantity)?;
    let plan = plans::plan(&req.plan_id).ok_or_else(|| ApiError::internal("plan checked"))?;
    let new = billing::NewSubscription {
        customer_name: name,
        customer_email: email,
        plan,
        quantity: req.quantity,
        declines: req.declines,
    };
    let p = subscriptions
        .deps()
        .billing
        .create(&caller.scope(), &shop, new, state.clock.now())
        .await?;
    Ok(HttpResponse::Created().json(adopt::ProcessorSubscription::render(&p, None)))
}

/// The change a sandbox billing processor's subscription is asked for, checked.
fn processor_change(req: SandboxProcessorChange) -> Result<billing::ProcessorChange, ApiError> {
    let status = match req.status.as_deref() {
        None => None,
        Some("active") => Some("active"),
        Some("paused") => Some("paused"),
        Some("cancelled") => Some("cancelled"),
        Some(other) => {
            return Err(ApiError::invalid_param(
                "status",
                format!("unknown status {other:?}; active, paused or cancelled"),
            ))
        }
    };
    if let Some(plan) = &req.plan_id {
        check_plan(plan)?;
    }
    if let Some(q) = req.quantity {
        check_quantity(q)?;
    }
    Ok(billing::ProcessorChange {
        status,
        plan_id: req.plan_id,
        quantity: req.quantity,
        declines: req.declines,
    })
}

/// Sandbox: a change made at the billing processor (its status, plan, quantity, or whether
/// its card declines). payd learns of it on `POST /subscriptions/{id}/sync`.
#[utoipa::path(post, path = "/sandbox/billing/subscriptions/{processor_subscription_id}", tag = "sandbox",
    params(("processor_subscription_id" = String, Path)),
    request_body = SandboxProcessorChange,
    responses((status = 200, body = adopt::ProcessorSubscription), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn sandbox_processor_change(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    subscriptions: web::Data<Subscriptions>,
    PathId(id): PathId<crate::ids::ProcessorSubscriptionId>,
    ApiJson(req): ApiJson<SandboxProcessorChange>,
) -> Result<HttpResponse, ApiError> {
    auth::sandbox_only(&state, &caller)?;
    let p = processor_subscription(&subscriptions, &caller, &id).await?;
    let change = processor_change(req)?;
    let p = subscriptions
        .deps()
        .billing
        .change(&p, &change, state.clock.now())
        .await?;
    let adopted = store::by_processor_subscription(&state.db, &p.id).await?;
    Ok(
        HttpResponse::Ok().json(adopt::ProcessorSubscription::render(
            &p,
            adopted.map(|s| s.id),
        )),
    )
}

/// Sandbox: the buyer charges back an invoice the billing processor collected. The
/// subscription that adopted it announces `invoice_disputed`.
#[utoipa::path(post, path = "/sandbox/billing/invoices/{processor_invoice_id}/chargeback", tag = "sandbox",
    params(("processor_invoice_id" = String, Path)),
    responses((status = 200, body = Subscription), (status = 404, body = crate::error::ErrorBody),
        (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn sandbox_chargeback(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    subscriptions: web::Data<Subscriptions>,
    PathId(invoice_id): PathId<crate::ids::ProcessorInvoiceId>,
) -> Result<HttpResponse, ApiError> {
    auth::sandbox_only(&state, &caller)?;
    let deps = subscriptions.deps();
    let missing = || ApiError::not_found("invoice").param("processor_invoice_id");
    let invoice = deps
        .billing
        .invoice(&invoice_id)
        .await?
        .ok_or_else(missing)?;
    processor_subscription(&subscriptions, &caller, &invoice.billing_subscription_id)
        .await
        .map_err(|_| missing())?;
    let s = store::by_processor_subscription(&state.db, &invoice.billing_subscription_id)
        .await?
        .ok_or_else(missing)?;
    if invoice.status != "paid" || invoice.dispute_id.is_some() {
        return Err(ApiError::conflict(
            "invoice_not_disputable",
            "only a paid invoice not charged back yet can be charged back",
        )
        .param("invoice_id"));
    }
    deps.billing.chargeback(&invoice, state.clock.now()).await?;
    run(
        &subscriptions,
        &caller,
        &parse_id(&s.id)?,
        Command::InvoiceDisputed {
            invoice_id: invoice.id,
        },
    )
    .await
}

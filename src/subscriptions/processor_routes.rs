//! Handlers of the billing processor's routes: its plans, adopting and importing its
//! subscriptions, and the sandbox processor's triggers. The subscriptions they make are then
//! changed through their actors like any other (`routes.rs`).

use actix_web::{web, HttpResponse};
use payd_model::subscriptions::{ProcessorInvoiceStatus, ProcessorStatus};

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
///
/// Lists the sandbox billing processor's items, each with its type, name, unit amount,
/// currency and interval: what `plan_id` names when subscribing or estimating. The list is
/// fixed and the same for every merchant. Needs a secret key.
///
/// Fails: none beyond the common errors.
///
/// Events: none.
#[utoipa::path(get, path = "/subscriptions/items", tag = "subscriptions",
    responses((status = 200, body = ProcessorItems)),
    security(("api_key" = [])))]
pub async fn processor_items(SecretKey(_caller): SecretKey) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(ProcessorItems {
        processor: plans::NAME.to_string(),
        data: plans::ITEMS.to_vec(),
    }))
}

/// Take over a subscription that exists at the billing processor.
///
/// Makes a payd subscription that keeps the processor's status, plan and period: the processor
/// collects each cycle (`invoice_paid` with `payment: null`), and payd renews, follows and
/// announces it. Without `customer_id`, a customer is made from the processor's. Once per
/// processor subscription; a cancelled one cannot be adopted.
///
/// The adoption is announced in the state it is in; the cycle events follow at each renewal.
/// Needs a secret key and a shop; a sandbox merchant holds at most `sandbox.max_subscriptions`
/// subscriptions that have not ended.
///
/// Fails: `shop_required` (400), `resource_missing` (404), `processor_subscription_cancelled` (409), `already_adopted` (409), `limit_reached` (409).
///
/// Events: `subscription_active`, `subscription_paused`, `invoice_paid`, `invoice_payment_failed`.
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

/// List the shop's processor subscriptions an import would adopt.
///
/// Answers the shop's subscriptions at the billing processor that are neither cancelled nor
/// adopted yet, and those already adopted, and keeps the first set under a `preview_id` for
/// `POST /subscriptions/import/apply`. Nothing is adopted. Needs a secret key and a shop.
///
/// Fails: `shop_required` (400).
///
/// Events: none.
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

/// Adopt exactly the subscriptions a preview listed.
///
/// Adopts each subscription of the preview's set as `POST /subscriptions/adopt` would,
/// skipping those cancelled at the processor since. Idempotent: applying again adopts nothing
/// and answers the same subscriptions. Each adoption is announced in the state it is in; the
/// cycle events follow at each renewal. Needs a secret key and the preview's shop.
///
/// Fails: `shop_required` (400), `resource_missing` (404), `limit_reached` (409).
///
/// Events: `subscription_active`, `subscription_paused`, `invoice_paid`, `invoice_payment_failed`.
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
    id: &ProcessorSubscriptionId,
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

/// Sandbox: make a subscription at the billing processor, to adopt or import.
///
/// Makes a subscription to `plan_id` at the sandbox billing processor, in the request's shop,
/// its first period starting now; `declines` makes its card decline every collection. payd
/// does not follow it until it is adopted or imported. Test key of a sandbox deployment only:
/// any other key gets 404.
///
/// Fails: `shop_required` (400), `resource_missing` (404).
///
/// Events: none.
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
    let shop = caller.require_shop()?.clone();
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
    let status = req
        .status
        .as_deref()
        .map(|s| {
            ProcessorStatus::parse(s).ok_or_else(|| {
                ApiError::invalid_param(
                    "status",
                    format!("unknown status {s:?}; active, paused or cancelled"),
                )
            })
        })
        .transpose()?;
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

/// Sandbox: change a subscription at the billing processor.
///
/// Changes the processor's subscription as its owner would there: its `status` (`active`,
/// `paused` or `cancelled`), `plan_id`, `quantity`, or whether its card `declines`. payd
/// learns of it on `POST /subscriptions/{subscription_id}/sync`, which announces a status
/// change. Test key of a sandbox deployment only: any other key gets 404.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
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
            adopted.map(|s| s.id).map(String::from),
        )),
    )
}

/// Sandbox: the buyer charges back an invoice the billing processor collected.
///
/// Opens a dispute at the processor on a `paid` processor invoice not charged back yet; the
/// payd subscription that adopted it announces it, and is answered. Test key of a sandbox
/// deployment only: any other key gets 404.
///
/// Fails: `resource_missing` (404), `invoice_not_disputable` (409), `concurrent_update` (409).
///
/// Events: `invoice_disputed`.
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
    if invoice.status != ProcessorInvoiceStatus::Paid || invoice.dispute_id.is_some() {
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

//! Handlers of the payment routes.

use actix_web::{web, HttpRequest, HttpResponse};
use payd_entity::payment;

use super::{
    actor::{run, Access, Command, Patch, PaymentError, Payments},
    api::{
        for_buyer, lines_of, parse_line_items, parse_return_url, state_of, Attempt,
        CancelPaymentRequest, CaptureMethodDto, CapturePaymentRequest, ConfirmPaymentRequest,
        CreatePaymentRequest, LineBalance, ListPaymentsRequest, Payment, RetrieveQuery,
        RoutingDecisionView, StatusChange, UpdatePaymentRequest,
    },
    create::{self, CreateError},
    machine::Status,
    refunds, store,
};
use crate::{
    auth::{AnyKey, Caller, KeyKind, SecretKey},
    error::ApiError,
    fields::{check_metadata, check_text, parse_amount, parse_currency, Items},
    http::{ApiJson, ApiQuery, PathId},
    idempotency,
    pagination::{List, Page},
    state::AppState,
};

crate::http::routes! {
    "/payments" => { post: create_payment },
    "/payments/list" => { post: list_payments },
    "/payments/{payment_id}" => { get: retrieve_payment, post: update_payment },
    "/payments/{payment_id}/confirm" => { post: confirm_payment },
    "/payments/{payment_id}/capture" => { post: capture_payment },
    "/payments/{payment_id}/cancel" => { post: cancel_payment },
    "/payments/{payment_id}/attempts" => { get: list_attempts },
    "/payments/{payment_id}/status-history" => { get: status_history },
    "/payments/{payment_id}/lines" => { get: payment_lines },
    "/payments/{payment_id}/routing-decisions" => { get: routing_decisions },
}

impl From<PaymentError> for ApiError {
    #[track_caller]
    fn from(e: PaymentError) -> Self {
        match e {
            PaymentError::NotFound => ApiError::no_such::<crate::ids::PaymentId>(),
            PaymentError::Forbidden => ApiError::forbidden(
                "client_secret_mismatch",
                "the client_secret does not belong to this payment",
            )
            .param("client_secret"),
            PaymentError::SecretRequired => {
                ApiError::forbidden("client_secret_required", e.to_string()).param("client_secret")
            }
            PaymentError::Refused(r) => match r {
                crate::payments::machine::Refusal::InvalidState(_) => {
                    ApiError::conflict("invalid_state", r.to_string())
                }
                crate::payments::machine::Refusal::AmountNotPositive => {
                    ApiError::invalid("amount_not_positive", r.to_string()).param("amount")
                }
                crate::payments::machine::Refusal::AmountExceedsCapturable(_) => {
                    ApiError::invalid("amount_exceeds_capturable", r.to_string()).param("amount")
                }
                crate::payments::machine::Refusal::DisputeOpen(_) => {
                    ApiError::conflict("dispute_open", r.to_string()).param("payment_id")
                }
                crate::payments::machine::Refusal::RefundExists => {
                    ApiError::conflict("refund_exists", r.to_string()).param("payment_id")
                }
                crate::payments::machine::Refusal::VoidWindowClosed
                | crate::payments::machine::Refusal::CaptureNotVoidable => {
                    ApiError::conflict("invalid_state", r.to_string())
                }
            },
            PaymentError::PaymentMethodRequired => {
                ApiError::invalid("payment_method_required", e.to_string())
                    .param("payment_method_data")
            }
            PaymentError::MandateNotFound => ApiError::not_found("mandate").param("mandate_id"),
            PaymentError::Mandate(r) => r.into(),
            PaymentError::CatalogLinesFixed(ref param) => {
                ApiError::invalid_param(param, e.to_string())
            }
            PaymentError::LinesMismatch { .. } => {
                ApiError::invalid("lines_amount_mismatch", e.to_string()).param("lines")
            }
            PaymentError::StoredLinesMismatch { .. } => {
                ApiError::invalid("lines_amount_mismatch", e.to_string()).param("amount")
            }
            PaymentError::Unanswered(e) => e.into(),
            PaymentError::Internal(what) => ApiError::internal(what),
            PaymentError::RefundNotFound => ApiError::not_found("refund"),
            PaymentError::RefundRefused(r) => match r {
                crate::payments::refunds::Refusal::InvalidState(_) => {
                    ApiError::conflict("invalid_state", r.to_string())
                }
                crate::payments::refunds::Refusal::DisputeOpen { .. } => {
                    ApiError::conflict("dispute_open", r.to_string()).param("payment_id")
                }
                crate::payments::refunds::Refusal::ExceedsRefundable { .. }
                | crate::payments::refunds::Refusal::LineAmountExceeded { .. } => {
                    let mut e = ApiError::invalid("amount_exceeds_refundable", r.to_string());
                    e.param = r.param().map(str::to_owned);
                    e
                }
                _ => {
                    let mut e = ApiError::invalid("parameter_invalid", r.to_string());
                    e.param = r.param().map(str::to_owned);
                    e
                }
            },
            PaymentError::LostRace => ApiError::concurrent_update("payment"),
            PaymentError::Conflict(c) => c.into(),
            PaymentError::OperationPending { retry_after } => {
                let mut e = ApiError::conflict("processor_operation_pending", e.to_string())
                    .param("payment_id");
                e.retry_after = Some(retry_after);
                e
            }
            PaymentError::NotForProcessor { param, message } => {
                ApiError::invalid("processor_unsupported", message).param(param)
            }
            PaymentError::Processor(p) => ApiError::processor(p.to_string()),
            PaymentError::Db(e) => e.into(),
        }
    }
}

impl From<CreateError> for ApiError {
    #[track_caller]
    fn from(e: CreateError) -> Self {
        let message = e.to_string();
        match e {
            CreateError::NoSuchCustomer => ApiError::no_such::<crate::ids::CustomerId>(),
            CreateError::CustomerRedacted => {
                ApiError::conflict("customer_redacted", message).param("customer_id")
            }
            CreateError::CustomerRequired => {
                ApiError::invalid("customer_required", message).param("customer_id")
            }
            CreateError::NoSuchMethod => {
                ApiError::not_found("payment method").param("payment_method_id")
            }
            CreateError::NoSuchMandate => ApiError::not_found("mandate").param("mandate_id"),
            CreateError::Mandate(r) => r.into(),
            CreateError::MandateMethodMismatch(param) => {
                ApiError::invalid("mandate_method_mismatch", message).param(param)
            }
            CreateError::MandateMethodDeleted => {
                ApiError::conflict("payment_method_deleted", message).param("mandate_id")
            }
            CreateError::LineMismatch { param, .. } => {
                ApiError::invalid("line_catalog_mismatch", message).param(param)
            }
            CreateError::StripeMethod { param, .. } => {
                ApiError::invalid("payment_method_unusable", message).param(param)
            }
            CreateError::Payment(e) => e.into(),
            CreateError::Db(e) => e.into(),
        }
    }
}

fn public_url(state: &AppState) -> &str {
    &state.public_url
}

fn render(state: &AppState, m: &payment::Model) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(Payment::render(m, public_url(state))?))
}

/// The payment as `caller` may read it: a publishable key (the buyer's browser) sees its
/// `last_error` as a buyer's sentence, never the processor's words.
fn render_for(
    state: &AppState,
    caller: &Caller,
    m: &payment::Model,
) -> Result<HttpResponse, ApiError> {
    let mut p = Payment::render(m, public_url(state))?;
    if caller.kind == KeyKind::Publishable {
        p.last_error = p.last_error.map(for_buyer);
    }
    Ok(HttpResponse::Ok().json(p))
}

/// Runs a command and answers with the payment. The retry of a request whose first run
/// changed this payment but lost its answer runs no command again: it answers with the payment
/// as it now stands, reconciled with the processor.
async fn send(
    payments: &Payments,
    http: &HttpRequest,
    id: &str,
    access: Option<Access>,
    command: Command,
) -> Result<payment::Model, ApiError> {
    let command = match idempotency::resumed::<crate::ids::PaymentId>(http) {
        Some(object) if object.as_str() == id => Command::Sync,
        _ => command,
    };
    let key = idempotency::request_key(http);
    Ok(run(payments, id, access, command, key).await?.payment)
}

/// Create a payment, and confirm it at once with `confirm: true`.
///
/// Creates a payment in the shop that `x-profile-id` or a shop-bound key names:
/// `requires_payment_method`, or `requires_confirmation` when a card, a saved method
/// (`payment_method_id`) or a mandate comes with it. With `confirm: true` it is confirmed in
/// the same request, as `POST /payments/{payment_id}/confirm` does, and answered in the status
/// the processor leaves it in (a decline answers 201 with the payment `declined` or `failed`);
/// a `processing` payment or one waiting for 3-D Secure or review announces its outcome later.
/// Needs a secret key; a retry with the same `Idempotency-Key` answers the same payment, never
/// a second one. An unconfirmed payment expires 24 hours after its creation, an uncaptured
/// authorization when its capture window closes (`payment_expired`).
///
/// Fails: `shop_required` (400), `invalid_currency` (400), `amount_not_positive` (400), `amount_too_large` (400), `lines_amount_mismatch` (400), `line_catalog_mismatch` (400), `customer_required` (400), `mandate_required` (400), `payment_method_required` (400), `mandate_method_mismatch` (400), `payment_method_unusable` (400), `processor_unsupported` (400), `invalid_card_number` (400), `invalid_expiry_month` (400), `invalid_expiry_year` (400), `invalid_cvc` (400), `resource_missing` (404), `customer_redacted` (409), `mandate_inactive` (409), `mandate_revoked` (409), `mandate_currency_mismatch` (409), `mandate_amount_exceeded` (409), `payment_method_deleted` (409), `processor_error` (502).
///
/// Events: `payment_succeeded`, `payment_authorized`, `payment_partially_authorized`, `payment_failed`, `payment_processing`, `action_required`, `mandate_active`, `payment_expired`.
#[utoipa::path(post, path = "/payments", tag = "payments", request_body = CreatePaymentRequest,
    params(("x-profile-id" = Option<String>, Header, description = "the shop")),
    responses((status = 201, body = Payment), (status = 400, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn create_payment(
    http: HttpRequest,
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    payments: web::Data<Payments>,
    ApiJson(req): ApiJson<CreatePaymentRequest>,
) -> Result<HttpResponse, ApiError> {
    let deps = payments.deps();
    let ask = req.parse(
        &caller,
        &deps.cards(&caller),
        deps.settings.limits.max_amount,
    )?;
    let key = idempotency::request_key(&http);
    let resume = idempotency::resumed::<crate::ids::PaymentId>(&http);
    let maker = create::Maker::Merchant;
    let m = create::create(&payments, &caller.scope(), ask, key, resume, maker).await?;
    Ok(HttpResponse::Created().json(Payment::render(&m, public_url(&state))?))
}

/// Retrieve a payment; `force_sync=true` asks the processor first.
///
/// Reads the payment as stored. With `force_sync=true` its actor first asks the processor
/// where it stands: a pending payment settles, an operation whose answer was lost is
/// reconciled, refunds made at the processor are recorded, a contradiction makes it
/// `conflicted`, and with a secret key the disputes a Stripe account holds against it are
/// followed. A publishable key must send the payment's `client_secret`, and sees `last_error`
/// in the buyer's words.
///
/// Fails: `client_secret_required` (403), `client_secret_mismatch` (403), `resource_missing` (404), `concurrent_update` (409), `processor_error` (502).
///
/// Events: `payment_succeeded`, `payment_authorized`, `payment_partially_authorized`, `payment_captured`, `payment_failed`, `payment_cancelled`, `payment_cancelled_post_capture`, `payment_expired`, `action_required`, `refund_succeeded`, `refund_failed`, `dispute_opened`, `dispute_challenged`, `dispute_won`, `dispute_lost`, `dispute_cancelled`.
#[utoipa::path(get, path = "/payments/{payment_id}", tag = "payments",
    params(("payment_id" = String, Path), RetrieveQuery),
    responses((status = 200, body = Payment), (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
#[allow(clippy::too_many_arguments)]
pub async fn retrieve_payment(
    http: HttpRequest,
    AnyKey(caller): AnyKey,
    state: web::Data<AppState>,
    payments: web::Data<Payments>,
    disputes: web::Data<crate::disputes::Disputes>,
    connections: web::Data<crate::processors::connect::Connections>,
    PathId(id): PathId<crate::ids::PaymentId>,
    ApiQuery(q): ApiQuery<RetrieveQuery>,
) -> Result<HttpResponse, ApiError> {
    let access = Access::of(&caller, q.client_secret)?;
    if q.force_sync == Some(true) {
        let m = send(&payments, &http, &id, Some(access), Command::Sync).await?;
        // What Stripe holds that its events did not tell (disputes, orphan charges): the
        // merchant's concern, not a buyer's page's.
        if caller.kind == crate::auth::keys::KeyKind::Secret {
            use crate::payments::stripe_events::follow_up;
            follow_up(&state, &payments, &disputes, &connections, &m).await?;
        }
        return render_for(&state, &caller, &m);
    }
    let m = crate::owned::find_owned(&state.db, &id, &access.scope)
        .await?
        .ok_or_else(ApiError::no_such::<crate::ids::PaymentId>)?;
    if !access.shows(&m.client_secret) {
        return Err(PaymentError::Forbidden.into());
    }
    render_for(&state, &caller, &m)
}

/// Update a payment before it is confirmed.
///
/// Changes the amount, currency, capture method, card, lines, metadata, description or
/// `return_url` of a payment that is `requires_payment_method`, `requires_confirmation` or
/// `declined`; a card moves it from `requires_payment_method` to `requires_confirmation`, and
/// the status stays otherwise. Lines that name catalog products or prices are set at creation:
/// they, and the amount and currency of a payment that has them, cannot be changed. Needs a
/// secret key.
///
/// Fails: `invalid_currency` (400), `amount_not_positive` (400), `amount_too_large` (400), `lines_amount_mismatch` (400), `payment_method_unusable` (400), `invalid_card_number` (400), `invalid_expiry_month` (400), `invalid_expiry_year` (400), `invalid_cvc` (400), `resource_missing` (404), `invalid_state` (409), `processor_operation_pending` (409), `concurrent_update` (409), `processor_error` (502).
///
/// Events: none.
#[utoipa::path(post, path = "/payments/{payment_id}", tag = "payments", request_body = UpdatePaymentRequest,
    params(("payment_id" = String, Path)),
    responses((status = 200, body = Payment), (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn update_payment(
    http: HttpRequest,
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    payments: web::Data<Payments>,
    PathId(id): PathId<crate::ids::PaymentId>,
    ApiJson(req): ApiJson<UpdatePaymentRequest>,
) -> Result<HttpResponse, ApiError> {
    check_metadata(req.metadata.as_ref())?;
    let sent = payments
        .deps()
        .cards(&caller)
        .read(req.payment_method_data.as_ref())?;
    let card = match sent {
        Some(sent) => {
            let access = Access::of(&caller, None)?;
            let m = crate::owned::find_owned(&state.db, &id, &access.scope)
                .await?
                .ok_or_else(ApiError::no_such::<crate::ids::PaymentId>)?;
            let shop = (m.merchant_id.as_str(), m.profile_id.as_str());
            let deps = payments.deps();
            Some(create::card_sent(deps, shop, m.test_mode, sent).await?.0)
        }
        None => None,
    };
    let max_amount = payments.deps().settings.limits.max_amount;
    let patch = patch_of(req, card, max_amount)?;
    let m = send(
        &payments,
        &http,
        &id,
        Some(Access::of(&caller, None)?),
        Command::Update(Box::new(patch)),
    )
    .await?;
    render(&state, &m)
}

/// What an update asks to change, each field checked; `card` is the card it sends, stored.
fn patch_of(
    req: UpdatePaymentRequest,
    card: Option<crate::processors::StoredCard>,
    max_amount: i64,
) -> Result<Patch, ApiError> {
    Ok(Patch {
        amount: req
            .amount
            .map(|a| parse_amount("amount", a, max_amount))
            .transpose()?,
        currency: req
            .currency
            .as_deref()
            .map(|c| parse_currency("currency", c))
            .transpose()?,
        manual_capture: req.capture_method.map(|c| c == CaptureMethodDto::Manual),
        card,
        lines: req.lines.as_deref().map(parse_line_items).transpose()?,
        metadata: req.metadata,
        description: check_text("description", req.description.as_ref(), 1000)?,
        return_url: parse_return_url(req.return_url.as_ref())?,
    })
}

/// Confirm a payment with a payment method.
///
/// Authorizes a payment that is `requires_payment_method`, `requires_confirmation` or
/// `declined` with the card sent, a saved method of its customer or the card it holds, routed
/// among the shop's processor accounts of its mode (falling back after a retryable decline);
/// each confirm is a new attempt. It answers the payment as the processor left it:
/// `succeeded`, `requires_capture`, `partially_authorized_and_requires_capture`,
/// `requires_customer_action` (send the buyer to `next_action`), `requires_merchant_action` or
/// `processing` (their outcome follows later, asynchronously), or `declined` or `failed` with
/// `last_error` (a decline answers 200, not an error). A publishable key must send the
/// payment's `client_secret` and cannot set `return_url`.
///
/// Fails: `customer_required` (400), `payment_method_required` (400), `payment_method_unusable` (400), `processor_unsupported` (400), `invalid_card_number` (400), `invalid_expiry_month` (400), `invalid_expiry_year` (400), `invalid_cvc` (400), `client_secret_required` (403), `client_secret_mismatch` (403), `resource_missing` (404), `invalid_state` (409), `mandate_inactive` (409), `mandate_revoked` (409), `mandate_currency_mismatch` (409), `mandate_amount_exceeded` (409), `processor_operation_pending` (409), `concurrent_update` (409), `processor_error` (502).
///
/// Events: `payment_succeeded`, `payment_authorized`, `payment_partially_authorized`, `payment_failed`, `payment_processing`, `action_required`, `mandate_active`, `payment_expired`.
#[utoipa::path(post, path = "/payments/{payment_id}/confirm", tag = "payments", request_body = ConfirmPaymentRequest,
    params(("payment_id" = String, Path)),
    responses((status = 200, body = Payment), (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn confirm_payment(
    http: HttpRequest,
    AnyKey(caller): AnyKey,
    state: web::Data<AppState>,
    payments: web::Data<Payments>,
    PathId(id): PathId<crate::ids::PaymentId>,
    ApiJson(req): ApiJson<ConfirmPaymentRequest>,
) -> Result<HttpResponse, ApiError> {
    // Only the merchant chooses where the buyer goes after paying: a buyer's page that could
    // name it would let a forwarded checkout link send the payer anywhere.
    if caller.kind == KeyKind::Publishable && req.return_url.is_some() {
        return Err(ApiError::invalid_param(
            "return_url",
            "return_url is set by the merchant (secret key) on create, update or confirm; a publishable key cannot set it",
        ));
    }
    let access = Access::of(&caller, req.client_secret.clone())?;
    let ask = req.parse(&payments.deps().cards(&caller))?;
    let return_url = ask.return_url.clone();
    let (card, secret) = create::confirm_card(payments.deps(), &access, &id, ask).await?;
    let m = send(
        &payments,
        &http,
        &id,
        Some(access),
        Command::Confirm {
            card,
            secret,
            return_url,
        },
    )
    .await?;
    render_for(&state, &caller, &m)
}

/// Capture an authorization, whole or in part.
///
/// Captures `amount` (by default all that is capturable) of a payment that is
/// `requires_capture`, `partially_authorized_and_requires_capture` or
/// `partially_captured_and_capturable`. Capturing the whole remainder makes it `succeeded`
/// (`partially_captured` after a partial authorization); less makes it `partially_captured`
/// with `final_capture: true` (the default), or `partially_captured_and_capturable` with
/// `final_capture: false`, which a processor that captures once refuses. Needs a secret key.
///
/// Fails: `amount_not_positive` (400), `amount_too_large` (400), `amount_exceeds_capturable` (400), `processor_unsupported` (400), `resource_missing` (404), `invalid_state` (409), `processor_operation_pending` (409), `concurrent_update` (409), `processor_error` (502).
///
/// Events: `payment_succeeded`, `payment_captured`.
#[utoipa::path(post, path = "/payments/{payment_id}/capture", tag = "payments", request_body = CapturePaymentRequest,
    params(("payment_id" = String, Path)),
    responses((status = 200, body = Payment), (status = 400, body = crate::error::ErrorBody), (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn capture_payment(
    http: HttpRequest,
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    payments: web::Data<Payments>,
    PathId(id): PathId<crate::ids::PaymentId>,
    ApiJson(req): ApiJson<CapturePaymentRequest>,
) -> Result<HttpResponse, ApiError> {
    if let Some(a) = req.amount {
        parse_amount("amount", a, payments.deps().settings.limits.max_amount)?;
    }
    let command = Command::Capture {
        amount: req.amount,
        final_capture: req.final_capture,
    };
    let m = send(
        &payments,
        &http,
        &id,
        Some(Access::of(&caller, None)?),
        command,
    )
    .await?;
    render(&state, &m)
}

/// Cancel a payment or release its authorization.
///
/// An unconfirmed payment, or one waiting for 3-D Secure, becomes `cancelled` (a challenge its
/// processor holds is voided there); an authorization (`requires_capture`,
/// `partially_authorized_and_requires_capture`, `requires_merchant_action`) is voided at the
/// processor and becomes `cancelled`; `partially_captured_and_capturable` releases the rest
/// and becomes `partially_captured`. A `succeeded` or `partially_captured` payment can be
/// cancelled within 30 minutes of its capture, with nothing refunded and no dispute open or
/// kept by the buyer: the capture is voided (`cancelled_post_capture`). Any other status,
/// `processing` included, is 409. Needs a secret key.
///
/// Fails: `resource_missing` (404), `invalid_state` (409), `refund_exists` (409), `dispute_open` (409), `processor_operation_pending` (409), `concurrent_update` (409), `processor_error` (502).
///
/// Events: `payment_cancelled`, `payment_cancelled_post_capture`, `payment_captured`.
#[utoipa::path(post, path = "/payments/{payment_id}/cancel", tag = "payments", request_body = CancelPaymentRequest,
    params(("payment_id" = String, Path)),
    responses((status = 200, body = Payment), (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn cancel_payment(
    http: HttpRequest,
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    payments: web::Data<Payments>,
    PathId(id): PathId<crate::ids::PaymentId>,
    ApiJson(req): ApiJson<CancelPaymentRequest>,
) -> Result<HttpResponse, ApiError> {
    check_text("reason", req.reason.as_ref(), 500)?;
    let m = send(
        &payments,
        &http,
        &id,
        Some(Access::of(&caller, None)?),
        Command::Cancel,
    )
    .await?;
    render(&state, &m)
}

/// Filter and page through payments, newest first.
///
/// The payments of the key's merchant and mode, within the key's shop or the `profile_id`
/// asked for, filtered by status, currency, customer, amount and creation time;
/// `starting_after` and `ending_before` page on from a payment of the list. Read only; needs a
/// secret key.
///
/// Fails: `invalid_currency` (400), `resource_missing` (400), `profile_mismatch` (403).
///
/// Events: none.
#[utoipa::path(post, path = "/payments/list", tag = "payments", request_body = ListPaymentsRequest,
    responses((status = 200, body = List<Payment>)), security(("api_key" = [])))]
pub async fn list_payments(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    ApiJson(req): ApiJson<ListPaymentsRequest>,
) -> Result<HttpResponse, ApiError> {
    let page = Page::parse::<crate::ids::PaymentId>(&req.page_query())?;
    let mut req = req;
    if let Some(s) = &req.status {
        Status::parse(s)
            .ok_or_else(|| ApiError::invalid_param("status", format!("unknown status {s:?}")))?;
    }
    if let Some(c) = &req.currency {
        req.currency = Some(parse_currency("currency", c)?);
    }
    let shop = caller.scope().list_shop(req.profile_id.as_deref())?;
    let list = store::list(
        &state.db,
        caller.merchant_id.as_str(),
        caller.test_mode(),
        shop.as_deref(),
        &req,
        &page,
    )
    .await?;
    let url = public_url(&state).to_owned();
    Ok(HttpResponse::Ok().json(list.try_map(|m| Payment::render(&m, &url))?))
}

async fn owned(
    state: &AppState,
    caller: &Caller,
    id: &crate::ids::PaymentId,
) -> Result<payment::Model, ApiError> {
    crate::owned::find_owned(&state.db, id, &caller.scope())
        .await?
        .ok_or_else(ApiError::no_such::<crate::ids::PaymentId>)
}

/// Processor attempts and their errors, oldest first.
///
/// One row per processor account an authorization was sent to, fallbacks included: its number,
/// the processor's reference, its outcome and the processor's error. Read only; needs a secret
/// key.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/payments/{payment_id}/attempts", tag = "payments",
    params(("payment_id" = String, Path)),
    responses((status = 200, body = Items<Attempt>)), security(("api_key" = [])))]
pub async fn list_attempts(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::PaymentId>,
) -> Result<HttpResponse, ApiError> {
    let m = owned(&state, &caller, &id).await?;
    let data: Vec<Attempt> = store::attempts(&state.db, &m.id)
        .await?
        .iter()
        .map(Attempt::try_from)
        .collect::<Result<_, _>>()?;
    Ok(HttpResponse::Ok().json(Items { data }))
}

/// The payment's status timeline, oldest first.
///
/// Each change of status: from, to, what caused it (`confirm`, `capture`, `sync` …) and when.
/// Read only; needs a secret key.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/payments/{payment_id}/status-history", tag = "payments",
    params(("payment_id" = String, Path)),
    responses((status = 200, body = Items<StatusChange>)), security(("api_key" = [])))]
pub async fn status_history(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::PaymentId>,
) -> Result<HttpResponse, ApiError> {
    let m = owned(&state, &caller, &id).await?;
    let data: Vec<StatusChange> = store::history_of(&state.db, &m.id)
        .await?
        .iter()
        .map(StatusChange::from)
        .collect();
    Ok(HttpResponse::Ok().json(Items { data }))
}

/// Product lines with their captured and refundable balances.
///
/// Each line with its share of the captured amount (spread in proportion to the lines'
/// amounts) and `amount_refundable`: exactly what a refund of that line may take now, within
/// what the payment has left to refund. Read only; needs a secret key.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/payments/{payment_id}/lines", tag = "payments",
    params(("payment_id" = String, Path)),
    responses((status = 200, body = Items<LineBalance>)), security(("api_key" = [])))]
pub async fn payment_lines(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::PaymentId>,
) -> Result<HttpResponse, ApiError> {
    let m = owned(&state, &caller, &id).await?;
    let lines = lines_of(&m);
    let captured = refunds::captured_shares(&lines, m.amount_captured);
    let refundable = refunds::refundable_lines(
        &state_of(&m),
        &lines,
        &store::disputed(&state.db, &m.id).await?,
    );
    let data: Vec<LineBalance> = lines
        .into_iter()
        .zip(captured.into_iter().zip(refundable))
        .map(|(line, (amount_captured, amount_refundable))| LineBalance {
            amount_refundable,
            amount_captured,
            line,
        })
        .collect();
    Ok(HttpResponse::Ok().json(Items { data }))
}

/// Why each attempt went to its processor.
///
/// For each attempt, the routing decision that sent it: the algorithm, the rule that matched,
/// the candidates in order, the account chosen and why (a fallback names the account before
/// it). Read only; needs a secret key.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/payments/{payment_id}/routing-decisions", tag = "payments",
    params(("payment_id" = String, Path)),
    responses((status = 200, body = Items<RoutingDecisionView>)), security(("api_key" = [])))]
pub async fn routing_decisions(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::PaymentId>,
) -> Result<HttpResponse, ApiError> {
    let m = owned(&state, &caller, &id).await?;
    // An attempt whose stored decision does not decode is an error, never left out.
    let data = store::attempts(&state.db, &m.id)
        .await?
        .into_iter()
        .map(|a| RoutingDecisionView {
            attempt_id: a.id,
            number: a.number,
            outcome: a.status.to_string(),
            decision: a.routing.0,
        })
        .collect();
    Ok(HttpResponse::Ok().json(Items { data }))
}

//! Handlers of the payment routes.

use actix_web::{web, HttpResponse};
use chrono::Duration;
use payd_entity::payment;

use super::{
    actor::{run, Access, Command, Patch, PaymentError, Payments},
    api::{
        captured_shares, parse_lines, Attempt, CancelPaymentRequest, CaptureMethodDto,
        CapturePaymentRequest, ConfirmPaymentRequest, CreatePaymentRequest, Line, LineBalance,
        ListPaymentsRequest, MandateRequest, MandateType, Payment, PaymentMethodData,
        RetrieveQuery, RoutingDecision, RoutingDecisionView, StatusChange, UpdatePaymentRequest,
    },
    machine::Status,
    store,
};
use crate::{
    auth::{AnyKey, Caller, SecretKey},
    customers::{self, api::check_mandate},
    error::ApiError,
    fields::{check_metadata, check_text, parse_amount, parse_currency, Items},
    http::{ApiJson, ApiQuery},
    ids::new_id,
    pagination::{List, Page},
    processors::card::{parse_card, SecretCard, StoredCard},
    state::AppState,
};

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(web::resource("/payments").route(web::post().to(create_payment)))
        .service(web::resource("/payments/list").route(web::post().to(list_payments)))
        .service(
            web::resource("/payments/{payment_id}")
                .route(web::get().to(retrieve_payment))
                .route(web::post().to(update_payment)),
        )
        .service(
            web::resource("/payments/{payment_id}/confirm").route(web::post().to(confirm_payment)),
        )
        .service(
            web::resource("/payments/{payment_id}/capture").route(web::post().to(capture_payment)),
        )
        .service(
            web::resource("/payments/{payment_id}/cancel").route(web::post().to(cancel_payment)),
        )
        .service(
            web::resource("/payments/{payment_id}/attempts").route(web::get().to(list_attempts)),
        )
        .service(
            web::resource("/payments/{payment_id}/status-history")
                .route(web::get().to(status_history)),
        )
        .service(web::resource("/payments/{payment_id}/lines").route(web::get().to(payment_lines)))
        .service(
            web::resource("/payments/{payment_id}/routing-decisions")
                .route(web::get().to(routing_decisions)),
        );
}

fn public_url(state: &AppState) -> &str {
    &state.public_url
}

fn render(state: &AppState, m: &payment::Model) -> HttpResponse {
    HttpResponse::Ok().json(Payment::render(m, public_url(state)))
}

/// Runs a command and answers with the payment.
async fn send(
    payments: &Payments,
    id: &str,
    access: Option<Access>,
    command: Command,
) -> Result<payment::Model, ApiError> {
    Ok(run(payments, id, access, command).await?.payment)
}

fn parse_card_data(
    state: &AppState,
    test_mode: bool,
    data: Option<&PaymentMethodData>,
) -> Result<Option<StoredCard>, ApiError> {
    data.map(|d| {
        parse_card(
            &d.card,
            "payment_method_data.card",
            state.clock.now(),
            &state.settings.security.key_pepper,
            test_mode,
        )
    })
    .transpose()
}

/// The card of a customer's saved method (another customer's is 404).
async fn saved_card(
    state: &AppState,
    customer_id: Option<&str>,
    pm_id: &str,
) -> Result<StoredCard, ApiError> {
    let not_found = || ApiError::not_found("payment method").param("payment_method_id");
    let customer_id = customer_id.ok_or_else(|| {
        ApiError::invalid(
            "customer_required",
            "payment_method_id needs the payment's customer_id",
        )
        .param("customer_id")
    })?;
    let pm = customers::store::find_method(&state.db, pm_id)
        .await?
        .filter(|pm| pm.customer_id == customer_id)
        .ok_or_else(not_found)?;
    serde_json::from_str(&pm.card).map_err(ApiError::internal)
}

/// The customer side of a new payment, checked: the customer, a saved method, a mandate to
/// charge off-session, or a card to save for later.
struct CustomerSide {
    customer_id: Option<String>,
    card: Option<StoredCard>,
    mandate_id: Option<String>,
    future_usage: Option<&'static str>,
    mandate_request: Option<MandateRequest>,
    off_session: bool,
}

async fn customer_side(
    state: &AppState,
    caller: &Caller,
    req: &CreatePaymentRequest,
    amount: i64,
    currency: &str,
) -> Result<CustomerSide, ApiError> {
    let needs_customer = |param: &str| {
        ApiError::invalid("customer_required", format!("{param} needs customer_id"))
            .param("customer_id")
    };
    let customer = match &req.customer_id {
        None => None,
        Some(id) => {
            let c = customers::store::find_owned(
                &state.db,
                id,
                caller.merchant_id.as_str(),
                caller.test_mode(),
            )
            .await?
            .ok_or_else(|| ApiError::not_found("customer").param("customer_id"))?;
            if c.redacted_at.is_some() {
                return Err(ApiError::conflict(
                    "customer_redacted",
                    "this customer was deleted and cannot be charged",
                )
                .param("customer_id"));
            }
            Some(c)
        }
    };
    let customer_id = customer.as_ref().map(|c| c.id.clone());
    let future_usage = match req.setup_future_usage.as_deref() {
        None => None,
        Some("off_session") => Some("off_session"),
        Some("on_session") => Some("on_session"),
        Some(_) => {
            return Err(ApiError::invalid_param(
                "setup_future_usage",
                "setup_future_usage is off_session or on_session",
            ))
        }
    };
    if future_usage.is_some() && customer.is_none() {
        return Err(needs_customer("setup_future_usage"));
    }
    let mandate_request = match (&req.mandate_data, future_usage) {
        (Some(_), Some("on_session")) | (Some(_), None) => {
            return Err(ApiError::invalid_param(
                "mandate_data",
                "mandate_data goes with setup_future_usage: off_session",
            ))
        }
        (data, Some("off_session")) => {
            let limit = data.as_ref().and_then(|d| d.amount_limit);
            if limit.is_some_and(|l| l <= 0) {
                return Err(ApiError::invalid_param(
                    "mandate_data.amount_limit",
                    "amount_limit must be greater than 0",
                ));
            }
            let ends_at = data.as_ref().and_then(|d| d.ends_at);
            if ends_at.is_some_and(|t| t <= state.clock.now()) {
                return Err(ApiError::invalid_param(
                    "mandate_data.ends_at",
                    "ends_at must be in the future",
                ));
            }
            Some(MandateRequest {
                single_use: data.as_ref().and_then(|d| d.mandate_type)
                    == Some(MandateType::SingleUse),
                amount_limit: limit,
                currency: currency.to_owned(),
                ends_at,
            })
        }
        _ => None,
    };
    let mut card = parse_card_data(state, caller.test_mode(), req.payment_method_data.as_ref())?;
    if let Some(pm_id) = &req.payment_method_id {
        if card.is_some() {
            return Err(ApiError::invalid_param(
                "payment_method_id",
                "send payment_method_data or payment_method_id, not both",
            ));
        }
        card = Some(saved_card(state, customer_id.as_deref(), pm_id).await?);
    }
    let off_session = req.off_session.unwrap_or(false);
    let mandate_id = match &req.mandate_id {
        None if off_session => {
            return Err(ApiError::invalid(
                "mandate_required",
                "an off-session payment needs a mandate_id",
            )
            .param("mandate_id"))
        }
        None => None,
        Some(id) => {
            let c = customer
                .as_ref()
                .ok_or_else(|| needs_customer("mandate_id"))?;
            let m = customers::store::find_mandate(&state.db, id)
                .await?
                .filter(|m| m.customer_id == c.id)
                .ok_or_else(|| ApiError::not_found("mandate").param("mandate_id"))?;
            check_mandate(&m, amount, currency, state.clock.now())?;
            if card.is_none() {
                card = Some(
                    saved_card(state, customer_id.as_deref(), &m.payment_method_id)
                        .await
                        .map_err(|_| {
                            ApiError::conflict(
                                "payment_method_deleted",
                                "the mandate's payment method was deleted",
                            )
                            .param("mandate_id")
                        })?,
                );
            }
            Some(m.id)
        }
    };
    Ok(CustomerSide {
        customer_id,
        card,
        mandate_id,
        future_usage,
        mandate_request,
        off_session,
    })
}

/// A return URL: http or https only (a `javascript:` URL would run on payd's checkout page).
fn return_url(value: Option<&String>) -> Result<Option<String>, ApiError> {
    let Some(url) = value else { return Ok(None) };
    let ok = (url.starts_with("https://") || url.starts_with("http://"))
        && url.len() <= 2048
        && !url.chars().any(|c| c.is_whitespace() || c.is_control());
    if !ok {
        return Err(ApiError::invalid_param(
            "return_url",
            "return_url must be an http(s) URL of at most 2048 characters",
        ));
    }
    Ok(Some(url.clone()))
}

/// Create a payment (and confirm it with `confirm: true`).
#[utoipa::path(post, path = "/payments", tag = "payments", request_body = CreatePaymentRequest,
    params(("x-profile-id" = Option<String>, Header, description = "the shop")),
    responses((status = 200, body = Payment), (status = 400, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn create_payment(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    payments: web::Data<Payments>,
    ApiJson(req): ApiJson<CreatePaymentRequest>,
) -> Result<HttpResponse, ApiError> {
    let profile = caller.require_shop()?.clone();
    let amount = parse_amount("amount", req.amount)?;
    let currency = parse_currency("currency", &req.currency)?;
    let side = customer_side(&state, &caller, &req, amount, &currency).await?;
    let card = side.card.clone();
    let secret = req
        .payment_method_data
        .as_ref()
        .map(|d| SecretCard::from(&d.card));
    if req.confirm && card.is_none() {
        return Err(ApiError::invalid(
            "payment_method_required",
            "confirm: true needs payment_method_data",
        )
        .param("payment_method_data"));
    }
    let lines = req
        .lines
        .as_deref()
        .map(|l| parse_lines(l, amount))
        .transpose()?;
    check_metadata(req.metadata.as_ref())?;
    let now = state.clock.now();
    let m = payment::Model {
        id: new_id("pay"),
        merchant_id: caller.merchant_id.to_string(),
        profile_id: profile.to_string(),
        test_mode: caller.test_mode(),
        status: if card.is_some() {
            Status::RequiresConfirmation
        } else {
            Status::RequiresPaymentMethod
        }
        .as_str()
        .to_owned(),
        amount,
        currency,
        capture_method: match req.capture_method.unwrap_or_default() {
            CaptureMethodDto::Automatic => "automatic",
            CaptureMethodDto::Manual => "manual",
        }
        .to_owned(),
        amount_authorized: 0,
        amount_captured: 0,
        amount_refunded: 0,
        confirm_attempts: 0,
        max_attempts: 3,
        enable_partial_authorization: req.enable_partial_authorization,
        customer_id: side.customer_id,
        mandate_id: side.mandate_id,
        setup_future_usage: side.future_usage.map(str::to_owned),
        off_session: side.off_session,
        mandate_request: side
            .mandate_request
            .and_then(|r| serde_json::to_string(&r).ok()),
        payment_method: card.as_ref().and_then(|c| serde_json::to_string(c).ok()),
        processor: None,
        processor_reference: None,
        last_error: None,
        lines: lines.as_ref().and_then(|l| serde_json::to_string(l).ok()),
        metadata: serde_json::to_string(&req.metadata.unwrap_or_default())
            .unwrap_or_else(|_| "{}".into()),
        description: check_text("description", req.description.as_ref(), 1000)?,
        return_url: return_url(req.return_url.as_ref())?,
        hosted_checkout: req.hosted_checkout,
        client_secret: format!("{}_secret_{}", "pay", uuid::Uuid::new_v4().simple()),
        expires_at: now + Duration::hours(24),
        capture_before: None,
        captured_at: None,
        conflict: None,
        version: 0,
        created_at: now,
        updated_at: now,
    };
    let m = store::insert(&state.db, m, now).await?;
    let m = if req.confirm {
        let access = Access::of(&caller, None)?;
        let fresh = &payments.deps().fresh;
        fresh.insert(m.id.clone(), m.clone());
        let confirmed = send(
            &payments,
            &m.id,
            Some(access),
            Command::Confirm {
                card,
                secret,
                return_url: None,
            },
        )
        .await;
        fresh.remove(&m.id);
        confirmed?
    } else {
        m
    };
    Ok(render(&state, &m))
}

/// Retrieve a payment; `force_sync=true` asks the processor first.
#[utoipa::path(get, path = "/payments/{payment_id}", tag = "payments",
    params(("payment_id" = String, Path), RetrieveQuery),
    responses((status = 200, body = Payment), (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn retrieve_payment(
    AnyKey(caller): AnyKey,
    state: web::Data<AppState>,
    payments: web::Data<Payments>,
    id: web::Path<String>,
    ApiQuery(q): ApiQuery<RetrieveQuery>,
) -> Result<HttpResponse, ApiError> {
    let access = Access::of(&caller, q.client_secret)?;
    if q.force_sync == Some(true) {
        let m = send(&payments, &id, Some(access), Command::Sync).await?;
        return Ok(render(&state, &m));
    }
    let m = store::find_owned(&state.db, &id, &access.merchant_id, access.test_mode)
        .await?
        .ok_or_else(|| ApiError::not_found("payment"))?;
    if access
        .client_secret
        .as_ref()
        .is_some_and(|s| *s != m.client_secret)
    {
        return Err(PaymentError::Forbidden.into());
    }
    Ok(render(&state, &m))
}

/// Update a payment before it is confirmed.
#[utoipa::path(post, path = "/payments/{payment_id}", tag = "payments", request_body = UpdatePaymentRequest,
    params(("payment_id" = String, Path)),
    responses((status = 200, body = Payment), (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn update_payment(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    payments: web::Data<Payments>,
    id: web::Path<String>,
    ApiJson(req): ApiJson<UpdatePaymentRequest>,
) -> Result<HttpResponse, ApiError> {
    check_metadata(req.metadata.as_ref())?;
    let patch = Patch {
        amount: req.amount.map(|a| parse_amount("amount", a)).transpose()?,
        currency: req
            .currency
            .as_deref()
            .map(|c| parse_currency("currency", c))
            .transpose()?,
        manual_capture: req.capture_method.map(|c| c == CaptureMethodDto::Manual),
        card: parse_card_data(&state, caller.test_mode(), req.payment_method_data.as_ref())?,
        lines: req.lines,
        metadata: req.metadata,
        description: check_text("description", req.description.as_ref(), 1000)?,
        return_url: return_url(req.return_url.as_ref())?,
    };
    let m = send(
        &payments,
        &id,
        Some(Access::of(&caller, None)?),
        Command::Update(Box::new(patch)),
    )
    .await?;
    Ok(render(&state, &m))
}

/// Confirm a payment with a payment method (publishable keys need the `client_secret`).
#[utoipa::path(post, path = "/payments/{payment_id}/confirm", tag = "payments", request_body = ConfirmPaymentRequest,
    params(("payment_id" = String, Path)),
    responses((status = 200, body = Payment), (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn confirm_payment(
    AnyKey(caller): AnyKey,
    state: web::Data<AppState>,
    payments: web::Data<Payments>,
    id: web::Path<String>,
    ApiJson(req): ApiJson<ConfirmPaymentRequest>,
) -> Result<HttpResponse, ApiError> {
    let access = Access::of(&caller, req.client_secret)?;
    let mut card = parse_card_data(&state, caller.test_mode(), req.payment_method_data.as_ref())?;
    let secret = req
        .payment_method_data
        .as_ref()
        .map(|d| SecretCard::from(&d.card));
    if let Some(pm_id) = &req.payment_method_id {
        if card.is_some() {
            return Err(ApiError::invalid_param(
                "payment_method_id",
                "send payment_method_data or payment_method_id, not both",
            ));
        }
        let payment = store::find_owned(&state.db, &id, &access.merchant_id, access.test_mode)
            .await?
            .ok_or_else(|| ApiError::not_found("payment"))?;
        card = Some(saved_card(&state, payment.customer_id.as_deref(), pm_id).await?);
    }
    let return_url = return_url(req.return_url.as_ref())?;
    let m = send(
        &payments,
        &id,
        Some(access),
        Command::Confirm {
            card,
            secret,
            return_url,
        },
    )
    .await?;
    Ok(render(&state, &m))
}

/// Capture an authorization, whole or in part.
#[utoipa::path(post, path = "/payments/{payment_id}/capture", tag = "payments", request_body = CapturePaymentRequest,
    params(("payment_id" = String, Path)),
    responses((status = 200, body = Payment), (status = 400, body = crate::error::ErrorBody), (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn capture_payment(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    payments: web::Data<Payments>,
    id: web::Path<String>,
    ApiJson(req): ApiJson<CapturePaymentRequest>,
) -> Result<HttpResponse, ApiError> {
    if let Some(a) = req.amount {
        parse_amount("amount", a)?;
    }
    let command = Command::Capture {
        amount: req.amount,
        final_capture: req.final_capture,
    };
    let m = send(&payments, &id, Some(Access::of(&caller, None)?), command).await?;
    Ok(render(&state, &m))
}

/// Cancel a payment or release its authorization.
#[utoipa::path(post, path = "/payments/{payment_id}/cancel", tag = "payments", request_body = CancelPaymentRequest,
    params(("payment_id" = String, Path)),
    responses((status = 200, body = Payment), (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn cancel_payment(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    payments: web::Data<Payments>,
    id: web::Path<String>,
    ApiJson(req): ApiJson<CancelPaymentRequest>,
) -> Result<HttpResponse, ApiError> {
    check_text("reason", req.reason.as_ref(), 500)?;
    let m = send(
        &payments,
        &id,
        Some(Access::of(&caller, None)?),
        Command::Cancel,
    )
    .await?;
    Ok(render(&state, &m))
}

/// Filter and page through payments, newest first.
#[utoipa::path(post, path = "/payments/list", tag = "payments", request_body = ListPaymentsRequest,
    responses((status = 200, body = List<Payment>)), security(("api_key" = [])))]
pub async fn list_payments(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    ApiJson(req): ApiJson<ListPaymentsRequest>,
) -> Result<HttpResponse, ApiError> {
    let page = Page::parse(&req.page_query())?;
    let mut req = req;
    if let Some(s) = &req.status {
        Status::parse(s)
            .ok_or_else(|| ApiError::invalid_param("status", format!("unknown status {s:?}")))?;
    }
    if let Some(c) = &req.currency {
        req.currency = Some(parse_currency("currency", c)?);
    }
    let list = store::list(
        &state.db,
        caller.merchant_id.as_str(),
        caller.test_mode(),
        &req,
        &page,
    )
    .await?;
    let url = public_url(&state).to_owned();
    Ok(HttpResponse::Ok().json(list.map(|m| Payment::render(&m, &url))))
}

async fn owned(state: &AppState, caller: &Caller, id: &str) -> Result<payment::Model, ApiError> {
    store::find_owned(
        &state.db,
        id,
        caller.merchant_id.as_str(),
        caller.test_mode(),
    )
    .await?
    .ok_or_else(|| ApiError::not_found("payment"))
}

/// Processor attempts and their errors, oldest first.
#[utoipa::path(get, path = "/payments/{payment_id}/attempts", tag = "payments",
    params(("payment_id" = String, Path)),
    responses((status = 200, body = Items<Attempt>)), security(("api_key" = [])))]
pub async fn list_attempts(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let m = owned(&state, &caller, &id).await?;
    let data: Vec<Attempt> = store::attempts(&state.db, &m.id)
        .await?
        .iter()
        .map(Attempt::from)
        .collect();
    Ok(HttpResponse::Ok().json(Items { data }))
}

/// The payment's status timeline, oldest first.
#[utoipa::path(get, path = "/payments/{payment_id}/status-history", tag = "payments",
    params(("payment_id" = String, Path)),
    responses((status = 200, body = Items<StatusChange>)), security(("api_key" = [])))]
pub async fn status_history(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    id: web::Path<String>,
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
#[utoipa::path(get, path = "/payments/{payment_id}/lines", tag = "payments",
    params(("payment_id" = String, Path)),
    responses((status = 200, body = Items<LineBalance>)), security(("api_key" = [])))]
pub async fn payment_lines(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let m = owned(&state, &caller, &id).await?;
    let lines: Vec<Line> = m
        .lines
        .as_deref()
        .and_then(|s| serde_json::from_str(s).ok())
        .unwrap_or_default();
    let shares = captured_shares(&lines, m.amount_captured);
    let data: Vec<LineBalance> = lines
        .into_iter()
        .zip(shares)
        .map(|(line, captured)| LineBalance {
            amount_refundable: (captured.min(line.amount) - line.amount_refunded).max(0),
            amount_captured: captured,
            line,
        })
        .collect();
    Ok(HttpResponse::Ok().json(Items { data }))
}

/// Why each attempt went to its processor.
#[utoipa::path(get, path = "/payments/{payment_id}/routing-decisions", tag = "payments",
    params(("payment_id" = String, Path)),
    responses((status = 200, body = Items<RoutingDecisionView>)), security(("api_key" = [])))]
pub async fn routing_decisions(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    id: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let m = owned(&state, &caller, &id).await?;
    let data: Vec<RoutingDecisionView> = store::attempts(&state.db, &m.id)
        .await?
        .into_iter()
        .filter_map(|a| {
            let decision: RoutingDecision = serde_json::from_str(&a.routing).ok()?;
            Some(RoutingDecisionView {
                attempt_id: a.id,
                number: a.number,
                outcome: a.status,
                decision,
            })
        })
        .collect();
    Ok(HttpResponse::Ok().json(Items { data }))
}

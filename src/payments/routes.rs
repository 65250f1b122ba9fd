//! Handlers of the payment routes and of the shops' processor and routing settings.

use actix_web::{web, HttpResponse};
use chrono::Duration;
use payd_entity::payment;

use super::{
    actor::{Access, Command, Done, Exec, Patch, PaymentError},
    api::{
        captured_shares, check_metadata, check_text, parse_amount, parse_currency, parse_lines,
        Attempt, CancelPaymentRequest, CaptureMethodDto, CapturePaymentRequest,
        ConfirmPaymentRequest, CreatePaymentRequest, Items, Line, LineBalance, ListPaymentsRequest,
        MandateRequest, MandateType, Payment, PaymentMethodData, RetrieveQuery, RoutingDecision,
        RoutingDecisionView, StatusChange, UpdatePaymentRequest,
    },
    machine::Status,
    routing::RoutingRules,
    store,
};
use crate::{
    accounts::shop_in_path,
    app::AppState,
    auth::{AnyKey, Caller, KeyKind, SecretKey},
    customers::{self, api::check_mandate},
    error::{ApiError, ErrorType},
    http::{ApiJson, ApiQuery},
    ids::new_id,
    pagination::{List, Page},
    processors::{card::parse_card, remote::RemoteConfig, SecretCard, StoredCard},
    webhooks::routes::check_url,
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
        )
        .service(
            web::resource("/account/shops/{profile_id}/processors")
                .route(web::get().to(list_processors))
                .route(web::post().to(add_processor)),
        )
        .service(
            web::resource("/account/shops/{profile_id}/routing")
                .route(web::get().to(get_routing))
                .route(web::put().to(put_routing)),
        );
}

impl From<PaymentError> for ApiError {
    #[track_caller]
    fn from(e: PaymentError) -> Self {
        match e {
            PaymentError::NotFound => ApiError::not_found("payment"),
            PaymentError::Forbidden => ApiError::forbidden(
                "client_secret_mismatch",
                "the client_secret does not belong to this payment",
            )
            .param("client_secret"),
            PaymentError::Refused(r) => match r {
                super::machine::Refusal::InvalidState(_) => {
                    ApiError::conflict("invalid_state", r.to_string())
                }
                super::machine::Refusal::AmountNotPositive => {
                    ApiError::invalid("amount_not_positive", r.to_string()).param("amount")
                }
                super::machine::Refusal::AmountExceedsCapturable(_) => {
                    ApiError::invalid("amount_exceeds_capturable", r.to_string()).param("amount")
                }
            },
            PaymentError::Invalid(e) => e,
            PaymentError::RefundNotFound => ApiError::not_found("refund"),
            PaymentError::RefundRefused(r) => match r {
                super::refunds::Refusal::InvalidState(_) => {
                    ApiError::conflict("invalid_state", r.to_string())
                }
                super::refunds::Refusal::DisputeOpen { .. } => {
                    ApiError::conflict("dispute_open", r.to_string()).param("payment_id")
                }
                super::refunds::Refusal::ExceedsRefundable { .. } => {
                    ApiError::invalid("amount_exceeds_refundable", r.to_string()).param("amount")
                }
                _ => {
                    let mut e = ApiError::invalid("parameter_invalid", r.to_string());
                    e.param = r.param().map(str::to_owned);
                    e
                }
            },
            PaymentError::LostRace => ApiError::conflict(
                "concurrent_update",
                "the payment was changed by another request; retry",
            ),
            PaymentError::Processor(p) => ApiError::new(
                actix_web::http::StatusCode::BAD_GATEWAY,
                ErrorType::Processor,
                "processor_error",
                p.to_string(),
            ),
            PaymentError::Db(e) => ApiError::internal(format!("database: {e}")),
        }
    }
}

fn public_url(state: &AppState) -> &str {
    &state.public_url
}

fn render(state: &AppState, m: &payment::Model) -> HttpResponse {
    HttpResponse::Ok().json(Payment::render(m, public_url(state)))
}

pub fn access(caller: &Caller, client_secret: Option<String>) -> Result<Access, ApiError> {
    let client_secret = match caller.kind {
        KeyKind::Secret => None,
        KeyKind::Publishable => Some(client_secret.ok_or_else(|| {
            ApiError::forbidden(
                "client_secret_required",
                "a publishable key needs the payment's client_secret",
            )
            .param("client_secret")
        })?),
    };
    Ok(Access {
        merchant_id: caller.merchant_id.to_string(),
        test_mode: caller.test_mode(),
        client_secret,
    })
}

/// Runs a command through the payment's actor.
pub async fn exec(
    state: &AppState,
    id: &str,
    access: Option<Access>,
    command: Command,
) -> Result<Done, ApiError> {
    if !crate::ids::has_shape(id, "pay") {
        return Err(ApiError::not_found("payment"));
    }
    Ok(state.payments.send(id, Exec { access, command }).await??)
}

/// Runs a command and answers with the payment.
pub(crate) async fn send(
    state: &AppState,
    id: &str,
    access: Option<Access>,
    command: Command,
) -> Result<payment::Model, ApiError> {
    Ok(exec(state, id, access, command).await?.payment)
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
    responses((status = 200, body = Payment), (status = 400, body = crate::openapi::ErrorBody)),
    security(("api_key" = [])))]
pub async fn create_payment(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
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
        let access = access(&caller, None)?;
        let fresh = &state.payments.deps().fresh;
        fresh.insert(m.id.clone(), m.clone());
        let confirmed = send(
            &state,
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
    responses((status = 200, body = Payment), (status = 404, body = crate::openapi::ErrorBody)),
    security(("api_key" = [])))]
pub async fn retrieve_payment(
    AnyKey(caller): AnyKey,
    state: web::Data<AppState>,
    id: web::Path<String>,
    ApiQuery(q): ApiQuery<RetrieveQuery>,
) -> Result<HttpResponse, ApiError> {
    let access = access(&caller, q.client_secret)?;
    if q.force_sync == Some(true) {
        let m = send(&state, &id, Some(access), Command::Sync).await?;
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
    responses((status = 200, body = Payment), (status = 409, body = crate::openapi::ErrorBody)),
    security(("api_key" = [])))]
pub async fn update_payment(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
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
        &state,
        &id,
        Some(access(&caller, None)?),
        Command::Update(Box::new(patch)),
    )
    .await?;
    Ok(render(&state, &m))
}

/// Confirm a payment with a payment method (publishable keys need the `client_secret`).
#[utoipa::path(post, path = "/payments/{payment_id}/confirm", tag = "payments", request_body = ConfirmPaymentRequest,
    params(("payment_id" = String, Path)),
    responses((status = 200, body = Payment), (status = 409, body = crate::openapi::ErrorBody)),
    security(("api_key" = [])))]
pub async fn confirm_payment(
    AnyKey(caller): AnyKey,
    state: web::Data<AppState>,
    id: web::Path<String>,
    ApiJson(req): ApiJson<ConfirmPaymentRequest>,
) -> Result<HttpResponse, ApiError> {
    let access = access(&caller, req.client_secret)?;
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
        &state,
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
    responses((status = 200, body = Payment), (status = 400, body = crate::openapi::ErrorBody), (status = 409, body = crate::openapi::ErrorBody)),
    security(("api_key" = [])))]
pub async fn capture_payment(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
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
    let m = send(&state, &id, Some(access(&caller, None)?), command).await?;
    Ok(render(&state, &m))
}

/// Cancel a payment or release its authorization.
#[utoipa::path(post, path = "/payments/{payment_id}/cancel", tag = "payments", request_body = CancelPaymentRequest,
    params(("payment_id" = String, Path)),
    responses((status = 200, body = Payment), (status = 409, body = crate::openapi::ErrorBody)),
    security(("api_key" = [])))]
pub async fn cancel_payment(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    id: web::Path<String>,
    ApiJson(req): ApiJson<CancelPaymentRequest>,
) -> Result<HttpResponse, ApiError> {
    check_text("reason", req.reason.as_ref(), 500)?;
    let m = send(&state, &id, Some(access(&caller, None)?), Command::Cancel).await?;
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

/// A processor account of a shop.
#[derive(serde::Serialize, utoipa::ToSchema)]
pub struct ProcessorAccount {
    pub name: String,
    pub kind: String,
    pub enabled: bool,
    pub created: chrono::DateTime<chrono::Utc>,
}

#[derive(serde::Deserialize, utoipa::ToSchema)]
#[serde(deny_unknown_fields)]
pub struct AddProcessorRequest {
    /// Unique within the shop: letters, digits, `-` and `_`.
    pub name: String,
    /// `sandbox` (default) or `remote`.
    #[serde(default)]
    pub kind: Option<String>,
    /// `remote`: the processor's base URL (`docs/processor-protocol.md`).
    #[serde(default)]
    pub url: Option<String>,
    /// `remote`: the secret shared with the processor (16 to 200 characters); signs requests.
    #[serde(default)]
    pub secret: Option<String>,
    /// `remote`: per-request timeout (default `processors.default_timeout_ms`).
    #[serde(default)]
    pub timeout_ms: Option<u64>,
}

/// The shop's processor accounts (a shop without any uses one named `sandbox`).
#[utoipa::path(get, path = "/account/shops/{profile_id}/processors", tag = "account",
    params(("profile_id" = String, Path)),
    responses((status = 200, body = Items<ProcessorAccount>)), security(("api_key" = [])))]
pub async fn list_processors(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    profile: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let shop = shop_in_path(&state, &caller, &profile).await?;
    let data: Vec<ProcessorAccount> = store::accounts(&state.db, shop.as_str())
        .await?
        .into_iter()
        .map(|a| ProcessorAccount {
            name: a.name,
            kind: a.kind,
            enabled: a.enabled,
            created: a.created_at,
        })
        .collect();
    Ok(HttpResponse::Ok().json(Items { data }))
}

/// Add a sandbox processor account to a shop.
#[utoipa::path(post, path = "/account/shops/{profile_id}/processors", tag = "account",
    params(("profile_id" = String, Path)), request_body = AddProcessorRequest,
    responses((status = 201, body = ProcessorAccount), (status = 409, body = crate::openapi::ErrorBody)),
    security(("api_key" = [])))]
pub async fn add_processor(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    profile: web::Path<String>,
    ApiJson(req): ApiJson<AddProcessorRequest>,
) -> Result<HttpResponse, ApiError> {
    let shop = shop_in_path(&state, &caller, &profile).await?;
    let name = req.name.trim();
    if name.is_empty()
        || name.len() > 40
        || !name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_')
    {
        return Err(ApiError::invalid_param(
            "name",
            "1 to 40 letters, digits, - or _",
        ));
    }
    let config = match req.kind.as_deref().unwrap_or("sandbox") {
        "sandbox" => None,
        "remote" => {
            let settings = &state.settings.processors;
            let url = req.url.as_deref().ok_or_else(|| {
                ApiError::invalid("parameter_missing", "a remote processor needs a url")
                    .param("url")
            })?;
            let url = check_url(url, settings.allow_private_urls)?;
            let secret = req
                .secret
                .clone()
                .filter(|s| (16..=200).contains(&s.len()))
                .ok_or_else(|| {
                    ApiError::invalid_param(
                        "secret",
                        "a remote processor needs a shared secret of 16 to 200 characters",
                    )
                })?;
            let timeout_ms = req.timeout_ms.unwrap_or(settings.default_timeout_ms);
            if !(100..=120_000).contains(&timeout_ms) {
                return Err(ApiError::invalid_param(
                    "timeout_ms",
                    "timeout_ms must be 100 to 120000",
                ));
            }
            serde_json::to_string(&RemoteConfig {
                url,
                secret,
                timeout_ms,
            })
            .ok()
        }
        _ => return Err(ApiError::invalid_param("kind", "kind is sandbox or remote")),
    };
    let row = store::insert_account(
        &state.db,
        caller.merchant_id.as_str(),
        shop.as_str(),
        name,
        config,
        state.clock.now(),
    )
    .await?
    .ok_or_else(|| {
        ApiError::conflict(
            "processor_exists",
            format!("the shop already has a processor named {name:?}"),
        )
        .param("name")
    })?;
    Ok(HttpResponse::Created().json(ProcessorAccount {
        name: row.name,
        kind: row.kind,
        enabled: row.enabled,
        created: row.created_at,
    }))
}

/// The shop's routing rules.
#[utoipa::path(get, path = "/account/shops/{profile_id}/routing", tag = "account",
    params(("profile_id" = String, Path)),
    responses((status = 200, body = RoutingRules)), security(("api_key" = [])))]
pub async fn get_routing(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    profile: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let shop = shop_in_path(&state, &caller, &profile).await?;
    Ok(HttpResponse::Ok().json(store::routing_rules(&state.db, shop.as_str()).await?))
}

/// Replace the shop's routing rules.
#[utoipa::path(put, path = "/account/shops/{profile_id}/routing", tag = "account",
    params(("profile_id" = String, Path)), request_body = RoutingRules,
    responses((status = 200, body = RoutingRules), (status = 400, body = crate::openapi::ErrorBody)),
    security(("api_key" = [])))]
pub async fn put_routing(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    profile: web::Path<String>,
    ApiJson(rules): ApiJson<RoutingRules>,
) -> Result<HttpResponse, ApiError> {
    let shop = shop_in_path(&state, &caller, &profile).await?;
    let names: Vec<String> = store::accounts(&state.db, shop.as_str())
        .await?
        .into_iter()
        .map(|a| a.name)
        .collect();
    rules.validate(&names)?;
    store::put_routing_rules(&state.db, shop.as_str(), &rules, state.clock.now()).await?;
    Ok(HttpResponse::Ok().json(rules))
}

//! A new payment: the rules of its customer side (the customer, a saved method, a mandate to
//! charge off-session, a card to save for later), its fields and its row, and the confirm that
//! `confirm: true` asks for. Handlers of other routes use its card, saved-method and return-URL
//! checks.

use chrono::Duration;
use payd_entity::payment;

use super::{
    actor::{run, Access, Command, PaymentDeps, Payments},
    api::{
        parse_lines, CaptureMethodDto, ConfirmPaymentRequest, CreatePaymentRequest, MandateRequest,
        MandateType, PaymentMethodData,
    },
    machine::{Line, Status},
    store,
};
use crate::commit::Db;
use crate::{
    auth::keys::Caller,
    customers::{self, api::check_mandate},
    error::ApiError,
    fields::{check_metadata, check_text, parse_amount, parse_currency},
    ids::new_id,
    processors::card::{parse_card, SecretCard, StoredCard},
    products,
    recovery::RequestKey,
};

/// Who makes a new payment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Maker {
    /// The merchant, through the API: its lines must name what the shop sells now.
    Merchant,
    /// payd, for a subscription's cycle: the payment's id was chosen and recorded before it is
    /// made (intent before effect), and its lines name the subscription's recurring prices,
    /// which it bills as agreed even after the catalog archived them.
    Subscription { payment_id: String },
}

/// Checks and inserts a new payment, and confirms it when asked (`confirm: true`); `resume`
/// continues an existing payment instead.
pub async fn create(
    payments: &Payments,
    caller: &Caller,
    req: CreatePaymentRequest,
    key: Option<RequestKey>,
    resume: Option<String>,
    maker: Maker,
) -> Result<payment::Model, ApiError> {
    let deps = payments.deps();
    let profile = caller.require_shop()?.clone();
    let amount = parse_amount("amount", req.amount, deps.settings.limits.max_amount)?;
    let currency = parse_currency("currency", &req.currency)?;
    let side = customer_side(deps, caller, &req, amount, &currency).await?;
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
    let now = deps.clock.now();
    let (id, catalog) = identify(deps, caller, maker, lines.as_deref(), &currency, now).await?;
    let m = payment::Model {
        id,
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
        pending_operation: None,
        version: 0,
        created_at: now,
        updated_at: now,
    };
    let command = if req.confirm {
        Command::Confirm {
            card,
            secret,
            return_url: None,
        }
    } else {
        Command::Sync
    };
    insert_and_run(payments, caller, m, catalog, command, key, resume).await
}

/// The new payment's id, and the writes its lines add to its commit: a merchant's lines are
/// checked against the shop's catalog (`check_catalog`); a subscription's were checked when
/// it was made, and are indexed for the sales report as they are.
async fn identify(
    deps: &PaymentDeps,
    caller: &Caller,
    maker: Maker,
    lines: Option<&[Line]>,
    currency: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(String, Vec<crate::commit::Write>), ApiError> {
    match maker {
        Maker::Merchant => {
            let id = new_id("pay");
            let catalog = match lines {
                Some(lines) => {
                    check_catalog(&deps.db, &caller.scope(), &id, lines, currency, now).await?
                }
                None => Vec::new(),
            };
            Ok((id, catalog))
        }
        Maker::Subscription { payment_id } => {
            let index = lines.into_iter().flatten().flat_map(|l| {
                products::store::line_index(
                    &payment_id,
                    &l.line_id,
                    l.product_id.as_deref(),
                    l.price_id.as_deref(),
                    now,
                )
            });
            let index = index.collect();
            Ok((payment_id, index))
        }
    }
}

/// Inserts the new payment `m` with the writes its lines add (`catalog`), and runs `command`
/// on it: a confirm when the request asked for one.
///
/// The retry of a request whose payment was made but whose answer was lost (`resume`) carries
/// on from that payment instead: it is confirmed if it still waits for that, else answered as
/// it stands (reconciled with the processor). Never a second payment.
async fn insert_and_run(
    payments: &Payments,
    caller: &Caller,
    m: payment::Model,
    catalog: Vec<crate::commit::Write>,
    command: Command,
    key: Option<RequestKey>,
    resume: Option<String>,
) -> Result<payment::Model, ApiError> {
    let deps = payments.deps();
    let access = Access::of(caller, None)?;
    let resumed = match resume {
        Some(id) => store::find_owned(&deps.db, &id, &access.scope).await?,
        None => None,
    };
    if let Some(m) = resumed {
        // An authorization sent but not answered is reconciled by the sync, not sent again.
        let waits =
            m.status == Status::RequiresConfirmation.as_str() && m.pending_operation.is_none();
        let command = if waits { command } else { Command::Sync };
        return Ok(run(payments, &m.id, Some(access), command, key)
            .await?
            .payment);
    }
    let now = m.created_at;
    let m = store::insert(&deps.db, m, now, key.as_ref(), catalog).await?;
    if matches!(command, Command::Sync) {
        return Ok(m);
    }
    let fresh = &deps.fresh;
    fresh.insert(m.id.clone(), m.clone());
    let confirmed = run(payments, &m.id, Some(access), command, key).await;
    fresh.remove(&m.id);
    Ok(confirmed?.payment)
}

/// Lines that name a catalog product or price must match the shop's catalog: both exist in
/// the caller's shop and are on sale, the price belongs to the product, is one-off, in the
/// payment's currency and of the line's `unit_amount`. Returns the writes the payment's
/// commit adds for them (they hold the product and price on sale until it is written, and
/// index the line for the sales report).
async fn check_catalog(
    db: &Db,
    scope: &crate::auth::keys::Scope,
    payment_id: &str,
    lines: &[Line],
    currency: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<crate::commit::Write>, ApiError> {
    let mut writes = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let param = |f: &str| format!("lines[{i}].{f}");
        if l.product_id.is_none() && l.price_id.is_none() {
            continue;
        }
        let price = match &l.price_id {
            Some(id) => Some(
                match crate::ids::PriceId::parse(id) {
                    Some(_) => products::store::find_price(db, id).await?,
                    None => None,
                }
                .filter(|p| scope.sees(&p.merchant_id, p.test_mode, &p.profile_id))
                .ok_or_else(|| line_error(&param("price_id"), "no such price in this shop"))?,
            ),
            None => None,
        };
        let product_id = match (&l.product_id, &price) {
            (Some(p), Some(price)) if p != &price.product_id => {
                return Err(line_error(
                    &param("price_id"),
                    "the price belongs to another product",
                ))
            }
            (Some(p), _) => p.clone(),
            (None, Some(price)) => price.product_id.clone(),
            (None, None) => continue,
        };
        let product = match crate::ids::ProductId::parse(&product_id) {
            Some(_) => products::store::find_owned(db, &product_id, scope).await?,
            None => None,
        }
        .ok_or_else(|| line_error(&param("product_id"), "no such product in this shop"))?;
        if !product.active {
            return Err(line_error(&param("product_id"), "the product is archived"));
        }
        if let Some(price) = &price {
            if !price.active {
                return Err(line_error(&param("price_id"), "the price is archived"));
            }
            if price.currency != currency {
                return Err(line_error(
                    &param("price_id"),
                    &format!(
                        "the price is in {}, the payment in {currency}",
                        price.currency
                    ),
                ));
            }
            if price.recurring_interval.is_some() {
                return Err(line_error(
                    &param("price_id"),
                    "a recurring price is billed by a subscription, not a payment line",
                ));
            }
            if price.unit_amount != l.unit_amount {
                return Err(line_error(
                    &param("unit_amount"),
                    &format!("the price's unit_amount is {}", price.unit_amount),
                ));
            }
        }
        writes.extend(products::store::line_writes(
            payment_id,
            &l.line_id,
            l.product_id.as_deref().or(Some(product.id.as_str())),
            l.price_id.as_deref(),
            now,
        ));
    }
    Ok(writes)
}

fn line_error(param: &str, message: &str) -> ApiError {
    ApiError::invalid("line_catalog_mismatch", message).param(param)
}

pub fn parse_card_data(
    deps: &PaymentDeps,
    caller: &Caller,
    data: Option<&PaymentMethodData>,
) -> Result<Option<StoredCard>, ApiError> {
    data.map(|d| {
        parse_card(
            &d.card,
            "payment_method_data.card",
            deps.clock.now(),
            &deps.settings.security.key_pepper,
            caller.merchant_id.as_str(),
            caller.test_mode(),
        )
    })
    .transpose()
}

/// The card of a customer's saved method (another customer's is 404).
pub async fn saved_card(
    db: &Db,
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
    let pm = customers::store::find_method(db, pm_id)
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
    deps: &PaymentDeps,
    caller: &Caller,
    req: &CreatePaymentRequest,
    amount: i64,
    currency: &str,
) -> Result<CustomerSide, ApiError> {
    let customer = match &req.customer_id {
        None => None,
        Some(id) => Some(chargeable_customer(&deps.db, caller, id).await?),
    };
    let customer_id = customer.as_ref().map(|c| c.id.clone());
    let future_usage = future_usage(req)?;
    if future_usage.is_some() && customer.is_none() {
        return Err(needs_customer("setup_future_usage"));
    }
    let mandate_request = mandate_request(deps, req, future_usage, currency)?;
    let mut card = parse_card_data(deps, caller, req.payment_method_data.as_ref())?;
    if let Some(pm_id) = &req.payment_method_id {
        if card.is_some() {
            return Err(ApiError::invalid_param(
                "payment_method_id",
                "send payment_method_data or payment_method_id, not both",
            ));
        }
        card = Some(saved_card(&deps.db, customer_id.as_deref(), pm_id).await?);
    }
    let off_session = req.off_session.unwrap_or(false);
    let mandate = match &req.mandate_id {
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
            Some(mandate_of(deps, req, c, id, amount, currency).await?)
        }
    };
    if let (Some(m), None) = (&mandate, &card) {
        card = Some(
            saved_card(&deps.db, customer_id.as_deref(), &m.payment_method_id)
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
    Ok(CustomerSide {
        customer_id,
        card,
        mandate_id: mandate.map(|m| m.id),
        future_usage,
        mandate_request,
        off_session,
    })
}

fn needs_customer(param: &str) -> ApiError {
    ApiError::invalid("customer_required", format!("{param} needs customer_id"))
        .param("customer_id")
}

/// A customer of the caller's merchant and mode that was not deleted.
async fn chargeable_customer(
    db: &Db,
    caller: &Caller,
    id: &str,
) -> Result<payd_entity::customer::Model, ApiError> {
    let c = customers::store::find_owned(db, id, caller.merchant_id.as_str(), caller.test_mode())
        .await?
        .ok_or_else(|| ApiError::not_found("customer").param("customer_id"))?;
    if c.redacted_at.is_some() {
        return Err(ApiError::conflict(
            "customer_redacted",
            "this customer was deleted and cannot be charged",
        )
        .param("customer_id"));
    }
    Ok(c)
}

fn future_usage(req: &CreatePaymentRequest) -> Result<Option<&'static str>, ApiError> {
    match req.setup_future_usage.as_deref() {
        None => Ok(None),
        Some("off_session") => Ok(Some("off_session")),
        Some("on_session") => Ok(Some("on_session")),
        Some(_) => Err(ApiError::invalid_param(
            "setup_future_usage",
            "setup_future_usage is off_session or on_session",
        )),
    }
}

/// The mandate a payment saving its card for off-session use asks for (`mandate_data`).
fn mandate_request(
    deps: &PaymentDeps,
    req: &CreatePaymentRequest,
    future_usage: Option<&str>,
    currency: &str,
) -> Result<Option<MandateRequest>, ApiError> {
    match (&req.mandate_data, future_usage) {
        (Some(_), Some("on_session")) | (Some(_), None) => Err(ApiError::invalid_param(
            "mandate_data",
            "mandate_data goes with setup_future_usage: off_session",
        )),
        (data, Some("off_session")) => {
            let limit = data.as_ref().and_then(|d| d.amount_limit);
            if limit.is_some_and(|l| l <= 0) {
                return Err(ApiError::invalid_param(
                    "mandate_data.amount_limit",
                    "amount_limit must be greater than 0",
                ));
            }
            let ends_at = data.as_ref().and_then(|d| d.ends_at);
            if ends_at.is_some_and(|t| t <= deps.clock.now()) {
                return Err(ApiError::invalid_param(
                    "mandate_data.ends_at",
                    "ends_at must be in the future",
                ));
            }
            Ok(Some(MandateRequest {
                single_use: data.as_ref().and_then(|d| d.mandate_type)
                    == Some(MandateType::SingleUse),
                amount_limit: limit,
                currency: currency.to_owned(),
                ends_at,
            }))
        }
        _ => Ok(None),
    }
}

/// The customer's mandate `id`, if it covers this charge and the request sends no other card
/// than the mandate's own saved method.
async fn mandate_of(
    deps: &PaymentDeps,
    req: &CreatePaymentRequest,
    customer: &payd_entity::customer::Model,
    id: &str,
    amount: i64,
    currency: &str,
) -> Result<payd_entity::mandate::Model, ApiError> {
    let m = customers::store::find_mandate(&deps.db, id)
        .await?
        .filter(|m| m.customer_id == customer.id)
        .ok_or_else(|| ApiError::not_found("mandate").param("mandate_id"))?;
    check_mandate(&m, amount, currency, deps.clock.now())?;
    // A mandate covers its own saved method, no other card.
    let other_method = if req.payment_method_data.is_some() {
        Some("payment_method_data")
    } else if req
        .payment_method_id
        .as_ref()
        .is_some_and(|pm| *pm != m.payment_method_id)
    {
        Some("payment_method_id")
    } else {
        None
    };
    if let Some(param) = other_method {
        return Err(ApiError::invalid(
            "mandate_method_mismatch",
            "a mandate charges the payment method it was made for; send no other card",
        )
        .param(param));
    }
    Ok(m)
}

/// The card a confirm sends (`payment_method_data`, with its number and code for the
/// processor) or names (a saved `payment_method_id` of the payment's customer); none: the
/// payment's own.
pub async fn confirm_card(
    deps: &PaymentDeps,
    caller: &Caller,
    access: &Access,
    id: &str,
    req: &ConfirmPaymentRequest,
) -> Result<(Option<StoredCard>, Option<SecretCard>), ApiError> {
    let card = parse_card_data(deps, caller, req.payment_method_data.as_ref())?;
    let secret = req
        .payment_method_data
        .as_ref()
        .map(|d| SecretCard::from(&d.card));
    let Some(pm_id) = &req.payment_method_id else {
        return Ok((card, secret));
    };
    if card.is_some() {
        return Err(ApiError::invalid_param(
            "payment_method_id",
            "send payment_method_data or payment_method_id, not both",
        ));
    }
    let payment = store::find_owned(&deps.db, id, &access.scope)
        .await?
        .ok_or_else(|| ApiError::not_found("payment"))?;
    let saved = saved_card(&deps.db, payment.customer_id.as_deref(), pm_id).await?;
    Ok((Some(saved), secret))
}

/// A return URL: http or https only (a `javascript:` URL would run on payd's checkout page).
pub fn return_url(value: Option<&String>) -> Result<Option<String>, ApiError> {
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

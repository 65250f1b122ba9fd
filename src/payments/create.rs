//! A new payment: what its request names looked up (the customer, a saved method, a mandate
//! to charge off-session, the catalog's products and prices), its row, and the confirm that
//! `confirm: true` asks for. The request was parsed at the edge (`NewPayment`); what can go
//! wrong here is a [`CreateError`], which the routes map to the API's error.

use chrono::Duration;
use payd_entity::payment;
use sea_orm::DbErr;

use super::{
    actor::{run, Access, Command, Fresh, PaymentDeps, PaymentError, Payments},
    api::{ConfirmAsk, NewPayment, SentCard},
    machine::{Line, Status},
    processor_accounts, store,
};
use crate::commit::Db;
use crate::stored::Json;
use crate::{
    auth::keys::Scope,
    customers::{
        self,
        api::{check_mandate, MandateRefusal},
    },
    ids::{CustomerId, MandateId, PaymentId, PaymentMethodId},
    processors::{
        card::{fingerprint, ProcessorToken, SecretCard, StoredCard},
        connect::{self, AccountKind, Approval},
        ProcessorError,
    },
    products,
    recovery::RequestKey,
};

/// Why a new payment, or a confirm's card, was refused after its request was parsed: what it
/// names is not there or does not fit.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error("no such customer")]
    NoSuchCustomer,
    #[error("this customer was deleted and cannot be charged")]
    CustomerRedacted,
    /// A saved method was named for a payment without a customer.
    #[error("payment_method_id needs the payment's customer_id")]
    CustomerRequired,
    #[error("no such payment method")]
    NoSuchMethod,
    #[error("no such mandate")]
    NoSuchMandate,
    #[error(transparent)]
    Mandate(#[from] MandateRefusal),
    /// The request sends a card (the field named) besides the mandate's own method.
    #[error("a mandate charges the payment method it was made for; send no other card")]
    MandateMethodMismatch(&'static str),
    #[error("the mandate's payment method was deleted")]
    MandateMethodDeleted,
    /// A line names a product or price the shop's catalog does not have as the line says.
    #[error("{message}")]
    LineMismatch { param: String, message: String },
    /// A Stripe PaymentMethod sent (`payment_method_data.stripe`) that no Stripe account of the
    /// shop can charge; `param` names the field.
    #[error("{message}")]
    StripeMethod {
        param: &'static str,
        message: String,
    },
    #[error(transparent)]
    Payment(#[from] PaymentError),
    #[error("database: {0}")]
    Db(#[from] DbErr),
}

impl From<crate::commit::CommitError> for CreateError {
    fn from(e: crate::commit::CommitError) -> Self {
        CreateError::Payment(e.into())
    }
}

/// Who makes a new payment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Maker {
    /// The merchant, through the API: its lines must name what the shop sells now.
    Merchant,
    /// payd, for another resource (`charge`, a subscription's cycle): the payment's id was
    /// chosen and recorded before it is made (intent before effect), and its lines name what
    /// the resource bills as agreed (a subscription's recurring prices), even after the
    /// catalog archived them.
    Charge { payment_id: PaymentId },
}

/// Inserts a new payment, and confirms it when asked (`confirm: true`); `resume` continues an
/// existing payment instead.
pub async fn create(
    payments: &Payments,
    scope: &Scope,
    ask: NewPayment,
    key: Option<RequestKey>,
    resume: Option<PaymentId>,
    maker: Maker,
) -> Result<payment::Model, CreateError> {
    let deps = payments.deps();
    let side = customer_side(deps, scope, &ask).await?;
    let now = deps.clock.now();
    let lines = ask.lines.as_deref();
    let currency = &ask.amount.currency;
    let (id, catalog) = identify(deps, scope, maker, lines, currency, now).await?;
    let (card, secret) = match (ask.card, side.saved) {
        (Some(sent), _) => {
            let shop = (scope.merchant_id.as_str(), ask.shop.as_str());
            let (card, secret) = card_sent(deps, shop, scope.test_mode, sent).await?;
            (Some(card), secret)
        }
        (None, saved) => (saved, None),
    };
    let m = payment::Model {
        id,
        merchant_id: scope.merchant_id.clone(),
        profile_id: ask.shop,
        test_mode: scope.test_mode,
        status: if card.is_some() {
            Status::RequiresConfirmation
        } else {
            Status::RequiresPaymentMethod
        },
        amount: ask.amount.minor,
        currency: ask.amount.currency,
        capture_method: super::machine::CaptureMethod::of(ask.manual_capture),
        amount_authorized: 0,
        amount_captured: 0,
        amount_refunded: 0,
        confirm_attempts: 0,
        max_attempts: 3,
        enable_partial_authorization: ask.enable_partial_authorization,
        customer_id: side.customer_id,
        mandate_id: side.mandate_id,
        setup_future_usage: ask.future_usage,
        off_session: ask.off_session,
        mandate_request: ask.mandate_request.map(Json),
        payment_method: card.clone().map(Json),
        processor: None,
        processor_reference: None,
        last_error: None,
        lines: ask.lines.clone().map(Json),
        metadata: Json(ask.metadata),
        description: ask.description,
        return_url: ask.return_url,
        hosted_checkout: ask.hosted_checkout,
        locale: ask.locale,
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
    let command = if ask.confirm {
        Command::Confirm {
            card,
            secret,
            return_url: None,
        }
    } else {
        Command::Sync
    };
    insert_and_run(payments, scope, m, catalog, command, key, resume).await
}

/// The new payment's id, and the writes its lines add to its commit: a merchant's lines are
/// checked against the shop's catalog (`check_catalog`); a subscription's were checked when
/// it was made, and are indexed for the sales report as they are.
async fn identify(
    deps: &PaymentDeps,
    scope: &Scope,
    maker: Maker,
    lines: Option<&[Line]>,
    currency: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<(PaymentId, Vec<crate::commit::Write>), CreateError> {
    match maker {
        Maker::Merchant => {
            let id = PaymentId::new();
            let catalog = match lines {
                Some(lines) => check_catalog(&deps.db, scope, &id, lines, currency, now).await?,
                None => Vec::new(),
            };
            Ok((id, catalog))
        }
        Maker::Charge { payment_id } => {
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
    scope: &Scope,
    m: payment::Model,
    catalog: Vec<crate::commit::Write>,
    command: Command,
    key: Option<RequestKey>,
    resume: Option<PaymentId>,
) -> Result<payment::Model, CreateError> {
    let deps = payments.deps();
    let access = Access::server(scope);
    let resumed = match resume {
        Some(id) => crate::owned::find_owned(&deps.db, &id, &access.scope).await?,
        None => None,
    };
    if let Some(m) = resumed {
        // An authorization sent but not answered is reconciled by the sync, not sent again.
        let waits = m.status == Status::RequiresConfirmation && m.pending_operation.is_none();
        let command = if waits { command } else { Command::Sync };
        return Ok(run(payments, &m.id, Some(access), command, key)
            .await?
            .payment);
    }
    let created = store::created(&m, key.clone(), catalog);
    if matches!(command, Command::Sync) {
        store::insert(&deps.db, &m, created).await?;
        return Ok(m);
    }
    // Written with the confirm's first commit: one transaction for both. Were the actor never
    // to take it, nothing was written and the request fails.
    let fresh = Fresh {
        row: m.clone(),
        unwritten: Some(created),
    };
    deps.fresh.insert(m.id.clone(), fresh);
    let confirmed = run(payments, &m.id, Some(access), command, key).await;
    deps.fresh.remove(&m.id);
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
    payment_id: &PaymentId,
    lines: &[Line],
    currency: &str,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<Vec<crate::commit::Write>, CreateError> {
    let mut writes = Vec::new();
    for (i, l) in lines.iter().enumerate() {
        let param = |f: &str| format!("lines[{i}].{f}");
        if l.product_id.is_none() && l.price_id.is_none() {
            continue;
        }
        let price = match &l.price_id {
            Some(id) => Some(
                match crate::ids::PriceId::parse(id) {
                    Some(id) => products::store::find_price(db, &id).await?,
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
            (None, Some(price)) => price.product_id.to_string(),
            (None, None) => continue,
        };
        let product = match crate::ids::ProductId::parse(&product_id) {
            Some(id) => crate::owned::find_owned(db, &id, scope).await?,
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

fn line_error(param: &str, message: &str) -> CreateError {
    CreateError::LineMismatch {
        param: param.to_owned(),
        message: message.to_owned(),
    }
}

/// The card of a customer's saved method (another customer's is not there).
pub async fn saved_card(
    db: &Db,
    customer_id: Option<&CustomerId>,
    pm_id: &str,
) -> Result<StoredCard, CreateError> {
    let customer_id = customer_id.ok_or(CreateError::CustomerRequired)?;
    let Some(pm_id) = PaymentMethodId::parse(pm_id) else {
        return Err(CreateError::NoSuchMethod);
    };
    let pm = customers::store::find_method(db, &pm_id)
        .await?
        .filter(|pm| pm.customer_id == *customer_id)
        .ok_or(CreateError::NoSuchMethod)?;
    Ok(pm.card.0)
}

/// What a new payment's customer side looks up: the mandate it charges under, and the saved
/// card it charges (named, or the mandate's own).
struct CustomerSide {
    customer_id: Option<CustomerId>,
    mandate_id: Option<MandateId>,
    saved: Option<StoredCard>,
}

async fn customer_side(
    deps: &PaymentDeps,
    scope: &Scope,
    ask: &NewPayment,
) -> Result<CustomerSide, CreateError> {
    let customer = match &ask.customer_id {
        None => None,
        Some(id) => Some(chargeable_customer(&deps.db, scope, id).await?),
    };
    let customer_id = customer.as_ref().map(|c| &c.id);
    let mut saved = match &ask.payment_method_id {
        Some(pm_id) => Some(saved_card(&deps.db, customer_id, pm_id).await?),
        None => None,
    };
    // The request's parse made sure a mandate comes with its customer.
    let mandate = match (&ask.mandate_id, &customer) {
        (Some(id), Some(c)) => Some(mandate_of(deps, ask, c, id).await?),
        _ => None,
    };
    if let (Some(m), None, None) = (&mandate, &ask.card, &saved) {
        saved = Some(
            saved_card(&deps.db, customer_id, &m.payment_method_id)
                .await
                .map_err(|_| CreateError::MandateMethodDeleted)?,
        );
    }
    Ok(CustomerSide {
        customer_id: customer.map(|c| c.id),
        mandate_id: mandate.map(|m| m.id),
        saved,
    })
}

/// A customer of the caller's merchant and mode that was not deleted.
async fn chargeable_customer(
    db: &Db,
    scope: &Scope,
    id: &str,
) -> Result<payd_entity::customer::Model, CreateError> {
    let id = CustomerId::parse(id).ok_or(CreateError::NoSuchCustomer)?;
    let c = crate::owned::find_owned(db, &id, scope)
        .await?
        .ok_or(CreateError::NoSuchCustomer)?;
    if c.redacted_at.is_some() {
        return Err(CreateError::CustomerRedacted);
    }
    Ok(c)
}

/// The customer's mandate `id`, if it covers this charge and the request sends no other card
/// than the mandate's own saved method.
async fn mandate_of(
    deps: &PaymentDeps,
    ask: &NewPayment,
    customer: &payd_entity::customer::Model,
    id: &str,
) -> Result<payd_entity::mandate::Model, CreateError> {
    let id = MandateId::parse(id).ok_or(CreateError::NoSuchMandate)?;
    let m = customers::store::find_mandate(&deps.db, &id)
        .await?
        .filter(|m| m.customer_id == customer.id)
        .ok_or(CreateError::NoSuchMandate)?;
    check_mandate(&m, &ask.amount, deps.clock.now())?;
    // A mandate covers its own saved method, no other card.
    if ask.card.is_some() {
        return Err(CreateError::MandateMethodMismatch("payment_method_data"));
    }
    if ask
        .payment_method_id
        .as_ref()
        .is_some_and(|pm| *pm != m.payment_method_id)
    {
        return Err(CreateError::MandateMethodMismatch("payment_method_id"));
    }
    Ok(m)
}

/// The card a confirm sends (with its number and code for the processor) or names (a saved
/// method of the payment's customer); none: the payment's own.
pub async fn confirm_card(
    deps: &PaymentDeps,
    access: &Access,
    id: &str,
    ask: ConfirmAsk,
) -> Result<(Option<StoredCard>, Option<SecretCard>), CreateError> {
    if let Some(SentCard::Entered(card, secret)) = ask.card {
        return Ok((Some(card), Some(secret)));
    }
    if ask.card.is_none() && ask.payment_method_id.is_none() {
        return Ok((None, None));
    }
    let id = crate::ids::PaymentId::parse(id).ok_or(PaymentError::NotFound)?;
    let payment = crate::owned::find_owned(&deps.db, &id, &access.scope)
        .await?
        .ok_or(PaymentError::NotFound)?;
    if let Some(sent) = ask.card {
        let shop = (payment.merchant_id.as_str(), payment.profile_id.as_str());
        let (card, secret) = card_sent(deps, shop, payment.test_mode, sent).await?;
        return Ok((Some(card), secret));
    }
    let pm_id = ask.payment_method_id.unwrap_or_default();
    let saved = saved_card(&deps.db, payment.customer_id.as_ref(), &pm_id).await?;
    Ok((Some(saved), None))
}

/// The card a request sent, as stored, with its number and code when it was typed in. A
/// Stripe PaymentMethod is asked of the shop's Stripe account in the payment's mode (the one
/// named, or the only one): its card as Stripe describes it, fingerprinted from Stripe's own
/// fingerprint, and charged there only (its token).
pub async fn card_sent(
    deps: &PaymentDeps,
    (merchant_id, profile_id): (&str, &str),
    test_mode: bool,
    sent: SentCard,
) -> Result<(StoredCard, Option<SecretCard>), CreateError> {
    let (method, named) = match sent {
        SentCard::Entered(card, secret) => return Ok((card, Some(secret))),
        SentCard::Stripe { method, account } => (method, account),
    };
    // Where Stripe's refusal of the PaymentMethod or token points.
    let sent_field = if method.starts_with("tok_") {
        "payment_method_data.stripe.token"
    } else {
        "payment_method_data.stripe.payment_method"
    };
    let refuse = |param, message: &str| CreateError::StripeMethod {
        param,
        message: message.to_owned(),
    };
    let stripe: Vec<_> = processor_accounts::accounts(&deps.db, profile_id, test_mode)
        .await?
        .into_iter()
        .filter(|a| a.kind == AccountKind::Stripe && a.approval == Approval::Approved && a.enabled)
        .filter(|a| a.merchant_id == merchant_id && connect::serves(a, test_mode))
        .collect();
    const ACCOUNT: &str = "payment_method_data.stripe.processor_account_id";
    let account = match (named, stripe.as_slice()) {
        (Some(id), _) => stripe.iter().find(|a| a.id == id).ok_or_else(|| {
            refuse(
                ACCOUNT,
                "no enabled Stripe account of the shop in this mode has this id",
            )
        })?,
        (None, [only]) => only,
        (None, []) => {
            return Err(refuse(
                "payment_method_data.stripe",
                "the shop has no enabled Stripe account in this mode",
            ))
        }
        (None, _) => {
            return Err(refuse(
                ACCOUNT,
                "the shop has several Stripe accounts in this mode: name the one the PaymentMethod was made at",
            ))
        }
    };
    let processor = deps.connections.resolve(Some(account)).ok_or_else(|| {
        refuse(
            "payment_method_data.stripe",
            "the shop's Stripe account cannot be used now",
        )
    })?;
    let card = match processor.method_card(&method).await {
        Ok(card) => card,
        Err(ProcessorError::Refused(why)) => return Err(refuse(sent_field, &why)),
        Err(e) => return Err(PaymentError::Processor(e).into()),
    };
    let fingerprint = fingerprint(
        &deps.settings.security.key_pepper,
        merchant_id,
        &format!("stripe:{}", card.fingerprint),
    )
    .map_err(|e| PaymentError::Internal(e.message))?;
    let stored = StoredCard {
        brand: card.brand,
        last4: card.last4,
        exp_month: card.exp_month,
        exp_year: card.exp_year,
        fingerprint,
        holder_name: None,
        test_behaviour: None,
        token: Some(ProcessorToken {
            account: account.id.clone(),
            customer: None,
            method: card.method,
        }),
    };
    Ok((stored, None))
}

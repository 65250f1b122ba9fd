//! A new draft invoice: from a captured payment (its lines, with the tax as captured), from a
//! subscription's billing cycle, or from lines given. One invoice per payment and per cycle
//! while it stands (a voided or deleted one frees its source). The request was parsed at the
//! edge (`NewInvoice`, `Patch`); what can go wrong here is a [`CreateError`], which the routes
//! map to the API's error.

use payd_entity::invoice;
use sea_orm::DbErr;

use super::{
    actor::{self, InvoiceError},
    api::{NewInvoice, Patch, SourceAsk},
    machine::{self, Kind, Line, Status},
    store::{self, CommitError},
};
use crate::commit::Db;
use crate::stored::Json;
use crate::{
    auth::keys::{Caller, Scope},
    ids::{CustomerId, InvoiceId, PaymentId},
};

/// Why a draft could not be made or changed as asked: what it names is not there or cannot be
/// invoiced. `line` is an index into the lines sent.
#[derive(Debug, thiserror::Error)]
pub enum CreateError {
    #[error("no such price")]
    NoSuchPrice { line: usize },
    #[error("the price is in {price}, the invoice in {invoice}")]
    PriceCurrency {
        line: usize,
        price: String,
        invoice: String,
    },
    #[error("the price belongs to another product")]
    OtherProduct { line: usize },
    #[error("no such product")]
    NoSuchProduct { line: usize },
    #[error("no such customer")]
    NoSuchCustomer,
    #[error("no such payment")]
    NoSuchPayment,
    #[error("the payment is {0}: only a payment captured in full can be invoiced")]
    NotCaptured(payd_model::payments::Status),
    #[error(transparent)]
    Refunded(machine::Refusal),
    #[error("no such subscription")]
    NoSuchSubscription,
    #[error("no such cycle")]
    NoSuchCycle,
    /// The payment's or cycle's invoice stands (`param` names which).
    #[error("an invoice of this source stands already (void or delete it first)")]
    Exists { param: &'static str },
    /// A draft made from a payment or a cycle was sent `param` (`lines`, `currency`).
    #[error("an invoice made from a payment or a billing cycle keeps its lines and currency")]
    KeepsLines { param: &'static str },
    #[error(transparent)]
    Invoice(#[from] InvoiceError),
    #[error(transparent)]
    Commit(#[from] CommitError),
    #[error("database: {0}")]
    Db(#[from] DbErr),
}

/// What a draft is made from.
struct Source {
    currency: String,
    customer_id: Option<CustomerId>,
    payment_id: Option<PaymentId>,
    subscription_id: Option<crate::ids::SubscriptionId>,
    cycle_id: Option<String>,
    key: Option<String>,
    lines: Vec<Line>,
}

pub async fn create(
    db: &Db,
    caller: &Caller,
    ask: NewInvoice,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<invoice::Model, CreateError> {
    let scope = caller.scope();
    let source = match ask.source {
        SourceAsk::Payment(payment_id) => of_payment(db, &scope, &payment_id).await?,
        SourceAsk::Cycle {
            subscription_id,
            cycle_id,
        } => of_cycle(db, &scope, &subscription_id, &cycle_id).await?,
        SourceAsk::Lines { lines, currency } => {
            check_catalog(db, &scope, &lines, &currency).await?;
            Source {
                currency,
                customer_id: None,
                payment_id: None,
                subscription_id: None,
                cycle_id: None,
                key: None,
                lines,
            }
        }
    };
    let named = ask.customer_id.as_deref();
    let customer_id = match named.or(source.customer_id.as_deref()) {
        Some(c) => Some(check_customer(db, caller, c).await?),
        None => None,
    };
    let mut draft = invoice::Model {
        id: InvoiceId::new(),
        merchant_id: caller.merchant_id.clone(),
        profile_id: ask.shop,
        test_mode: caller.test_mode(),
        kind: Kind::Invoice,
        status: Status::Draft,
        number: None,
        currency: source.currency,
        customer_id,
        payment_id: source.payment_id,
        subscription_id: source.subscription_id,
        cycle_id: source.cycle_id,
        original_invoice_id: None,
        source_key: source.key,
        buyer: ask.buyer.map(Json),
        seller: None,
        lines: Json(source.lines),
        subtotal: 0,
        tax: 0,
        total: 0,
        amount_paid: 0,
        amount_credited: 0,
        memo: ask.memo,
        footer: None,
        reason: None,
        locale: None,
        due_date: ask.due_date.map(|d| d.to_string()),
        metadata: Json(ask.metadata),
        finalized_at: None,
        paid_at: None,
        voided_at: None,
        created_at: now,
        updated_at: now,
        version: 0,
    };
    actor::price(db, &mut draft, now).await?;
    match store::insert(db, &draft).await {
        Err(CommitError::Db(e))
            if matches!(
                e.sql_err(),
                Some(sea_orm::SqlErr::UniqueConstraintViolation(_))
            ) =>
        {
            let param = match draft.payment_id {
                Some(_) => "payment_id",
                None => "cycle_id",
            };
            Err(CreateError::Exists { param })
        }
        other => {
            other?;
            Ok(draft)
        }
    }
}

/// Lines that name the catalog name the caller's shop's: the product and price exist there,
/// the price is the product's and in the invoice's currency. (An invoice may bill an archived
/// product, a recurring price, or another amount than the price's.)
pub async fn check_catalog(
    db: &Db,
    scope: &Scope,
    lines: &[Line],
    currency: &str,
) -> Result<(), CreateError> {
    use crate::products::store as catalog;
    for (i, l) in lines.iter().enumerate() {
        let price = match &l.price_id {
            Some(id) => Some(
                match crate::ids::PriceId::parse(id) {
                    Some(id) => catalog::find_price(db, &id).await?,
                    None => None,
                }
                .filter(|p| scope.sees(&p.merchant_id, p.test_mode, &p.profile_id))
                .ok_or(CreateError::NoSuchPrice { line: i })?,
            ),
            None => None,
        };
        if let Some(p) = &price {
            if p.currency != currency {
                return Err(CreateError::PriceCurrency {
                    line: i,
                    price: p.currency.clone(),
                    invoice: currency.to_owned(),
                });
            }
        }
        let product_id = match (&l.product_id, &price) {
            (Some(id), Some(p)) if *id != p.product_id => {
                return Err(CreateError::OtherProduct { line: i })
            }
            (Some(id), _) => id,
            (None, _) => continue,
        };
        let product = match crate::ids::ProductId::parse(product_id) {
            Some(id) => crate::owned::find_owned(db, &id, scope).await?,
            None => None,
        };
        if product.is_none() {
            return Err(CreateError::NoSuchProduct { line: i });
        }
    }
    Ok(())
}

/// A customer of the caller's merchant and mode.
pub async fn check_customer(db: &Db, caller: &Caller, id: &str) -> Result<CustomerId, CreateError> {
    let Some(id) = CustomerId::parse(id) else {
        return Err(CreateError::NoSuchCustomer);
    };
    match crate::owned::find_owned(db, &id, &caller.scope()).await? {
        Some(_) => Ok(id),
        None => Err(CreateError::NoSuchCustomer),
    }
}

/// The lines of a payment captured in full (its product lines, or one line of its amount).
async fn of_payment(db: &Db, scope: &Scope, payment_id: &str) -> Result<Source, CreateError> {
    let id = crate::ids::PaymentId::parse(payment_id).ok_or(CreateError::NoSuchPayment)?;
    let p = crate::owned::find_owned(db, &id, scope)
        .await?
        .ok_or(CreateError::NoSuchPayment)?;
    if p.amount_captured <= 0 || p.amount_captured != p.amount {
        return Err(CreateError::NotCaptured(p.status));
    }
    machine::of_payment(p.amount_refunded).map_err(CreateError::Refunded)?;
    let lines = crate::payments::api::lines_of(&p);
    let lines = match lines.is_empty() {
        true => vec![one_line(
            p.description
                .clone()
                .unwrap_or_else(|| format!("Payment {}", p.id)),
            p.amount_captured,
        )],
        false => lines
            .into_iter()
            .map(|l| {
                let net = l.amount - l.tax_amount;
                Line {
                    line_id: l.line_id,
                    name: l.name,
                    quantity: l.quantity,
                    unit_amount: l.unit_amount,
                    product_id: l.product_id,
                    price_id: l.price_id,
                    tax_category: None,
                    tax_rule_id: None,
                    tax_rate_bps: machine::implied_rate(net, l.tax_amount),
                    tax_inclusive: false,
                    tax_amount: l.tax_amount,
                    amount: net,
                    total: l.amount,
                    amount_credited: 0,
                    quantity_credited: 0,
                    tax_credited: 0,
                }
            })
            .collect(),
    };
    Ok(Source {
        currency: p.currency.clone(),
        customer_id: p.customer_id.clone(),
        payment_id: Some(p.id.clone()),
        subscription_id: None,
        cycle_id: None,
        key: Some(format!("payment:{}", p.id)),
        lines,
    })
}

/// The lines a subscription's billing cycle charged, with the tax it was charged with.
async fn of_cycle(
    db: &Db,
    scope: &Scope,
    sub_id: &str,
    cycle_id: &str,
) -> Result<Source, CreateError> {
    let id = crate::ids::SubscriptionId::parse(sub_id).ok_or(CreateError::NoSuchSubscription)?;
    let s = crate::owned::find_owned(db, &id, scope)
        .await?
        .ok_or(CreateError::NoSuchSubscription)?;
    let c = crate::subscriptions::store::find_cycle(db, cycle_id)
        .await?
        .filter(|c| c.subscription_id == s.id)
        .ok_or(CreateError::NoSuchCycle)?;
    let paid = c.lines.0;
    let lines = match paid.is_empty() {
        true => vec![one_line(
            format!(
                "Subscription {}, {} to {}",
                s.id,
                c.period_start.date_naive(),
                c.period_end.date_naive()
            ),
            c.amount,
        )],
        false => paid
            .into_iter()
            // With the tax the cycle was charged with: the invoice totals what it charged.
            .map(|l| {
                let total = l.total().unwrap_or(i64::MAX);
                Line {
                    line_id: l.line_id,
                    name: l.name,
                    quantity: l.quantity,
                    unit_amount: l.unit_amount,
                    product_id: l.product_id,
                    price_id: l.price_id,
                    tax_category: None,
                    tax_rule_id: l.tax_rule_id,
                    tax_rate_bps: l.tax_rate_bps,
                    tax_inclusive: l.tax_inclusive,
                    tax_amount: l.tax_amount,
                    amount: total - l.tax_amount,
                    total,
                    amount_credited: 0,
                    quantity_credited: 0,
                    tax_credited: 0,
                }
            })
            .collect(),
    };
    Ok(Source {
        currency: c.currency.clone(),
        customer_id: Some(s.customer_id.clone()),
        payment_id: None,
        subscription_id: Some(s.id.clone()),
        cycle_id: Some(c.id.clone()),
        key: Some(format!("cycle:{}", c.id)),
        lines,
    })
}

/// One unpriced line of `amount`.
fn one_line(name: String, amount: i64) -> Line {
    Line {
        line_id: "line_1".into(),
        name,
        quantity: 1,
        unit_amount: amount,
        product_id: None,
        price_id: None,
        tax_category: None,
        tax_rule_id: None,
        tax_rate_bps: 0,
        tax_inclusive: false,
        tax_amount: 0,
        amount,
        total: amount,
        amount_credited: 0,
        quantity_credited: 0,
        tax_credited: 0,
    }
}

/// The change a `PATCH` of invoice `m` asks for, checked: an invoice made from a payment or a
/// billing cycle keeps its lines and currency; new lines (or a new currency) are checked
/// against the shop's catalog as on creation, a customer against the caller's.
pub async fn patch(
    db: &Db,
    caller: &Caller,
    m: &invoice::Model,
    patch: Patch,
) -> Result<Patch, CreateError> {
    let from_lines = m.payment_id.is_none() && m.cycle_id.is_none();
    if !from_lines && (patch.lines.is_some() || patch.currency.is_some()) {
        let param = if patch.lines.is_some() {
            "lines"
        } else {
            "currency"
        };
        return Err(CreateError::KeepsLines { param });
    }
    if let Some(c) = &patch.customer_id {
        check_customer(db, caller, c).await?;
    }
    if patch.lines.is_some() || patch.currency.is_some() {
        let lines = match patch.lines.clone() {
            Some(lines) => lines,
            None => m.lines.0.clone(),
        };
        let currency = patch.currency.as_deref().unwrap_or(&m.currency);
        check_catalog(db, &caller.scope(), &lines, currency).await?;
    }
    Ok(patch)
}

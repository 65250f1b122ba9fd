//! A new draft invoice: from a captured payment (its lines, with the tax as captured), from a
//! subscription's billing cycle, or from lines given. One invoice per payment and per cycle
//! while it stands (a voided or deleted one frees its source).

use payd_entity::invoice;

use super::{
    actor,
    api::{self, CreateInvoiceRequest},
    machine::{self, Kind, Line, Status},
    store::{self, CommitError},
};
use crate::commit::Db;
use crate::{
    auth::keys::{Caller, Scope},
    error::ApiError,
    fields::{check_metadata, check_text, parse_currency},
    ids::new_id,
};

/// What a draft is made from.
struct Source {
    currency: String,
    customer_id: Option<String>,
    payment_id: Option<String>,
    subscription_id: Option<String>,
    cycle_id: Option<String>,
    key: Option<String>,
    lines: Vec<Line>,
}

pub async fn create(
    db: &Db,
    caller: &Caller,
    req: CreateInvoiceRequest,
    max_amount: i64,
    now: chrono::DateTime<chrono::Utc>,
) -> Result<invoice::Model, ApiError> {
    let shop = caller.require_shop()?.to_string();
    let source = source(db, caller, &req, max_amount).await?;
    if source.payment_id.is_none() && source.cycle_id.is_none() {
        check_catalog(db, &caller.scope(), &source.lines, &source.currency).await?;
    }
    let customer_id = match req.customer_id.as_ref().or(source.customer_id.as_ref()) {
        Some(c) => Some(check_customer(db, caller, c).await?),
        None => None,
    };
    let buyer = req.buyer.map(|b| b.checked("buyer")).transpose()?;
    let memo = check_text("memo", req.memo.as_ref(), 1_000)?;
    let metadata = check_metadata(req.metadata.as_ref())?.unwrap_or_else(|| "{}".into());
    let mut draft = invoice::Model {
        id: new_id("inv"),
        merchant_id: caller.merchant_id.to_string(),
        profile_id: shop,
        test_mode: caller.test_mode(),
        kind: Kind::Invoice.as_str().to_owned(),
        status: Status::Draft.as_str().to_owned(),
        number: None,
        currency: source.currency,
        customer_id,
        payment_id: source.payment_id,
        subscription_id: source.subscription_id,
        cycle_id: source.cycle_id,
        original_invoice_id: None,
        source_key: source.key,
        buyer: buyer.map(|b| serde_json::to_string(&b).unwrap_or_default()),
        seller: None,
        lines: serde_json::to_string(&source.lines).unwrap_or_default(),
        subtotal: 0,
        tax: 0,
        total: 0,
        amount_paid: 0,
        amount_credited: 0,
        memo,
        footer: None,
        reason: None,
        locale: None,
        due_date: req.due_date.map(|d| d.to_string()),
        metadata,
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
            Err(ApiError::conflict(
                "invoice_exists",
                "an invoice of this source stands already (void or delete it first)",
            )
            .param(param))
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
) -> Result<(), ApiError> {
    use crate::products::store as catalog;
    for (i, l) in lines.iter().enumerate() {
        let param = |f: &str| format!("lines[{i}].{f}");
        let price = match &l.price_id {
            Some(id) => Some(
                match crate::ids::PriceId::parse(id) {
                    Some(_) => catalog::find_price(db, id).await?,
                    None => None,
                }
                .filter(|p| scope.sees(&p.merchant_id, p.test_mode, &p.profile_id))
                .ok_or_else(|| ApiError::not_found("price").param(param("price_id")))?,
            ),
            None => None,
        };
        if let Some(p) = &price {
            if p.currency != currency {
                return Err(ApiError::invalid_param(
                    &param("price_id"),
                    format!("the price is in {}, the invoice in {currency}", p.currency),
                ));
            }
        }
        let product_id = match (&l.product_id, &price) {
            (Some(id), Some(p)) if *id != p.product_id => {
                return Err(ApiError::invalid_param(
                    &param("price_id"),
                    "the price belongs to another product",
                ))
            }
            (Some(id), _) => id,
            (None, _) => continue,
        };
        let product = match crate::ids::ProductId::parse(product_id) {
            Some(_) => catalog::find_owned(db, product_id, scope).await?,
            None => None,
        };
        if product.is_none() {
            return Err(ApiError::not_found("product").param(param("product_id")));
        }
    }
    Ok(())
}

/// A customer of the caller's merchant and mode.
pub async fn check_customer(db: &Db, caller: &Caller, id: &str) -> Result<String, ApiError> {
    crate::customers::store::find_owned(db, id, caller.merchant_id.as_str(), caller.test_mode())
        .await?
        .map(|c| c.id)
        .ok_or_else(|| ApiError::not_found("customer").param("customer_id"))
}

async fn source(
    db: &Db,
    caller: &Caller,
    req: &CreateInvoiceRequest,
    max_amount: i64,
) -> Result<Source, ApiError> {
    let scope = caller.scope();
    let given = [
        req.payment_id.is_some(),
        req.subscription_id.is_some() || req.cycle_id.is_some(),
        req.lines.is_some(),
    ];
    if given.iter().filter(|g| **g).count() != 1 {
        return Err(ApiError::invalid_param(
            "payment_id",
            "send one of payment_id, subscription_id with cycle_id, or lines",
        ));
    }
    if req.lines.is_none() && req.currency.is_some() {
        return Err(ApiError::invalid_param(
            "currency",
            "currency goes with lines; a payment or a cycle has its own",
        ));
    }
    if let Some(payment_id) = &req.payment_id {
        return of_payment(db, &scope, payment_id).await;
    }
    if req.subscription_id.is_some() || req.cycle_id.is_some() {
        return of_cycle(db, &scope, req).await;
    }
    let lines = api::lines_from(req.lines.as_deref().unwrap_or_default(), max_amount)?;
    let currency = match &req.currency {
        Some(c) => parse_currency("currency", c)?,
        None => {
            return Err(ApiError::invalid_param(
                "currency",
                "an invoice of lines needs a currency",
            ))
        }
    };
    Ok(Source {
        currency,
        customer_id: None,
        payment_id: None,
        subscription_id: None,
        cycle_id: None,
        key: None,
        lines,
    })
}

/// The lines of a payment captured in full (its product lines, or one line of its amount).
async fn of_payment(db: &Db, scope: &Scope, payment_id: &str) -> Result<Source, ApiError> {
    let p = crate::payments::store::find_owned(db, payment_id, scope)
        .await?
        .ok_or_else(|| ApiError::not_found("payment").param("payment_id"))?;
    if p.amount_captured <= 0 || p.amount_captured != p.amount {
        return Err(ApiError::conflict(
            "payment_not_captured",
            format!(
                "the payment is {}: only a payment captured in full can be invoiced",
                p.status
            ),
        )
        .param("payment_id"));
    }
    machine::of_payment(p.amount_refunded)
        .map_err(|r| ApiError::conflict("payment_refunded", r.to_string()).param("payment_id"))?;
    let lines = crate::payments::api::lines_of(&p)?;
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
async fn of_cycle(db: &Db, scope: &Scope, req: &CreateInvoiceRequest) -> Result<Source, ApiError> {
    let (Some(sub_id), Some(cycle_id)) = (&req.subscription_id, &req.cycle_id) else {
        let param = match req.subscription_id {
            Some(_) => "cycle_id",
            None => "subscription_id",
        };
        return Err(ApiError::invalid_param(
            param,
            "a billing cycle is named by subscription_id and cycle_id",
        ));
    };
    let s = crate::subscriptions::store::find_owned(db, sub_id, scope)
        .await?
        .ok_or_else(|| ApiError::not_found("subscription").param("subscription_id"))?;
    let c = crate::subscriptions::store::find_cycle(db, cycle_id)
        .await?
        .filter(|c| c.subscription_id == s.id)
        .ok_or_else(|| ApiError::not_found("cycle").param("cycle_id"))?;
    let paid: Vec<crate::subscriptions::api::CycleLine> =
        crate::stored::json("lines", &c.id, &c.lines)?;
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
/// against the shop's catalog as on creation.
pub async fn patch(
    db: &Db,
    caller: &Caller,
    m: &invoice::Model,
    req: api::UpdateInvoiceRequest,
    max: i64,
) -> Result<actor::Patch, ApiError> {
    let from_lines = m.payment_id.is_none() && m.cycle_id.is_none();
    if !from_lines && (req.lines.is_some() || req.currency.is_some()) {
        let param = if req.lines.is_some() {
            "lines"
        } else {
            "currency"
        };
        return Err(ApiError::invalid_param(
            param,
            "an invoice made from a payment or a billing cycle keeps its lines and currency",
        ));
    }
    let patch = actor::Patch {
        lines: req
            .lines
            .as_deref()
            .map(|l| api::lines_from(l, max))
            .transpose()?,
        currency: req
            .currency
            .as_deref()
            .map(|c| parse_currency("currency", c))
            .transpose()?,
        customer_id: match &req.customer_id {
            Some(c) => Some(check_customer(db, caller, c).await?),
            None => None,
        },
        buyer: req.buyer.map(|b| b.checked("buyer")).transpose()?,
        memo: check_text("memo", req.memo.as_ref(), 1_000)?,
        due_date: req.due_date,
        metadata: check_metadata(req.metadata.as_ref())?,
    };
    if patch.lines.is_some() || patch.currency.is_some() {
        let lines = match patch.lines.clone() {
            Some(lines) => lines,
            None => crate::stored::json("lines", &m.id, &m.lines)?,
        };
        let currency = patch.currency.as_deref().unwrap_or(&m.currency);
        check_catalog(db, &caller.scope(), &lines, currency).await?;
    }
    Ok(patch)
}

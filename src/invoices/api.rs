//! The invoice, credit-note, invoice-settings and tax-rule objects, and the request types of
//! their routes.

use chrono::{DateTime, NaiveDate, Utc};
use payd_entity::{invoice, invoice_setting, tax_rule};
use payd_model::locale::Locale;
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::machine::{self, Line, RateTotal};
use crate::{
    error::ApiError,
    fields::{check_metadata, check_text, Metadata},
    pagination::ListQuery,
};

pub use payd_model::invoices::Party;

/// Checks and normalizes a party given in a request under `param`.
pub fn checked(mut party: Party, param: &str) -> Result<Party, ApiError> {
    let p = |f: &str| format!("{param}.{f}");
    party.name = party.name.trim().to_owned();
    if party.name.is_empty() || party.name.chars().count() > 200 {
        return Err(ApiError::invalid_param(
            &p("name"),
            "name must be 1 to 200 characters",
        ));
    }
    check_text(&p("email"), party.email.as_ref(), 254)?;
    check_text(&p("region"), party.region.as_ref(), 64)?;
    check_text(&p("tax_id"), party.tax_id.as_ref(), 64)?;
    if let Some(c) = &party.country {
        party.country = Some(country(&p("country"), c)?);
    }
    if let Some(a) = &party.address {
        for (f, v) in [
            ("line1", &a.line1),
            ("line2", &a.line2),
            ("city", &a.city),
            ("postal_code", &a.postal_code),
            ("state", &a.state),
        ] {
            check_text(&p(&format!("address.{f}")), v.as_ref(), 200)?;
        }
        if let Some(c) = &a.country {
            country(&p("address.country"), c)?;
        }
    }
    // The country of the address stands for the party's when none is given.
    if party.country.is_none() {
        party.country = party
            .address
            .as_ref()
            .and_then(|a| a.country.as_deref())
            .map(str::to_ascii_uppercase);
    }
    Ok(party)
}

/// An ISO 3166-1 alpha-2 code, upper case.
pub fn country(param: &str, raw: &str) -> Result<String, ApiError> {
    let c = raw.trim().to_ascii_uppercase();
    match c.len() == 2 && c.bytes().all(|b| b.is_ascii_uppercase()) {
        true => Ok(c),
        false => Err(ApiError::invalid_param(
            param,
            format!("{raw:?} is not an ISO 3166-1 alpha-2 country code"),
        )),
    }
}

/// A line as given: its tax comes from the tax rules.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[schema(as = InvoiceLineInput)]
#[serde(deny_unknown_fields)]
pub struct LineInput {
    /// Default `line_1`, `line_2`, … in order.
    #[serde(default)]
    pub line_id: Option<String>,
    pub name: String,
    /// At least 1 (default 1).
    #[serde(default = "one")]
    pub quantity: i64,
    /// Per unit, in minor units, ≥ 0: before tax under an exclusive rule, tax included under
    /// an inclusive one.
    pub unit_amount: i64,
    #[serde(default)]
    pub product_id: Option<String>,
    #[serde(default)]
    pub price_id: Option<String>,
    /// Selects the tax rules made for this category.
    #[serde(default)]
    pub tax_category: Option<String>,
}

fn one() -> i64 {
    1
}

/// `POST /invoices`: a draft from a payment, from a subscription's billing cycle, or from
/// lines.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateInvoiceRequest {
    /// A captured payment: its lines (or one line for its amount), with the tax as captured.
    #[serde(default)]
    pub payment_id: Option<String>,
    /// With `cycle_id`: a billing cycle of this subscription.
    #[serde(default)]
    pub subscription_id: Option<String>,
    #[serde(default)]
    pub cycle_id: Option<String>,
    /// 1 to 100 lines, with `currency`.
    #[serde(default)]
    pub lines: Option<Vec<LineInput>>,
    #[serde(default)]
    pub currency: Option<String>,
    #[serde(default)]
    pub customer_id: Option<String>,
    /// Default: the customer's name, email and address.
    #[serde(default)]
    pub buyer: Option<Party>,
    #[serde(default)]
    pub memo: Option<String>,
    /// `YYYY-MM-DD`; default: the finalize date plus the settings' `payment_terms_days`.
    #[serde(default)]
    pub due_date: Option<NaiveDate>,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub metadata: Option<Metadata>,
}

/// `PATCH /invoices/{invoice_id}`: a draft's fields; absent ones are kept. Lines only on a
/// draft made from lines.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateInvoiceRequest {
    #[serde(default)]
    pub lines: Option<Vec<LineInput>>,
    #[serde(default)]
    pub currency: Option<String>,
    #[serde(default)]
    pub customer_id: Option<String>,
    #[serde(default)]
    pub buyer: Option<Party>,
    #[serde(default)]
    pub memo: Option<String>,
    #[serde(default)]
    pub due_date: Option<NaiveDate>,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub metadata: Option<Metadata>,
}

/// A credit note's share of one line: some units, or an amount (tax included), or, with
/// neither, all that is left of it.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreditLineInput {
    pub line_id: String,
    #[serde(default)]
    pub quantity: Option<i64>,
    #[serde(default)]
    pub amount: Option<i64>,
}

/// `POST /invoices/{invoice_id}/credit-note`: `lines` or `amount` (tax included, spread over
/// the lines in proportion to what is left of each), and a reason.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreditNoteRequest {
    #[serde(default)]
    pub lines: Option<Vec<CreditLineInput>>,
    #[serde(default)]
    pub amount: Option<i64>,
    /// 1 to 500 characters.
    pub reason: String,
    #[serde(default)]
    pub memo: Option<String>,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub metadata: Option<Metadata>,
}

/// A credit note as its request asks for it, checked: what it takes (lines, or an amount
/// spread over them), its reason, memo and metadata as stored.
#[derive(Debug)]
pub struct CreditNote {
    pub ask: machine::CreditAsk,
    pub reason: String,
    pub memo: Option<String>,
    pub metadata: Metadata,
}

impl CreditNoteRequest {
    pub fn parse(self) -> Result<CreditNote, ApiError> {
        let reason = self.reason.trim().to_owned();
        if reason.is_empty() || reason.chars().count() > 500 {
            return Err(ApiError::invalid_param(
                "reason",
                "reason must be 1 to 500 characters",
            ));
        }
        let ask = match (self.lines, self.amount) {
            (Some(lines), None) => {
                if lines.is_empty() || lines.len() > 100 {
                    return Err(ApiError::invalid_param("lines", "send 1 to 100 lines"));
                }
                for (i, l) in lines.iter().enumerate() {
                    if l.quantity.is_some() && l.amount.is_some() {
                        return Err(ApiError::invalid_param(
                            &format!("lines[{i}].amount"),
                            "send quantity or amount, not both",
                        ));
                    }
                    if l.quantity.is_some_and(|q| q < 1) {
                        return Err(ApiError::invalid_param(
                            &format!("lines[{i}].quantity"),
                            "quantity must be at least 1",
                        ));
                    }
                    if l.amount.is_some_and(|a| a < 1) {
                        return Err(ApiError::invalid_param(
                            &format!("lines[{i}].amount"),
                            "the amount must be greater than 0",
                        ));
                    }
                }
                machine::CreditAsk::Lines(
                    lines
                        .into_iter()
                        .map(|l| machine::LineAsk {
                            line_id: l.line_id,
                            quantity: l.quantity,
                            amount: l.amount,
                        })
                        .collect(),
                )
            }
            (None, Some(amount)) if amount > 0 => machine::CreditAsk::Amount(amount),
            (None, Some(_)) => {
                return Err(ApiError::invalid_param(
                    "amount",
                    "the amount must be greater than 0",
                ))
            }
            _ => {
                return Err(ApiError::invalid_param(
                    "lines",
                    "send lines or an amount (one of them)",
                ))
            }
        };
        Ok(CreditNote {
            ask,
            reason,
            memo: check_text("memo", self.memo.as_ref(), 1_000)?,
            metadata: check_metadata(self.metadata.as_ref())?.unwrap_or_default(),
        })
    }
}

/// `POST /invoices/{invoice_id}/share-link`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ShareLinkRequest {
    /// 1 to 365 (default 30).
    #[serde(default)]
    pub expires_in_days: Option<i64>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct ShareLink {
    pub link_id: String,
    pub invoice_id: String,
    /// The hosted page; it shows the invoice and its PDF without an API key.
    pub url: String,
    pub expires_at: DateTime<Utc>,
    pub revoked_at: Option<DateTime<Utc>>,
    /// The invoice's mode: true for a sandbox invoice's link.
    pub test_mode: bool,
}

#[derive(Debug, Clone, Default, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListInvoicesQuery {
    /// Only this shop's (a caller scoped to a shop sees only its own anyway).
    #[serde(default)]
    pub profile_id: Option<String>,
    /// `invoice` or `credit_note`.
    #[serde(default)]
    pub kind: Option<String>,
    /// `draft`, `open`, `paid`, `void`, `uncollectible` or `issued` (credit notes).
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub customer_id: Option<String>,
    /// The credit notes of this invoice.
    #[serde(default)]
    pub original_invoice_id: Option<String>,
    #[serde(default)]
    pub created_after: Option<DateTime<Utc>>,
    #[serde(default)]
    pub created_before: Option<DateTime<Utc>>,
    /// 1 to 100 (default 10).
    #[serde(default)]
    #[param(minimum = 1, maximum = 100)]
    pub limit: Option<i64>,
    #[serde(default)]
    pub starting_after: Option<String>,
    #[serde(default)]
    pub ending_before: Option<String>,
}

impl ListInvoicesQuery {
    pub fn page_query(&self) -> ListQuery {
        ListQuery {
            limit: self.limit,
            starting_after: self.starting_after.clone(),
            ending_before: self.ending_before.clone(),
        }
    }
}

/// An invoice or a credit note (`kind`).
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Invoice {
    pub invoice_id: String,
    /// Rises by one with each committed change of this object: a receiver keeps, per object,
    /// the highest it has seen.
    pub version: i64,
    /// `invoice` or `credit_note`.
    pub kind: String,
    /// `draft`, `open`, `paid`, `void`, `uncollectible`; a credit note is `issued`.
    pub status: String,
    /// `null` while a draft.
    pub number: Option<String>,
    pub profile_id: String,
    pub currency: String,
    pub customer_id: Option<String>,
    pub payment_id: Option<String>,
    pub subscription_id: Option<String>,
    pub cycle_id: Option<String>,
    /// A credit note's invoice.
    pub original_invoice_id: Option<String>,
    pub lines: Vec<Line>,
    /// Net and tax per tax rate.
    pub tax_breakdown: Vec<RateTotal>,
    pub subtotal: i64,
    pub tax: i64,
    pub total: i64,
    pub amount_paid: i64,
    /// What credit notes took of it.
    pub amount_credited: i64,
    pub amount_due: i64,
    pub buyer: Option<Party>,
    /// Frozen at finalize from the invoice settings.
    pub seller: Option<Party>,
    pub memo: Option<String>,
    pub footer: Option<String>,
    /// A credit note's reason.
    pub reason: Option<String>,
    pub locale: Option<String>,
    pub due_date: Option<String>,
    #[schema(value_type = Object)]
    pub metadata: Metadata,
    /// `GET` it for the PDF; `null` while a draft.
    pub pdf_url: Option<String>,
    pub test_mode: bool,
    pub created: DateTime<Utc>,
    pub finalized_at: Option<DateTime<Utc>>,
    pub paid_at: Option<DateTime<Utc>>,
    pub voided_at: Option<DateTime<Utc>>,
    pub updated: DateTime<Utc>,
}

impl Invoice {
    /// The object as the API shows it.
    pub fn render(m: &invoice::Model) -> Result<Self, sea_orm::DbErr> {
        let lines = &m.lines.0;
        use machine::{Kind, Status};
        let due = match (m.kind, m.status) {
            (Kind::Invoice, Status::Draft | Status::Open | Status::Uncollectible) => {
                machine::amount_due(m.total, m.amount_paid, m.amount_credited)
            }
            (Kind::Invoice, Status::Paid | Status::Void | Status::Issued | Status::Deleted)
            | (Kind::CreditNote, _) => 0,
        };
        Ok(Self {
            invoice_id: m.id.to_string(),
            version: m.version,
            kind: m.kind.to_string(),
            status: m.status.to_string(),
            number: m.number.clone(),
            profile_id: m.profile_id.to_string(),
            currency: m.currency.clone(),
            customer_id: m.customer_id.as_ref().map(ToString::to_string),
            payment_id: m.payment_id.as_ref().map(ToString::to_string),
            subscription_id: m.subscription_id.as_ref().map(ToString::to_string),
            cycle_id: m.cycle_id.clone(),
            original_invoice_id: m.original_invoice_id.as_ref().map(ToString::to_string),
            tax_breakdown: machine::by_rate(lines),
            lines: lines.clone(),
            subtotal: m.subtotal,
            tax: m.tax,
            total: m.total,
            amount_paid: m.amount_paid,
            amount_credited: m.amount_credited,
            amount_due: due,
            buyer: m.buyer.as_ref().map(|b| b.0.clone()),
            seller: m.seller.as_ref().map(|s| s.0.clone()),
            memo: m.memo.clone(),
            footer: m.footer.clone(),
            reason: m.reason.clone(),
            locale: m.locale.map(|l| l.to_string()),
            due_date: m.due_date.clone(),
            metadata: m.metadata.0.clone(),
            pdf_url: m.finalized_at.map(|_| format!("/invoices/{}/pdf", m.id)),
            test_mode: m.test_mode,
            created: m.created_at,
            finalized_at: m.finalized_at,
            paid_at: m.paid_at,
            voided_at: m.voided_at,
            updated: m.updated_at,
        })
    }
}

/// `PUT /invoice-settings` and `PUT /invoice-settings/profiles/{profile_id}`: the whole
/// settings; an absent field is unset (a shop's then falls back to the merchant's).
#[derive(Debug, Clone, Default, Deserialize, Serialize, ToSchema)]
#[schema(as = InvoiceSettingsInput)]
#[serde(deny_unknown_fields)]
pub struct SettingsInput {
    /// 1 to 20 of `A–Z a–z 0–9 - _ / .`; invoice numbers are the prefix and a gapless
    /// six-digit counter of that prefix (`INV-000001`). Default `INV-`.
    #[serde(default)]
    pub number_prefix: Option<String>,
    /// The credit notes' series. Default `CN-`.
    #[serde(default)]
    pub credit_note_prefix: Option<String>,
    #[serde(default)]
    pub seller: Option<Party>,
    /// Printed at the bottom of every page, up to 500 characters.
    #[serde(default)]
    pub footer: Option<String>,
    /// 0 to 365 (default 30): the due date when an invoice sets none.
    #[serde(default)]
    pub payment_terms_days: Option<i64>,
    /// `en` (default), `de` or `fr`: how the PDF writes amounts and dates.
    #[serde(default)]
    #[schema(value_type = Option<String>)]
    pub locale: Option<Locale>,
}

impl SettingsInput {
    pub fn checked(mut self) -> Result<Self, ApiError> {
        for (param, prefix) in [
            ("number_prefix", &self.number_prefix),
            ("credit_note_prefix", &self.credit_note_prefix),
        ] {
            // A number names the PDF's file too: no path separators, no dots.
            if let Some(p) = prefix {
                let ok = (1..=20).contains(&p.len())
                    && p.bytes()
                        .all(|b| b.is_ascii_alphanumeric() || b"-_".contains(&b));
                if !ok {
                    return Err(ApiError::invalid_param(
                        param,
                        "1 to 20 of the characters A-Z a-z 0-9 - _",
                    ));
                }
            }
        }
        self.seller = self.seller.map(|s| checked(s, "seller")).transpose()?;
        check_text("footer", self.footer.as_ref(), 500)?;
        if self
            .payment_terms_days
            .is_some_and(|d| !(0..=365).contains(&d))
        {
            return Err(ApiError::invalid_param(
                "payment_terms_days",
                "payment_terms_days is 0 to 365",
            ));
        }
        Ok(self)
    }

    pub fn of(m: &invoice_setting::Model) -> Self {
        Self {
            number_prefix: m.number_prefix.clone(),
            credit_note_prefix: m.credit_note_prefix.clone(),
            seller: m.seller.as_ref().map(|s| s.0.clone()),
            footer: m.footer.clone(),
            payment_terms_days: m.payment_terms_days,
            locale: m.locale,
        }
    }

    /// These settings with the unset fields taken from `fallback`.
    pub fn over(self, fallback: SettingsInput) -> Self {
        Self {
            number_prefix: self.number_prefix.or(fallback.number_prefix),
            credit_note_prefix: self.credit_note_prefix.or(fallback.credit_note_prefix),
            seller: self.seller.or(fallback.seller),
            footer: self.footer.or(fallback.footer),
            payment_terms_days: self.payment_terms_days.or(fallback.payment_terms_days),
            locale: self.locale.or(fallback.locale),
        }
    }
}

/// The settings that apply, every field resolved.
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = InvoiceSettingsEffective)]
pub struct Effective {
    pub number_prefix: String,
    pub credit_note_prefix: String,
    pub seller: Option<Party>,
    pub footer: Option<String>,
    pub payment_terms_days: i64,
    #[schema(value_type = String)]
    pub locale: Locale,
}

impl Effective {
    pub fn of(s: SettingsInput) -> Self {
        Self {
            number_prefix: s.number_prefix.unwrap_or_else(|| "INV-".into()),
            credit_note_prefix: s.credit_note_prefix.unwrap_or_else(|| "CN-".into()),
            seller: s.seller,
            footer: s.footer,
            payment_terms_days: s.payment_terms_days.unwrap_or(30),
            locale: s.locale.unwrap_or(Locale::En),
        }
    }
}

/// Settings as stored (`settings`) and as they apply (`effective`).
#[derive(Debug, Clone, Serialize, ToSchema)]
#[schema(as = InvoiceSettings)]
pub struct Settings {
    /// `null` for the merchant's defaults.
    pub profile_id: Option<String>,
    pub settings: SettingsInput,
    pub effective: Effective,
}

/// One tax rule as given.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TaxRuleInput {
    /// 0 to 10 000 (100 %).
    pub rate_bps: i64,
    /// ISO 3166-1 alpha-2.
    pub country: String,
    #[serde(default)]
    pub region: Option<String>,
    /// Only lines of this `tax_category`.
    #[serde(default)]
    pub tax_category: Option<String>,
    /// Whether the line's amount includes the tax (default false: the tax is added).
    #[serde(default)]
    pub inclusive: bool,
    #[serde(default)]
    pub valid_from: Option<DateTime<Utc>>,
    /// Exclusive.
    #[serde(default)]
    pub valid_until: Option<DateTime<Utc>>,
}

/// `PUT …/tax-rules`: the whole set (up to 100 rules).
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct TaxRulesInput {
    pub rules: Vec<TaxRuleInput>,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TaxRule {
    pub tax_rule_id: String,
    pub rate_bps: i64,
    pub country: String,
    pub region: Option<String>,
    pub tax_category: Option<String>,
    pub inclusive: bool,
    pub valid_from: Option<DateTime<Utc>>,
    pub valid_until: Option<DateTime<Utc>>,
}

impl TaxRule {
    pub fn render(m: &tax_rule::Model) -> Self {
        Self {
            tax_rule_id: m.id.clone(),
            rate_bps: m.rate_bps,
            country: m.country.clone(),
            region: m.region.clone(),
            tax_category: m.tax_category.clone(),
            inclusive: m.inclusive,
            valid_from: m.valid_from,
            valid_until: m.valid_until,
        }
    }
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct TaxRules {
    /// `null` for the merchant's rules.
    pub profile_id: Option<String>,
    pub rules: Vec<TaxRule>,
}

/// Where the buyer is, for an evaluation.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PlaceInput {
    pub country: String,
    #[serde(default)]
    pub region: Option<String>,
}

/// `POST /invoice-settings/tax-rules/evaluate`: which rule applies to each line for this
/// buyer, and the amounts — what finalize would freeze. The shop's rules count when the
/// request is scoped to a shop.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EvaluateRequest {
    pub buyer: PlaceInput,
    pub currency: String,
    pub lines: Vec<LineInput>,
    /// The moment the rules are taken at (default now).
    #[serde(default)]
    pub at: Option<DateTime<Utc>>,
}

/// A line as evaluated.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct EvaluatedLine {
    pub line_id: String,
    /// `null`: no rule applies, no tax.
    pub tax_rule_id: Option<String>,
    /// `shop` or `merchant`.
    pub source: Option<String>,
    pub tax_rate_bps: i64,
    pub tax_inclusive: bool,
    pub amount: i64,
    pub tax_amount: i64,
    pub total: i64,
}

#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Evaluation {
    pub currency: String,
    pub lines: Vec<EvaluatedLine>,
    pub tax_breakdown: Vec<RateTotal>,
    pub subtotal: i64,
    pub tax: i64,
    pub total: i64,
}

/// The printed form of a finalized invoice or credit note (`original_number`: a credit
/// note's invoice).
pub fn document(
    m: &invoice::Model,
    original_number: Option<String>,
) -> Result<super::pdf::Document, sea_orm::DbErr> {
    use super::pdf;
    let shown = Invoice::render(m)?;
    let printed = |p: Option<Party>| {
        p.map(|p| pdf::Party {
            address: p.address_lines(),
            name: p.name,
            email: p.email,
            tax_id: p.tax_id,
        })
        .unwrap_or_default()
    };
    let issued = m.finalized_at.unwrap_or(m.created_at).date_naive();
    Ok(pdf::Document {
        kind: match m.kind {
            machine::Kind::CreditNote => pdf::Kind::CreditNote,
            machine::Kind::Invoice => pdf::Kind::Invoice,
        },
        number: shown.number.clone().unwrap_or_default(),
        original_number,
        issue_date: issued,
        due_date: shown.due_date.as_deref().and_then(|d| d.parse().ok()),
        currency: shown.currency.clone(),
        locale: shown.locale.clone().unwrap_or_else(|| "en".into()),
        seller: printed(shown.seller),
        buyer: printed(shown.buyer),
        lines: shown
            .lines
            .iter()
            .map(|l| pdf::Line {
                name: l.name.clone(),
                quantity: l.quantity,
                unit_amount: l.unit_amount,
                tax_rate_bps: l.tax_rate_bps,
                tax_amount: l.tax_amount,
                net_amount: l.amount,
                total_amount: l.total,
            })
            .collect(),
        by_rate: shown
            .tax_breakdown
            .iter()
            .map(|r| pdf::RateTotal {
                rate_bps: r.rate_bps,
                net: r.amount,
                tax: r.tax,
            })
            .collect(),
        subtotal: shown.subtotal,
        tax: shown.tax,
        total: shown.total,
        amount_paid: shown.amount_paid,
        amount_due: shown.amount_due,
        memo: shown.memo,
        footer: shown.footer,
        reason: shown.reason,
    })
}

/// Checks lines as given (1 to 100) and returns them unpriced: the tax rules price them.
pub fn lines_from(input: &[LineInput], max_amount: i64) -> Result<Vec<Line>, ApiError> {
    if input.is_empty() || input.len() > 100 {
        return Err(ApiError::invalid_param("lines", "send 1 to 100 lines"));
    }
    let mut out: Vec<Line> = Vec::with_capacity(input.len());
    for (i, l) in input.iter().enumerate() {
        let p = |f: &str| format!("lines[{i}].{f}");
        let name = l.name.trim();
        if name.is_empty() || name.chars().count() > 200 {
            return Err(ApiError::invalid_param(
                &p("name"),
                "name must be 1 to 200 characters",
            ));
        }
        if !(1..=1_000_000).contains(&l.quantity) {
            return Err(ApiError::invalid_param(
                &p("quantity"),
                "quantity is 1 to 1000000",
            ));
        }
        if !(0..=max_amount).contains(&l.unit_amount) {
            return Err(ApiError::invalid_param(
                &p("unit_amount"),
                format!("unit_amount is 0 to {max_amount} minor units"),
            ));
        }
        let base = l.quantity.checked_mul(l.unit_amount).ok_or_else(|| {
            ApiError::invalid_param(&p("unit_amount"), "quantity × unit_amount overflows")
        })?;
        let line_id = l
            .line_id
            .clone()
            .unwrap_or_else(|| format!("line_{}", i + 1));
        if line_id.is_empty() || line_id.len() > 64 || out.iter().any(|o| o.line_id == line_id) {
            return Err(ApiError::invalid_param(
                &p("line_id"),
                "line ids must be unique, 1 to 64 characters",
            ));
        }
        for (f, v) in [
            ("product_id", &l.product_id),
            ("price_id", &l.price_id),
            ("tax_category", &l.tax_category),
        ] {
            check_text(&p(f), v.as_ref(), 64)?;
        }
        out.push(Line {
            line_id,
            name: name.to_owned(),
            quantity: l.quantity,
            unit_amount: l.unit_amount,
            product_id: l.product_id.clone(),
            price_id: l.price_id.clone(),
            tax_category: l.tax_category.clone(),
            tax_rule_id: None,
            tax_rate_bps: 0,
            tax_inclusive: false,
            tax_amount: 0,
            amount: base,
            total: base,
            amount_credited: 0,
            quantity_credited: 0,
            tax_credited: 0,
        });
    }
    let sum = out
        .iter()
        .try_fold(0i64, |s, l| s.checked_add(l.amount))
        .filter(|s| *s <= max_amount.saturating_mul(100));
    match sum {
        Some(_) => Ok(out),
        None => Err(ApiError::invalid_param(
            "lines",
            "the lines' total is too large",
        )),
    }
}

/// What a new invoice is made from, as asked.
#[derive(Debug)]
pub enum SourceAsk {
    /// A payment captured in full.
    Payment(String),
    /// A subscription's billing cycle.
    Cycle {
        subscription_id: String,
        cycle_id: String,
    },
    /// Lines given, in a currency.
    Lines { lines: Vec<Line>, currency: String },
}

/// `POST /invoices` parsed.
#[derive(Debug)]
pub struct NewInvoice {
    /// The shop the invoice is made in.
    pub shop: crate::ids::ProfileId,
    pub source: SourceAsk,
    pub customer_id: Option<String>,
    pub buyer: Option<Party>,
    pub memo: Option<String>,
    pub due_date: Option<NaiveDate>,
    pub metadata: Metadata,
}

impl CreateInvoiceRequest {
    pub fn parse(
        self,
        caller: &crate::auth::keys::Caller,
        max_amount: i64,
    ) -> Result<NewInvoice, ApiError> {
        let shop = caller.require_shop()?.clone();
        let given = [
            self.payment_id.is_some(),
            self.subscription_id.is_some() || self.cycle_id.is_some(),
            self.lines.is_some(),
        ];
        if given.iter().filter(|g| **g).count() != 1 {
            return Err(ApiError::invalid_param(
                "payment_id",
                "send one of payment_id, subscription_id with cycle_id, or lines",
            ));
        }
        if self.lines.is_none() && self.currency.is_some() {
            return Err(ApiError::invalid_param(
                "currency",
                "currency goes with lines; a payment or a cycle has its own",
            ));
        }
        let source = match (self.payment_id, self.subscription_id, self.cycle_id) {
            (Some(payment_id), _, _) => SourceAsk::Payment(payment_id),
            (None, Some(subscription_id), Some(cycle_id)) => SourceAsk::Cycle {
                subscription_id,
                cycle_id,
            },
            (None, sub, _) if given[1] => {
                let param = if sub.is_some() {
                    "cycle_id"
                } else {
                    "subscription_id"
                };
                return Err(ApiError::invalid_param(
                    param,
                    "a billing cycle is named by subscription_id and cycle_id",
                ));
            }
            (None, _, _) => SourceAsk::Lines {
                lines: lines_from(self.lines.as_deref().unwrap_or_default(), max_amount)?,
                currency: match &self.currency {
                    Some(c) => crate::fields::parse_currency("currency", c)?,
                    None => {
                        return Err(ApiError::invalid_param(
                            "currency",
                            "an invoice of lines needs a currency",
                        ))
                    }
                },
            },
        };
        Ok(NewInvoice {
            shop,
            source,
            customer_id: self.customer_id,
            buyer: self.buyer.map(|b| checked(b, "buyer")).transpose()?,
            memo: check_text("memo", self.memo.as_ref(), 1_000)?,
            due_date: self.due_date,
            metadata: check_metadata(self.metadata.as_ref())?.unwrap_or_default(),
        })
    }
}

/// A draft's new fields, parsed (`PATCH /invoices/{invoice_id}`); `None` keeps a field. Whether
/// the draft may take them (its lines and currency, the customer, the catalog) is
/// `create::patch`'s to check.
#[derive(Debug, Clone, Default)]
pub struct Patch {
    /// Unpriced lines (the tax rules price them).
    pub lines: Option<Vec<Line>>,
    pub currency: Option<String>,
    pub customer_id: Option<crate::ids::CustomerId>,
    pub buyer: Option<Party>,
    pub memo: Option<String>,
    pub due_date: Option<NaiveDate>,
    pub metadata: Option<Metadata>,
}

impl UpdateInvoiceRequest {
    pub fn parse(self, max_amount: i64) -> Result<Patch, ApiError> {
        let mut patch = Patch {
            lines: self
                .lines
                .as_deref()
                .map(|l| lines_from(l, max_amount))
                .transpose()?,
            currency: self
                .currency
                .as_deref()
                .map(|c| crate::fields::parse_currency("currency", c))
                .transpose()?,
            customer_id: None,
            buyer: self.buyer.map(|b| checked(b, "buyer")).transpose()?,
            memo: check_text("memo", self.memo.as_ref(), 1_000)?,
            due_date: self.due_date,
            metadata: check_metadata(self.metadata.as_ref())?,
        };
        // What an id names is looked up after the fields are checked: one of another shape
        // names nothing (404), as an unknown one does.
        patch.customer_id = self
            .customer_id
            .as_deref()
            .map(crate::fields::parse_id)
            .transpose()?;
        Ok(patch)
    }
}

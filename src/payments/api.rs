//! Request and response types of the payment routes, and the payment object every route and
//! webhook returns.

use chrono::{DateTime, Utc};
use payd_entity::{payment, payment_attempt, payment_status_history};
use payd_model::{locale::Locale, payments::FutureUsage};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use super::machine::{CaptureMethod, State, Status};
pub use super::methods::{CardReader, PaymentMethodData, SentCard, StripeMethodInput};
pub use super::{machine::Line, routing::RoutingDecision};
use crate::{
    auth::keys::Caller,
    customers::api::PaymentMethodView,
    error::ApiError,
    fields::{check_metadata, check_text, parse_amount, parse_currency, Metadata},
    ids::ProfileId,
    money::Money,
    pagination::ListQuery,
    processors::model::shown_reference,
};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema, Default)]
#[serde(rename_all = "snake_case")]
pub enum CaptureMethodDto {
    #[default]
    Automatic,
    Manual,
}

impl From<CaptureMethod> for CaptureMethodDto {
    fn from(m: CaptureMethod) -> Self {
        match m {
            CaptureMethod::Automatic => CaptureMethodDto::Automatic,
            CaptureMethod::Manual => CaptureMethodDto::Manual,
        }
    }
}

/// A product line: its total is `quantity × unit_amount + tax_amount`.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LineInput {
    /// Unique within the payment; `line_<n>` when omitted.
    #[serde(default)]
    pub line_id: Option<String>,
    #[serde(default)]
    pub product_id: Option<String>,
    #[serde(default)]
    pub price_id: Option<String>,
    pub name: String,
    pub quantity: i64,
    pub unit_amount: i64,
    #[serde(default)]
    pub tax_amount: i64,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreatePaymentRequest {
    /// Minor units, > 0.
    #[schema(minimum = 1)]
    pub amount: i64,
    /// ISO 4217 code, e.g. `USD`.
    pub currency: String,
    #[serde(default)]
    pub capture_method: Option<CaptureMethodDto>,
    /// Confirm at once (needs a payment method).
    #[serde(default)]
    pub confirm: bool,
    #[serde(default)]
    pub payment_method_data: Option<PaymentMethodData>,
    #[serde(default)]
    pub payment_method_id: Option<String>,
    #[serde(default)]
    pub customer_id: Option<String>,
    #[serde(default)]
    pub setup_future_usage: Option<String>,
    #[serde(default)]
    pub mandate_id: Option<String>,
    #[serde(default)]
    pub off_session: Option<bool>,
    /// With `setup_future_usage: "off_session"`: the mandate to create (multi-use by default).
    #[serde(default)]
    pub mandate_data: Option<MandateData>,
    #[serde(default)]
    pub enable_partial_authorization: bool,
    #[serde(default)]
    pub lines: Option<Vec<LineInput>>,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub metadata: Option<Metadata>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub return_url: Option<String>,
    /// The language of the hosted pages: `en`, `de` or `fr` (a region, as in `de-AT`, is
    /// allowed and dropped). Without it the pages follow the buyer's `Accept-Language`.
    #[serde(default)]
    pub locale: Option<String>,
    /// Answer with a `checkout_url` where the buyer pays.
    #[serde(default)]
    pub hosted_checkout: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum MandateType {
    SingleUse,
    MultiUse,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct MandateData {
    #[serde(rename = "type", default)]
    pub mandate_type: Option<MandateType>,
    /// The most one charge may take, in the payment's currency.
    #[serde(default)]
    pub amount_limit: Option<i64>,
    /// When the mandate lapses (it becomes `inactive`).
    #[serde(default)]
    pub ends_at: Option<DateTime<Utc>>,
}

/// `POST /payments` parsed: what is past here is valid by type; what it names (a customer, a
/// saved method, a mandate, catalog lines) is looked up by `create`.
#[derive(Debug)]
pub struct NewPayment {
    /// The shop the payment is made in.
    pub shop: ProfileId,
    pub amount: Money,
    pub manual_capture: bool,
    pub confirm: bool,
    /// The card sent (`payment_method_data`).
    pub card: Option<SentCard>,
    /// A saved method of the customer to charge instead.
    pub payment_method_id: Option<String>,
    pub customer_id: Option<String>,
    /// The card is saved for later.
    pub future_usage: Option<FutureUsage>,
    pub mandate_id: Option<String>,
    pub off_session: bool,
    /// The mandate the saved card is to get (with `future_usage: off_session`).
    pub mandate_request: Option<MandateRequest>,
    pub enable_partial_authorization: bool,
    pub lines: Option<Vec<Line>>,
    pub metadata: Metadata,
    pub description: Option<String>,
    pub return_url: Option<String>,
    pub hosted_checkout: bool,
    /// A language the hosted pages speak.
    pub locale: Option<Locale>,
}

impl CreatePaymentRequest {
    /// The request's fields checked, each refusal naming its field; `max_amount` is the
    /// deployment's largest charge.
    pub fn parse(
        self,
        caller: &Caller,
        cards: &CardReader,
        max_amount: i64,
    ) -> Result<NewPayment, ApiError> {
        let shop = caller.require_shop()?.clone();
        let amount = Money::new(
            parse_amount("amount", self.amount, max_amount)?,
            &parse_currency("currency", &self.currency)?,
        );
        let future_usage = self.future_usage()?;
        if future_usage.is_some() && self.customer_id.is_none() {
            return Err(needs_customer("setup_future_usage"));
        }
        let mandate_request = self.mandate_request(future_usage, &amount.currency, cards.now)?;
        let card = cards.read(self.payment_method_data.as_ref())?;
        if card.is_some() && self.payment_method_id.is_some() {
            return Err(ApiError::invalid_param(
                "payment_method_id",
                "send payment_method_data or payment_method_id, not both",
            ));
        }
        let off_session = self.off_session.unwrap_or(false);
        match &self.mandate_id {
            None if off_session => {
                return Err(ApiError::invalid(
                    "mandate_required",
                    "an off-session payment needs a mandate_id",
                )
                .param("mandate_id"))
            }
            Some(_) if self.customer_id.is_none() => return Err(needs_customer("mandate_id")),
            _ => {}
        }
        let has_method =
            card.is_some() || self.payment_method_id.is_some() || self.mandate_id.is_some();
        if self.confirm && !has_method {
            return Err(ApiError::invalid(
                "payment_method_required",
                "confirm: true needs payment_method_data",
            )
            .param("payment_method_data"));
        }
        let lines = self
            .lines
            .as_deref()
            .map(|l| parse_lines(l, amount.minor))
            .transpose()?;
        let metadata = check_metadata(self.metadata.as_ref())?.unwrap_or_default();
        Ok(NewPayment {
            shop,
            amount,
            manual_capture: self.capture_method == Some(CaptureMethodDto::Manual),
            confirm: self.confirm,
            card,
            payment_method_id: self.payment_method_id,
            customer_id: self.customer_id,
            future_usage,
            mandate_id: self.mandate_id,
            off_session,
            mandate_request,
            enable_partial_authorization: self.enable_partial_authorization,
            lines,
            metadata,
            description: check_text("description", self.description.as_ref(), 1000)?,
            return_url: parse_return_url(self.return_url.as_ref())?,
            hosted_checkout: self.hosted_checkout,
            locale: self.locale.as_deref().map(parse_locale).transpose()?,
        })
    }

    fn future_usage(&self) -> Result<Option<FutureUsage>, ApiError> {
        self.setup_future_usage
            .as_deref()
            .map(|u| {
                FutureUsage::parse(u).ok_or_else(|| {
                    ApiError::invalid_param(
                        "setup_future_usage",
                        "setup_future_usage is off_session or on_session",
                    )
                })
            })
            .transpose()
    }

    /// The mandate a payment saving its card for off-session use asks for (`mandate_data`).
    fn mandate_request(
        &self,
        future_usage: Option<FutureUsage>,
        currency: &str,
        now: DateTime<Utc>,
    ) -> Result<Option<MandateRequest>, ApiError> {
        match (&self.mandate_data, future_usage) {
            (Some(_), Some(FutureUsage::OnSession) | None) => Err(ApiError::invalid_param(
                "mandate_data",
                "mandate_data goes with setup_future_usage: off_session",
            )),
            (data, Some(FutureUsage::OffSession)) => {
                let limit = data.as_ref().and_then(|d| d.amount_limit);
                if limit.is_some_and(|l| l <= 0) {
                    return Err(ApiError::invalid_param(
                        "mandate_data.amount_limit",
                        "amount_limit must be greater than 0",
                    ));
                }
                let ends_at = data.as_ref().and_then(|d| d.ends_at);
                if ends_at.is_some_and(|t| t <= now) {
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
}

fn needs_customer(param: &str) -> ApiError {
    ApiError::invalid("customer_required", format!("{param} needs customer_id"))
        .param("customer_id")
}

/// `POST /payments/{payment_id}/confirm` parsed.
#[derive(Debug)]
pub struct ConfirmAsk {
    /// The card sent.
    pub card: Option<SentCard>,
    /// A saved method of the payment's customer to charge instead.
    pub payment_method_id: Option<String>,
    pub return_url: Option<String>,
}

impl ConfirmPaymentRequest {
    pub fn parse(&self, cards: &CardReader) -> Result<ConfirmAsk, ApiError> {
        let card = cards.read(self.payment_method_data.as_ref())?;
        if card.is_some() && self.payment_method_id.is_some() {
            return Err(ApiError::invalid_param(
                "payment_method_id",
                "send payment_method_data or payment_method_id, not both",
            ));
        }
        Ok(ConfirmAsk {
            card,
            payment_method_id: self.payment_method_id.clone(),
            return_url: parse_return_url(self.return_url.as_ref())?,
        })
    }
}

/// A return URL: http or https only (a `javascript:` URL would run on payd's checkout page).
pub fn parse_return_url(value: Option<&String>) -> Result<Option<String>, ApiError> {
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

pub use payd_model::payments::{LastError, MandateRequest};

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdatePaymentRequest {
    #[serde(default)]
    pub amount: Option<i64>,
    #[serde(default)]
    pub currency: Option<String>,
    #[serde(default)]
    pub capture_method: Option<CaptureMethodDto>,
    #[serde(default)]
    pub payment_method_data: Option<PaymentMethodData>,
    #[serde(default)]
    pub lines: Option<Vec<LineInput>>,
    #[serde(default)]
    #[schema(value_type = Object)]
    pub metadata: Option<Metadata>,
    #[serde(default)]
    pub description: Option<String>,
    #[serde(default)]
    pub return_url: Option<String>,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ConfirmPaymentRequest {
    #[serde(default)]
    pub payment_method_data: Option<PaymentMethodData>,
    #[serde(default)]
    pub payment_method_id: Option<String>,
    /// Required with a publishable key.
    #[serde(default)]
    pub client_secret: Option<String>,
    #[serde(default)]
    pub return_url: Option<String>,
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CapturePaymentRequest {
    /// Defaults to the whole capturable remainder.
    #[serde(default)]
    pub amount: Option<i64>,
    /// `false` keeps the rest capturable.
    #[serde(default = "yes")]
    pub final_capture: bool,
}

fn yes() -> bool {
    true
}

#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CancelPaymentRequest {
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Debug, Clone, Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct RetrieveQuery {
    /// Ask the processor before answering.
    #[serde(default)]
    pub force_sync: Option<bool>,
    /// Required with a publishable key.
    #[serde(default)]
    pub client_secret: Option<String>,
}

/// Filters of `POST /payments/list`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ListPaymentsRequest {
    /// Only this shop's payments (a caller scoped to a shop sees only its own anyway).
    #[serde(default)]
    pub profile_id: Option<String>,
    #[serde(default)]
    pub status: Option<String>,
    #[serde(default)]
    pub currency: Option<String>,
    #[serde(default)]
    pub customer_id: Option<String>,
    #[serde(default)]
    pub amount_gte: Option<i64>,
    #[serde(default)]
    pub amount_lte: Option<i64>,
    #[serde(default)]
    pub created_after: Option<DateTime<Utc>>,
    #[serde(default)]
    pub created_before: Option<DateTime<Utc>>,
    /// 1 to 100 (default 10).
    #[serde(default)]
    #[schema(minimum = 1, maximum = 100)]
    pub limit: Option<i64>,
    #[serde(default)]
    pub starting_after: Option<String>,
    #[serde(default)]
    pub ending_before: Option<String>,
}

impl ListPaymentsRequest {
    pub fn page_query(&self) -> ListQuery {
        ListQuery {
            limit: self.limit,
            starting_after: self.starting_after.clone(),
            ending_before: self.ending_before.clone(),
        }
    }
}

/// What a buyer is shown of `e`: the code, and a sentence for it that tells nothing of the
/// processor (its wording, addresses, internals stay on the merchant's routes).
pub fn for_buyer(e: LastError) -> LastError {
    let message = match e.code.as_str() {
        "card_declined" | "do_not_honor" | "generic_decline" => "The card was declined.",
        "insufficient_funds" => "The card has insufficient funds.",
        "stolen_card" | "lost_card" | "pickup_card" | "fraudulent" => {
            "The card was declined. Use another card."
        }
        "expired_card" => "The card has expired.",
        "incorrect_cvc" | "invalid_cvc" => "The card's security code is incorrect.",
        "incorrect_number" | "invalid_number" => "The card number is incorrect.",
        "authentication_required" | "authentication_failed" | "challenge_refused" => {
            "The card's authentication did not succeed."
        }
        _ => "The payment could not be completed. Try again or use another card.",
    };
    LastError {
        code: e.code,
        message: message.to_owned(),
    }
}

/// What the buyer must do next (Stripe's shape): open this URL, the hosted 3-D Secure
/// challenge.
#[derive(Debug, Clone, Serialize, ToSchema, PartialEq, Eq)]
pub struct NextAction {
    /// `redirect_to_url`.
    #[serde(rename = "type")]
    pub kind: String,
    pub redirect_to_url: RedirectToUrl,
}

#[derive(Debug, Clone, Serialize, ToSchema, PartialEq, Eq)]
pub struct RedirectToUrl {
    /// The hosted challenge, with the payment's `client_secret`.
    pub url: String,
}

/// The payment object: what `GET /payments/{id}` returns and `payment_details` events carry.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Payment {
    pub payment_id: String,
    /// Rises by one with each committed change of this object: a receiver keeps, per object,
    /// the highest it has seen.
    pub version: i64,
    pub status: String,
    pub amount: i64,
    pub currency: String,
    pub test_mode: bool,
    #[schema(value_type = Object)]
    pub metadata: Metadata,
    pub client_secret: String,
    pub capture_method: CaptureMethodDto,
    pub amount_authorized: i64,
    pub amount_capturable: i64,
    pub amount_captured: i64,
    pub amount_refunded: i64,
    pub customer_id: Option<String>,
    pub payment_method: Option<PaymentMethodView>,
    pub mandate_id: Option<String>,
    pub last_error: Option<LastError>,
    pub description: Option<String>,
    pub return_url: Option<String>,
    /// The language of its hosted pages, when set at creation.
    pub locale: Option<String>,
    pub checkout_url: Option<String>,
    /// Set while the payment is `requires_customer_action`: where to send the buyer.
    pub next_action: Option<NextAction>,
    pub profile_id: String,
    pub attempt_count: i32,
    pub expires_at: DateTime<Utc>,
    pub capture_before: Option<DateTime<Utc>>,
    pub created: DateTime<Utc>,
    pub updated: DateTime<Utc>,
}

impl Payment {
    /// Renders a stored payment; `public_url` is the base of `checkout_url`.
    pub fn render(m: &payment::Model, public_url: &str) -> Result<Self, sea_orm::DbErr> {
        let card = m.payment_method.as_ref().map(|c| &c.0);
        let capturable = state_of(m).capturable();
        let base = public_url.trim_end_matches('/');
        Ok(Self {
            payment_id: m.id.to_string(),
            version: m.version,
            status: m.status.to_string(),
            amount: m.amount,
            currency: m.currency.clone(),
            test_mode: m.test_mode,
            metadata: m.metadata.0.clone(),
            client_secret: m.client_secret.clone(),
            capture_method: m.capture_method.into(),
            amount_authorized: m.amount_authorized,
            amount_capturable: capturable,
            amount_captured: m.amount_captured,
            amount_refunded: m.amount_refunded,
            customer_id: m.customer_id.as_ref().map(ToString::to_string),
            payment_method: card.map(PaymentMethodView::from),
            mandate_id: m.mandate_id.as_ref().map(ToString::to_string),
            last_error: m.last_error.as_ref().map(|e| e.0.clone()),
            description: m.description.clone(),
            return_url: m.return_url.clone(),
            locale: m.locale.map(|l| l.to_string()),
            checkout_url: m
                .hosted_checkout
                .then(|| format!("{base}{}", buyer_path(&m.id, "", &m.client_secret))),
            // The only customer action payd knows is the 3-D Secure challenge.
            next_action: (m.status == Status::RequiresCustomerAction).then(|| NextAction {
                kind: "redirect_to_url".to_owned(),
                redirect_to_url: RedirectToUrl {
                    url: format!("{base}{}", challenge_path(&m.id, &m.client_secret)),
                },
            }),
            profile_id: m.profile_id.to_string(),
            attempt_count: m.confirm_attempts,
            expires_at: m.expires_at,
            capture_before: m.capture_before,
            created: m.created_at,
            updated: m.updated_at,
        })
    }
}

/// The refund object: what `GET /refunds/{refund_id}` returns and `refund_details` events carry.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Refund {
    pub refund_id: String,
    /// Rises by one with each committed change of this object: a receiver keeps, per object,
    /// the highest it has seen.
    pub version: i64,
    pub payment_id: String,
    /// `pending`, `manual_review`, `succeeded` or `failed`.
    pub status: String,
    pub amount: i64,
    pub currency: String,
    /// The refund's share of each product line.
    pub lines: Vec<super::refunds::LineRefund>,
    pub reason: Option<String>,
    #[schema(value_type = Object)]
    pub metadata: Metadata,
    pub failure_reason: Option<String>,
    /// The processor's id of the refund (Stripe's `re_…`); null for the sandbox.
    pub processor_reference: Option<String>,
    pub test_mode: bool,
    pub created: DateTime<Utc>,
    pub updated: DateTime<Utc>,
}

impl Refund {
    pub fn render(r: &payd_entity::refund::Model) -> Result<Self, sea_orm::DbErr> {
        Ok(Self {
            refund_id: r.id.to_string(),
            version: r.version,
            payment_id: r.payment_id.to_string(),
            status: r.status.to_string(),
            amount: r.amount,
            currency: r.currency.clone(),
            lines: r.lines.0.clone(),
            reason: r.reason.clone(),
            metadata: r.metadata.0.clone(),
            failure_reason: r.failure_reason.clone(),
            processor_reference: shown_reference(r.processor_reference.as_deref()),
            test_mode: r.test_mode,
            created: r.created_at,
            updated: r.updated_at,
        })
    }
}

/// One processor attempt.
#[derive(Debug, Serialize, ToSchema)]
pub struct Attempt {
    pub attempt_id: String,
    pub number: i32,
    pub processor: String,
    /// The processor's id of this attempt (Stripe's PaymentIntent `pi_…`, a remote
    /// processor's reference); null for the sandbox.
    pub processor_reference: Option<String>,
    pub status: String,
    pub amount: i64,
    pub error: Option<LastError>,
    pub payment_method: Option<PaymentMethodView>,
    pub created: DateTime<Utc>,
}

impl TryFrom<&payment_attempt::Model> for Attempt {
    type Error = sea_orm::DbErr;

    fn try_from(a: &payment_attempt::Model) -> Result<Self, Self::Error> {
        let card = a.payment_method.as_ref().map(|c| &c.0);
        Ok(Self {
            attempt_id: a.id.clone(),
            number: a.number,
            processor: a.processor.clone(),
            processor_reference: shown_reference(a.processor_reference.as_deref()),
            status: a.status.to_string(),
            amount: a.amount,
            error: a.error_code.clone().map(|code| LastError {
                code,
                message: a.error_message.clone().unwrap_or_default(),
            }),
            payment_method: card.map(PaymentMethodView::from),
            created: a.created_at,
        })
    }
}

#[derive(Debug, Serialize, ToSchema)]
pub struct RoutingDecisionView {
    pub attempt_id: String,
    pub number: i32,
    pub outcome: String,
    #[serde(flatten)]
    pub decision: RoutingDecision,
}

#[derive(Debug, Serialize, ToSchema)]
pub struct StatusChange {
    pub from: Option<String>,
    pub to: String,
    pub trigger: String,
    pub at: DateTime<Utc>,
}

impl From<&payment_status_history::Model> for StatusChange {
    fn from(h: &payment_status_history::Model) -> Self {
        Self {
            from: h.from_status.map(|s| s.to_string()),
            to: h.to_status.to_string(),
            trigger: h.trigger.to_string(),
            at: h.created_at,
        }
    }
}

/// A line with its captured and refundable balances.
#[derive(Debug, Serialize, ToSchema)]
pub struct LineBalance {
    #[serde(flatten)]
    pub line: Line,
    /// The line's share of the captured amount.
    pub amount_captured: i64,
    /// Exactly what a refund of this line may take: its captured share (at most its amount)
    /// less its refunds, within what the payment has left to refund.
    pub amount_refundable: i64,
}

/// A payment's `locale`: one the hosted pages speak (`de-AT` is `de`).
fn parse_locale(raw: &str) -> Result<Locale, ApiError> {
    Locale::of_tag(raw).ok_or_else(|| {
        let tags = Locale::ALL.map(Locale::as_str).join(", ");
        ApiError::invalid_param("locale", format!("locale is one of {tags}"))
    })
}

/// Checks lines and returns them stored form; their totals must add up to `amount`.
pub fn parse_lines(lines: &[LineInput], amount: i64) -> Result<Vec<Line>, ApiError> {
    let out = parse_line_items(lines)?;
    let total: i64 = out.iter().map(|l| l.amount).sum();
    if total != amount {
        return Err(ApiError::invalid(
            "lines_amount_mismatch",
            format!("the lines add up to {total}, not to the amount {amount}"),
        )
        .param("lines"));
    }
    Ok(out)
}

/// Checks lines and returns them stored form (1 to 100, ids unique, their total within an
/// `i64`); what they must add up to is the caller's to check.
pub fn parse_line_items(lines: &[LineInput]) -> Result<Vec<Line>, ApiError> {
    if lines.is_empty() || lines.len() > 100 {
        return Err(ApiError::invalid_param("lines", "send 1 to 100 lines"));
    }
    let mut out: Vec<Line> = Vec::with_capacity(lines.len());
    let mut total: i64 = 0;
    for (i, l) in lines.iter().enumerate() {
        let p = |f: &str| format!("lines[{i}].{f}");
        if l.name.trim().is_empty() || l.name.len() > 200 {
            return Err(ApiError::invalid_param(
                &p("name"),
                "name must be 1 to 200 characters",
            ));
        }
        if l.quantity < 1 {
            return Err(ApiError::invalid_param(
                &p("quantity"),
                "quantity must be at least 1",
            ));
        }
        for (name, value) in [("unit_amount", l.unit_amount), ("tax_amount", l.tax_amount)] {
            if value < 0 {
                return Err(ApiError::invalid_param(
                    &p(name),
                    "amounts must not be negative",
                ));
            }
        }
        let goods = l.quantity.checked_mul(l.unit_amount).ok_or_else(|| {
            ApiError::invalid_param(&p("unit_amount"), "quantity × unit_amount overflows")
        })?;
        let line_total = goods
            .checked_add(l.tax_amount)
            .ok_or_else(|| ApiError::invalid_param(&p("tax_amount"), "the line total overflows"))?;
        total = total
            .checked_add(line_total)
            .ok_or_else(|| ApiError::invalid_param("lines", "the lines' total overflows"))?;
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
        out.push(Line {
            line_id,
            product_id: l.product_id.clone(),
            price_id: l.price_id.clone(),
            name: l.name.trim().to_owned(),
            quantity: l.quantity,
            unit_amount: l.unit_amount,
            tax_amount: l.tax_amount,
            amount: line_total,
            quantity_refunded: 0,
            amount_refunded: 0,
        });
    }
    Ok(out)
}

/// A buyer's page of a payment (`/checkout/{payment_id}` and `page` after it), with its
/// `client_secret` in the query, relative to payd's public URL.
pub fn buyer_path(payment_id: &str, page: &str, client_secret: &str) -> String {
    let secret: String = form_urlencoded::byte_serialize(client_secret.as_bytes()).collect();
    format!("/checkout/{payment_id}{page}?client_secret={secret}")
}

/// The hosted 3-D Secure challenge of a payment, relative to payd's public URL.
pub fn challenge_path(payment_id: &str, client_secret: &str) -> String {
    buyer_path(payment_id, "/challenge", client_secret)
}

/// The payment's stored lines (none when it has none).
pub fn lines_of(m: &payment::Model) -> Vec<Line> {
    m.lines.as_ref().map(|l| l.0.clone()).unwrap_or_default()
}

/// The machine's view of a stored payment.
pub fn state_of(m: &payment::Model) -> State {
    State {
        status: m.status,
        amount: m.amount,
        capture_method: m.capture_method,
        authorized: m.amount_authorized,
        captured: m.amount_captured,
        refunded: m.amount_refunded,
        attempts: m.confirm_attempts,
        max_attempts: m.max_attempts,
        captured_at: m.captured_at,
    }
}

impl From<super::routing::RuleError> for ApiError {
    fn from(e: super::routing::RuleError) -> Self {
        ApiError::invalid_param(&e.param, e.message)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fields::{display_amount, parse_currency};

    fn line(q: i64, u: i64, t: i64) -> LineInput {
        LineInput {
            line_id: None,
            product_id: None,
            price_id: None,
            name: "x".into(),
            quantity: q,
            unit_amount: u,
            tax_amount: t,
        }
    }

    #[test]
    fn lines_must_add_up() {
        let lines = parse_lines(&[line(2, 100, 20), line(1, 80, 0)], 300).unwrap();
        assert_eq!(lines[0].amount, 220);
        assert_eq!(lines[1].line_id, "line_2");
        assert_eq!(
            parse_lines(&[line(2, 100, 20)], 300).unwrap_err().code,
            "lines_amount_mismatch"
        );
        assert_eq!(
            parse_lines(&[line(0, 100, 0)], 0)
                .unwrap_err()
                .param
                .as_deref(),
            Some("lines[0].quantity")
        );
        assert!(parse_lines(&[line(i64::MAX, 2, 0)], 1).is_err());
    }

    #[test]
    fn amounts_are_displayed_in_major_units() {
        assert_eq!(display_amount(500, "USD"), "5.00");
        assert_eq!(display_amount(5, "EUR"), "0.05");
        assert_eq!(display_amount(500, "JPY"), "500");
        assert_eq!(display_amount(1234, "BHD"), "1.234");
    }

    #[test]
    fn currencies() {
        assert_eq!(parse_currency("currency", "usd").unwrap(), "USD");
        for money in ["JPY", "BHD", "XAF", "XOF", "XPF", "XCD", "EUR"] {
            assert_eq!(parse_currency("currency", money).unwrap(), money);
        }
        for not_money in [
            "XXX", "XTS", "XAU", "XAG", "XPD", "XPT", "XDR", "XSU", "XUA", "XBA", "XBB", "XBC",
            "XBD",
        ] {
            let e = parse_currency("currency", not_money).unwrap_err();
            assert_eq!(
                (e.code, e.param.as_deref()),
                ("invalid_currency", Some("currency")),
                "{not_money}"
            );
        }
        assert_eq!(
            parse_currency("currency", "XXQ")
                .unwrap_err()
                .param
                .as_deref(),
            Some("currency")
        );
    }
}

//! A payment: its status, amounts and the data of its payment method (never the card number).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "payments")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: payd_model::ids::PaymentId,
    pub merchant_id: payd_model::ids::MerchantId,
    pub profile_id: payd_model::ids::ProfileId,
    pub test_mode: bool,
    pub status: payd_model::payments::Status,
    pub amount: i64,
    pub currency: String,
    pub capture_method: payd_model::payments::CaptureMethod,
    pub amount_authorized: i64,
    pub amount_captured: i64,
    pub amount_refunded: i64,
    pub confirm_attempts: i32,
    pub max_attempts: i32,
    pub enable_partial_authorization: bool,
    pub customer_id: Option<payd_model::ids::CustomerId>,
    pub mandate_id: Option<payd_model::ids::MandateId>,
    pub setup_future_usage: Option<payd_model::payments::FutureUsage>,
    pub off_session: bool,
    /// JSON: the mandate to create when the card is saved for off-session use.
    pub mandate_request: Option<payd_model::json::Json<payd_model::payments::MandateRequest>>,
    /// JSON: brand, last4, expiry, fingerprint, sandbox behaviour.
    pub payment_method: Option<payd_model::json::Json<payd_model::cards::StoredCard>>,
    /// The processor account of the current authorization.
    pub processor: Option<String>,
    pub processor_reference: Option<String>,
    /// JSON `{code, message}` of the last failed attempt.
    pub last_error: Option<payd_model::json::Json<payd_model::payments::LastError>>,
    /// Its product lines, when it was made with lines.
    pub lines: Option<payd_model::json::Json<Vec<payd_model::payments::Line>>>,
    /// JSON object.
    pub metadata: payd_model::json::Json<payd_model::metadata::Metadata>,
    pub description: Option<String>,
    pub return_url: Option<String>,
    pub hosted_checkout: bool,
    /// The language of its hosted pages (`en`, `de`, `fr`), over the buyer's
    /// `Accept-Language`.
    pub locale: Option<payd_model::locale::Locale>,
    pub client_secret: String,
    pub expires_at: DateTimeUtc,
    pub capture_before: Option<DateTimeUtc>,
    pub captured_at: Option<DateTimeUtc>,
    /// Both accounts when the processor contradicts ours.
    pub conflict: Option<payd_model::json::Json<payd_model::json::Value>>,
    /// JSON: the operation sent to the processor whose outcome is not recorded yet (its
    /// intent, committed before the request went out).
    pub pending_operation: Option<payd_model::json::Json<payd_model::payments::Intent>>,
    /// Compare-and-set guard: every write is `WHERE version = ?`.
    pub version: i64,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

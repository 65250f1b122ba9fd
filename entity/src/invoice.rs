//! An invoice or a credit note (`kind`): a draft while editable; once finalized, its number,
//! lines, taxes, seller and buyer are frozen.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "invoices")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: payd_model::ids::InvoiceId,
    pub merchant_id: payd_model::ids::MerchantId,
    pub profile_id: payd_model::ids::ProfileId,
    pub test_mode: bool,
    pub kind: payd_model::invoices::Kind,
    pub status: payd_model::invoices::Status,
    pub number: Option<String>,
    pub currency: String,
    pub customer_id: Option<payd_model::ids::CustomerId>,
    pub payment_id: Option<payd_model::ids::PaymentId>,
    pub subscription_id: Option<payd_model::ids::SubscriptionId>,
    pub cycle_id: Option<String>,
    pub original_invoice_id: Option<payd_model::ids::InvoiceId>,
    /// `payment:<id>` or `cycle:<id>` while the invoice stands (one invoice per source).
    pub source_key: Option<String>,
    /// The buyer as given (a draft) or as frozen (finalized).
    pub buyer: Option<payd_model::json::Json<payd_model::invoices::Party>>,
    /// The seller, frozen at finalize.
    pub seller: Option<payd_model::json::Json<payd_model::invoices::Party>>,
    /// Its lines with their tax and what was credited of each.
    pub lines: payd_model::json::Json<Vec<payd_model::invoices::Line>>,
    pub subtotal: i64,
    pub tax: i64,
    pub total: i64,
    pub amount_paid: i64,
    pub amount_credited: i64,
    pub memo: Option<String>,
    pub footer: Option<String>,
    /// A credit note's reason.
    pub reason: Option<String>,
    pub locale: Option<payd_model::locale::Locale>,
    /// `YYYY-MM-DD`.
    pub due_date: Option<String>,
    /// JSON object.
    pub metadata: payd_model::json::Json<payd_model::metadata::Metadata>,
    pub finalized_at: Option<DateTimeUtc>,
    pub paid_at: Option<DateTimeUtc>,
    pub voided_at: Option<DateTimeUtc>,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
    pub version: i64,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

//! A dispute (chargeback) a buyer opened against a captured payment.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "disputes")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: payd_model::ids::DisputeId,
    pub payment_id: payd_model::ids::PaymentId,
    pub merchant_id: payd_model::ids::MerchantId,
    pub profile_id: payd_model::ids::ProfileId,
    pub test_mode: bool,
    pub stage: payd_model::disputes::Stage,
    pub status: payd_model::disputes::Status,
    pub amount: i64,
    pub currency: String,
    pub reason: String,
    pub processor: Option<String>,
    pub processor_reference: Option<String>,
    pub evidence_due_by: DateTimeUtc,
    pub evidence_submitted_at: Option<DateTimeUtc>,
    pub explanation: Option<String>,
    /// The wallet processor's case this dispute follows (its changes come from the case).
    pub case_id: Option<String>,
    /// The case's version this dispute last followed.
    pub case_version: Option<i64>,
    pub version: i64,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

//! A mandate: the customer's permission to charge a saved method without them present.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "mandates")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: payd_model::ids::MandateId,
    pub customer_id: payd_model::ids::CustomerId,
    pub merchant_id: payd_model::ids::MerchantId,
    /// The shop of the payment that created it: its events go to that shop's endpoint.
    pub profile_id: payd_model::ids::ProfileId,
    pub test_mode: bool,
    pub payment_method_id: payd_model::ids::PaymentMethodId,
    pub mandate_type: payd_model::mandates::Kind,
    pub amount_limit: Option<i64>,
    pub currency: Option<String>,
    pub status: payd_model::mandates::Status,
    pub start_at: DateTimeUtc,
    pub end_at: Option<DateTimeUtc>,
    pub version: i64,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

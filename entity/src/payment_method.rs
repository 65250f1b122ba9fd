//! A customer's saved card: brand, last four, expiry and fingerprint — never the number.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "payment_methods")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: payd_model::ids::PaymentMethodId,
    pub customer_id: payd_model::ids::CustomerId,
    pub merchant_id: payd_model::ids::MerchantId,
    pub test_mode: bool,
    /// JSON of the stored card.
    pub card: payd_model::json::Json<payd_model::cards::StoredCard>,
    pub fingerprint: String,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

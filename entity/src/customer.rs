//! A merchant's customer. Deleting one redacts its personal data; its id stays, so payments,
//! refunds and disputes that name it stay readable.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "customers")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: payd_model::ids::CustomerId,
    pub merchant_id: payd_model::ids::MerchantId,
    pub test_mode: bool,
    pub name: Option<String>,
    pub email: Option<String>,
    pub phone: Option<String>,
    pub description: Option<String>,
    /// JSON object.
    pub address: Option<payd_model::json::Json<payd_model::address::Address>>,
    /// JSON object.
    pub metadata: payd_model::json::Json<payd_model::metadata::Metadata>,
    pub default_payment_method_id: Option<payd_model::ids::PaymentMethodId>,
    pub redacted_at: Option<DateTimeUtc>,
    pub version: i64,
    pub created_at: DateTimeUtc,
    pub updated_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

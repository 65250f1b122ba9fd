//! One call to a processor for a payment: which processor, why it was chosen, what it said.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "payment_attempts")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub payment_id: payd_model::ids::PaymentId,
    pub number: i32,
    pub processor: String,
    pub processor_reference: Option<String>,
    pub status: payd_model::payments::AttemptStatus,
    pub amount: i64,
    pub error_code: Option<String>,
    pub error_message: Option<String>,
    /// JSON: brand, last4, expiry of the method used.
    pub payment_method: Option<payd_model::json::Json<payd_model::cards::StoredCard>>,
    /// The routing decision (rule, candidates, reason).
    pub routing: payd_model::json::Json<payd_model::payments::RoutingDecision>,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

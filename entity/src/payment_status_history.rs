//! One status change of a payment, written in the transaction that made it.

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "payment_status_history")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub payment_id: payd_model::ids::PaymentId,
    pub from_status: Option<payd_model::payments::Status>,
    pub to_status: payd_model::payments::Status,
    pub trigger: payd_model::payments::Trigger,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

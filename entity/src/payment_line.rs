//! A payment line that names a catalog product or price: the index the sales report and the
//! "never sold" rule read (the line itself lives in the payment's `lines`).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "payment_lines")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub payment_id: payd_model::ids::PaymentId,
    #[sea_orm(primary_key, auto_increment = false)]
    pub line_id: String,
    pub product_id: Option<String>,
    pub price_id: Option<String>,
    pub created_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

//! A processor account configured for a shop (several sandbox accounts give routing a choice).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, Eq, DeriveEntityModel)]
#[sea_orm(table_name = "processor_accounts")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: String,
    pub merchant_id: payd_model::ids::MerchantId,
    pub profile_id: payd_model::ids::ProfileId,
    /// Unique within the shop; routing rules name accounts by it.
    pub name: String,
    pub kind: payd_model::processors::AccountKind,
    pub enabled: bool,
    /// The sealed JSON connection of a `remote` or `stripe` account.
    pub config: Option<String>,
    pub approval: payd_model::processors::Approval,
    pub created_at: DateTimeUtc,
    /// The mode it serves: test payments only, or live payments only. A Stripe account's
    /// follows its key (`sk_test_…`/`sk_live_…`); any other's, the key that added it.
    pub test_mode: bool,
    /// A Stripe account's: how far its events have been read from Stripe's `GET /v1/events`
    /// (Unix seconds) by the catch-up of missed deliveries; none before its first look.
    pub events_read_until: Option<i64>,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

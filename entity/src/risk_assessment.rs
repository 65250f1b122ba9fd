//! One risk assessment of a shop in one mode: the counts over its window, the band they fell
//! in under the thresholds it used, and the band of the assessment before it (`seq` − 1).

use sea_orm::entity::prelude::*;

#[derive(Clone, Debug, PartialEq, DeriveEntityModel)]
#[sea_orm(table_name = "risk_assessments")]
pub struct Model {
    #[sea_orm(primary_key, auto_increment = false)]
    pub id: payd_model::ids::RiskAssessmentId,
    pub merchant_id: payd_model::ids::MerchantId,
    pub profile_id: payd_model::ids::ProfileId,
    pub test_mode: bool,
    /// 1 for the shop's first assessment in this mode, then one more each time.
    pub seq: i64,
    pub band: payd_model::risk::Band,
    pub previous_band: Option<payd_model::risk::Band>,
    /// Payments decided in the window (succeeded or failed): the rates' denominator.
    pub payments: i64,
    pub declines: i64,
    pub refunds: i64,
    pub disputes: i64,
    pub window_secs: i64,
    /// The thresholds used.
    pub thresholds: payd_model::json::Json<payd_model::risk::Thresholds>,
    pub trigger: payd_model::risk::Trigger,
    pub assessed_at: DateTimeUtc,
}

#[derive(Copy, Clone, Debug, EnumIter, DeriveRelation)]
pub enum Relation {}

impl ActiveModelBehavior for ActiveModel {}

//! Shops' risk assessments: one row per assessment of a shop in one mode, numbered in order
//! (`seq`), with the counts it was made from and the thresholds it used. The unique number
//! makes assessments of one shop a chain even when two instances assess at once: the second
//! to write the same number loses, reads again and writes the next.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(RiskAssessments::Table)
                    .col(string(RiskAssessments::Id).primary_key())
                    .col(string(RiskAssessments::MerchantId))
                    .col(string(RiskAssessments::ProfileId))
                    .col(boolean(RiskAssessments::TestMode))
                    .col(big_integer(RiskAssessments::Seq))
                    .col(string(RiskAssessments::Band))
                    .col(string_null(RiskAssessments::PreviousBand))
                    .col(big_integer(RiskAssessments::Payments))
                    .col(big_integer(RiskAssessments::Declines))
                    .col(big_integer(RiskAssessments::Refunds))
                    .col(big_integer(RiskAssessments::Disputes))
                    .col(big_integer(RiskAssessments::WindowSecs))
                    .col(text(RiskAssessments::Thresholds))
                    .col(string(RiskAssessments::Trigger))
                    .col(timestamp_with_time_zone(RiskAssessments::AssessedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("risk_assessments_chain")
                    .table(RiskAssessments::Table)
                    .col(RiskAssessments::ProfileId)
                    .col(RiskAssessments::TestMode)
                    .col(RiskAssessments::Seq)
                    .unique()
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(RiskAssessments::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
enum RiskAssessments {
    Table,
    Id,
    MerchantId,
    ProfileId,
    TestMode,
    Seq,
    Band,
    PreviousBand,
    Payments,
    Declines,
    Refunds,
    Disputes,
    WindowSecs,
    Thresholds,
    Trigger,
    AssessedAt,
}

//! Refunds: full, partial or by product line, decided by the payment's actor.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Refunds::Table)
                    .col(string(Refunds::Id).primary_key())
                    .col(string(Refunds::PaymentId))
                    .col(string(Refunds::MerchantId))
                    .col(string(Refunds::ProfileId))
                    .col(boolean(Refunds::TestMode))
                    .col(string(Refunds::Status))
                    .col(big_integer(Refunds::Amount))
                    .col(string(Refunds::Currency))
                    .col(text(Refunds::Lines))
                    .col(text_null(Refunds::Reason))
                    .col(text(Refunds::Metadata))
                    .col(string_null(Refunds::ProcessorReference))
                    .col(text_null(Refunds::FailureReason))
                    .col(big_integer(Refunds::Version))
                    .col(timestamp_with_time_zone(Refunds::CreatedAt))
                    .col(timestamp_with_time_zone(Refunds::UpdatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(Refunds::Table, Refunds::PaymentId)
                            .to(Payments::Table, Payments::Id),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_refunds_payment")
                    .table(Refunds::Table)
                    .col(Refunds::PaymentId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_refunds_merchant")
                    .table(Refunds::Table)
                    .col(Refunds::MerchantId)
                    .col(Refunds::TestMode)
                    .col(Refunds::Id)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(Refunds::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
enum Refunds {
    Table,
    Id,
    PaymentId,
    MerchantId,
    ProfileId,
    TestMode,
    Status,
    Amount,
    Currency,
    Lines,
    Reason,
    Metadata,
    ProcessorReference,
    FailureReason,
    Version,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum Payments {
    Table,
    Id,
}

//! Payments, their processor attempts, their status history, and the shops' processor
//! accounts and routing rules.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Payments::Table)
                    .col(string(Payments::Id).primary_key())
                    .col(string(Payments::MerchantId))
                    .col(string(Payments::ProfileId))
                    .col(boolean(Payments::TestMode))
                    .col(string(Payments::Status))
                    .col(big_integer(Payments::Amount))
                    .col(string(Payments::Currency))
                    .col(string(Payments::CaptureMethod))
                    .col(big_integer(Payments::AmountAuthorized))
                    .col(big_integer(Payments::AmountCaptured))
                    .col(big_integer(Payments::AmountRefunded))
                    .col(integer(Payments::ConfirmAttempts))
                    .col(integer(Payments::MaxAttempts))
                    .col(boolean(Payments::EnablePartialAuthorization))
                    .col(string_null(Payments::CustomerId))
                    .col(string_null(Payments::MandateId))
                    .col(string_null(Payments::SetupFutureUsage))
                    .col(boolean(Payments::OffSession))
                    .col(text_null(Payments::PaymentMethod))
                    .col(string_null(Payments::Processor))
                    .col(string_null(Payments::ProcessorReference))
                    .col(text_null(Payments::LastError))
                    .col(text_null(Payments::Lines))
                    .col(text(Payments::Metadata))
                    .col(text_null(Payments::Description))
                    .col(text_null(Payments::ReturnUrl))
                    .col(boolean(Payments::HostedCheckout))
                    .col(string(Payments::ClientSecret))
                    .col(timestamp_with_time_zone(Payments::ExpiresAt))
                    .col(timestamp_with_time_zone_null(Payments::CaptureBefore))
                    .col(timestamp_with_time_zone_null(Payments::CapturedAt))
                    .col(text_null(Payments::Conflict))
                    .col(big_integer(Payments::Version))
                    .col(timestamp_with_time_zone(Payments::CreatedAt))
                    .col(timestamp_with_time_zone(Payments::UpdatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_payments_merchant")
                    .table(Payments::Table)
                    .col(Payments::MerchantId)
                    .col(Payments::TestMode)
                    .col(Payments::Id)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(PaymentAttempts::Table)
                    .col(string(PaymentAttempts::Id).primary_key())
                    .col(string(PaymentAttempts::PaymentId))
                    .col(integer(PaymentAttempts::Number))
                    .col(string(PaymentAttempts::Processor))
                    .col(string_null(PaymentAttempts::ProcessorReference))
                    .col(string(PaymentAttempts::Status))
                    .col(big_integer(PaymentAttempts::Amount))
                    .col(string_null(PaymentAttempts::ErrorCode))
                    .col(text_null(PaymentAttempts::ErrorMessage))
                    .col(text_null(PaymentAttempts::PaymentMethod))
                    .col(text(PaymentAttempts::Routing))
                    .col(timestamp_with_time_zone(PaymentAttempts::CreatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(PaymentAttempts::Table, PaymentAttempts::PaymentId)
                            .to(Payments::Table, Payments::Id),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_payment_attempts_payment")
                    .table(PaymentAttempts::Table)
                    .col(PaymentAttempts::PaymentId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(PaymentStatusHistory::Table)
                    .col(string(PaymentStatusHistory::Id).primary_key())
                    .col(string(PaymentStatusHistory::PaymentId))
                    .col(string_null(PaymentStatusHistory::FromStatus))
                    .col(string(PaymentStatusHistory::ToStatus))
                    .col(string(PaymentStatusHistory::Trigger))
                    .col(timestamp_with_time_zone(PaymentStatusHistory::CreatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(PaymentStatusHistory::Table, PaymentStatusHistory::PaymentId)
                            .to(Payments::Table, Payments::Id),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_payment_status_history_payment")
                    .table(PaymentStatusHistory::Table)
                    .col(PaymentStatusHistory::PaymentId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(ProcessorAccounts::Table)
                    .col(string(ProcessorAccounts::Id).primary_key())
                    .col(string(ProcessorAccounts::MerchantId))
                    .col(string(ProcessorAccounts::ProfileId))
                    .col(string(ProcessorAccounts::Name))
                    .col(string(ProcessorAccounts::Kind))
                    .col(boolean(ProcessorAccounts::Enabled))
                    .col(timestamp_with_time_zone(ProcessorAccounts::CreatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("uq_processor_accounts_profile_name")
                    .table(ProcessorAccounts::Table)
                    .col(ProcessorAccounts::ProfileId)
                    .col(ProcessorAccounts::Name)
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(RoutingConfigs::Table)
                    .col(string(RoutingConfigs::ProfileId).primary_key())
                    .col(text(RoutingConfigs::Rules))
                    .col(timestamp_with_time_zone(RoutingConfigs::UpdatedAt))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in [
            RoutingConfigs::Table.into_iden(),
            ProcessorAccounts::Table.into_iden(),
            PaymentStatusHistory::Table.into_iden(),
            PaymentAttempts::Table.into_iden(),
            Payments::Table.into_iden(),
        ] {
            manager
                .drop_table(Table::drop().table(table).to_owned())
                .await?;
        }
        Ok(())
    }
}

#[derive(DeriveIden)]
enum Payments {
    Table,
    Id,
    MerchantId,
    ProfileId,
    TestMode,
    Status,
    Amount,
    Currency,
    CaptureMethod,
    AmountAuthorized,
    AmountCaptured,
    AmountRefunded,
    ConfirmAttempts,
    MaxAttempts,
    EnablePartialAuthorization,
    CustomerId,
    MandateId,
    SetupFutureUsage,
    OffSession,
    PaymentMethod,
    Processor,
    ProcessorReference,
    LastError,
    Lines,
    Metadata,
    Description,
    ReturnUrl,
    HostedCheckout,
    ClientSecret,
    ExpiresAt,
    CaptureBefore,
    CapturedAt,
    Conflict,
    Version,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum PaymentAttempts {
    Table,
    Id,
    PaymentId,
    Number,
    Processor,
    ProcessorReference,
    Status,
    Amount,
    ErrorCode,
    ErrorMessage,
    PaymentMethod,
    Routing,
    CreatedAt,
}

#[derive(DeriveIden)]
enum PaymentStatusHistory {
    Table,
    Id,
    PaymentId,
    FromStatus,
    ToStatus,
    Trigger,
    CreatedAt,
}

#[derive(DeriveIden)]
enum ProcessorAccounts {
    Table,
    Id,
    MerchantId,
    ProfileId,
    Name,
    Kind,
    Enabled,
    CreatedAt,
}

#[derive(DeriveIden)]
enum RoutingConfigs {
    Table,
    ProfileId,
    Rules,
    UpdatedAt,
}

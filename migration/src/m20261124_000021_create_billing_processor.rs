//! The sandbox billing processor's own records (its subscriptions and the invoices it
//! collected), a payd subscription's link to the processor's, and the reviewed sets of an
//! import.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(BillingSubscriptions::Table)
                    .col(string(BillingSubscriptions::Id).primary_key())
                    .col(string(BillingSubscriptions::MerchantId))
                    .col(string(BillingSubscriptions::ProfileId))
                    .col(boolean(BillingSubscriptions::TestMode))
                    .col(string(BillingSubscriptions::CustomerName))
                    .col(string_null(BillingSubscriptions::CustomerEmail))
                    .col(string(BillingSubscriptions::PlanId))
                    .col(big_integer(BillingSubscriptions::Quantity))
                    .col(string(BillingSubscriptions::Status))
                    .col(timestamp_with_time_zone(
                        BillingSubscriptions::CurrentPeriodStart,
                    ))
                    .col(timestamp_with_time_zone(
                        BillingSubscriptions::CurrentPeriodEnd,
                    ))
                    .col(boolean(BillingSubscriptions::Declines))
                    .col(timestamp_with_time_zone(BillingSubscriptions::CreatedAt))
                    .col(timestamp_with_time_zone(BillingSubscriptions::UpdatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_billing_subscriptions_shop")
                    .table(BillingSubscriptions::Table)
                    .col(BillingSubscriptions::ProfileId)
                    .col(BillingSubscriptions::Id)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(BillingInvoices::Table)
                    .col(string(BillingInvoices::Id).primary_key())
                    .col(string(BillingInvoices::BillingSubscriptionId))
                    .col(string(BillingInvoices::CollectionKey).unique_key())
                    .col(big_integer(BillingInvoices::Amount))
                    .col(string(BillingInvoices::Currency))
                    .col(string(BillingInvoices::Status))
                    .col(string_null(BillingInvoices::DisputeId))
                    .col(timestamp_with_time_zone(BillingInvoices::CreatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(SubscriptionPreviews::Table)
                    .col(string(SubscriptionPreviews::Id).primary_key())
                    .col(string(SubscriptionPreviews::MerchantId))
                    .col(string(SubscriptionPreviews::ProfileId))
                    .col(boolean(SubscriptionPreviews::TestMode))
                    .col(text(SubscriptionPreviews::ProcessorSubscriptionIds))
                    .col(timestamp_with_time_zone(SubscriptionPreviews::CreatedAt))
                    .to_owned(),
            )
            .await?;
        // SQLite alters one column per statement.
        manager
            .alter_table(
                Table::alter()
                    .table(Subscriptions::Table)
                    .add_column(string_null(Subscriptions::ProcessorSubscriptionId))
                    .to_owned(),
            )
            .await?;
        // One payd subscription per processor subscription: adopting twice is refused here.
        manager
            .create_index(
                Index::create()
                    .name("idx_subscriptions_processor_subscription")
                    .table(Subscriptions::Table)
                    .col(Subscriptions::ProcessorSubscriptionId)
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(SubscriptionCycles::Table)
                    .add_column(string_null(SubscriptionCycles::ProcessorInvoiceId))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(SubscriptionCycles::Table)
                    .drop_column(SubscriptionCycles::ProcessorInvoiceId)
                    .to_owned(),
            )
            .await?;
        manager
            .drop_index(
                Index::drop()
                    .name("idx_subscriptions_processor_subscription")
                    .table(Subscriptions::Table)
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Subscriptions::Table)
                    .drop_column(Subscriptions::ProcessorSubscriptionId)
                    .to_owned(),
            )
            .await?;
        for table in [
            SubscriptionPreviews::Table.into_iden(),
            BillingInvoices::Table.into_iden(),
            BillingSubscriptions::Table.into_iden(),
        ] {
            manager
                .drop_table(Table::drop().table(table).to_owned())
                .await?;
        }
        Ok(())
    }
}

#[derive(DeriveIden)]
enum BillingSubscriptions {
    Table,
    /// `bsub_…`: the processor's id.
    Id,
    MerchantId,
    ProfileId,
    TestMode,
    CustomerName,
    CustomerEmail,
    /// One of the processor's plans (`GET /subscriptions/items`).
    PlanId,
    Quantity,
    /// `active`, `paused` or `cancelled`, at the processor.
    Status,
    CurrentPeriodStart,
    CurrentPeriodEnd,
    /// The card the processor holds declines every collection (a sandbox switch).
    Declines,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum BillingInvoices {
    Table,
    /// `binv_…`
    Id,
    BillingSubscriptionId,
    /// The collector's key (a cycle and its attempt): collecting twice under one key is one
    /// invoice.
    CollectionKey,
    Amount,
    Currency,
    /// `paid` or `failed`.
    Status,
    /// Set when the buyer charged it back.
    DisputeId,
    CreatedAt,
}

#[derive(DeriveIden)]
enum SubscriptionPreviews {
    Table,
    Id,
    MerchantId,
    ProfileId,
    TestMode,
    /// JSON array: the processor subscriptions the preview listed, which its apply adopts.
    ProcessorSubscriptionIds,
    CreatedAt,
}

#[derive(DeriveIden)]
enum Subscriptions {
    Table,
    /// The processor's subscription a billing processor bills (adopted); none when payd bills.
    ProcessorSubscriptionId,
}

#[derive(DeriveIden)]
enum SubscriptionCycles {
    Table,
    /// The processor's invoice that collected the cycle, for a processor-billed subscription.
    ProcessorInvoiceId,
}

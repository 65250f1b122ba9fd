//! Customers, their saved payment methods, and mandates to charge them off-session.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Customers::Table)
                    .col(string(Customers::Id).primary_key())
                    .col(string(Customers::MerchantId))
                    .col(boolean(Customers::TestMode))
                    .col(text_null(Customers::Name))
                    .col(text_null(Customers::Email))
                    .col(text_null(Customers::Phone))
                    .col(text_null(Customers::Description))
                    .col(text_null(Customers::Address))
                    .col(text(Customers::Metadata))
                    .col(string_null(Customers::DefaultPaymentMethodId))
                    .col(timestamp_with_time_zone_null(Customers::RedactedAt))
                    .col(big_integer(Customers::Version))
                    .col(timestamp_with_time_zone(Customers::CreatedAt))
                    .col(timestamp_with_time_zone(Customers::UpdatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_customers_merchant")
                    .table(Customers::Table)
                    .col(Customers::MerchantId)
                    .col(Customers::TestMode)
                    .col(Customers::Id)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(PaymentMethods::Table)
                    .col(string(PaymentMethods::Id).primary_key())
                    .col(string(PaymentMethods::CustomerId))
                    .col(string(PaymentMethods::MerchantId))
                    .col(boolean(PaymentMethods::TestMode))
                    .col(text(PaymentMethods::Card))
                    .col(string(PaymentMethods::Fingerprint))
                    .col(timestamp_with_time_zone(PaymentMethods::CreatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("uq_payment_methods_customer_fingerprint")
                    .table(PaymentMethods::Table)
                    .col(PaymentMethods::CustomerId)
                    .col(PaymentMethods::Fingerprint)
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(Mandates::Table)
                    .col(string(Mandates::Id).primary_key())
                    .col(string(Mandates::CustomerId))
                    .col(string(Mandates::MerchantId))
                    .col(string(Mandates::ProfileId))
                    .col(boolean(Mandates::TestMode))
                    .col(string(Mandates::PaymentMethodId))
                    .col(string(Mandates::MandateType))
                    .col(big_integer_null(Mandates::AmountLimit))
                    .col(string_null(Mandates::Currency))
                    .col(string(Mandates::Status))
                    .col(timestamp_with_time_zone(Mandates::StartAt))
                    .col(timestamp_with_time_zone_null(Mandates::EndAt))
                    .col(big_integer(Mandates::Version))
                    .col(timestamp_with_time_zone(Mandates::CreatedAt))
                    .col(timestamp_with_time_zone(Mandates::UpdatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Payments::Table)
                    .add_column(text_null(Payments::MandateRequest))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_mandates_customer")
                    .table(Mandates::Table)
                    .col(Mandates::CustomerId)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Payments::Table)
                    .drop_column(Payments::MandateRequest)
                    .to_owned(),
            )
            .await?;
        for table in [
            Mandates::Table.into_iden(),
            PaymentMethods::Table.into_iden(),
            Customers::Table.into_iden(),
        ] {
            manager
                .drop_table(Table::drop().table(table).to_owned())
                .await?;
        }
        Ok(())
    }
}

#[derive(DeriveIden)]
enum Customers {
    Table,
    Id,
    MerchantId,
    TestMode,
    Name,
    Email,
    Phone,
    Description,
    Address,
    Metadata,
    DefaultPaymentMethodId,
    RedactedAt,
    Version,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum PaymentMethods {
    Table,
    Id,
    CustomerId,
    MerchantId,
    TestMode,
    Card,
    Fingerprint,
    CreatedAt,
}

#[derive(DeriveIden)]
enum Mandates {
    Table,
    Id,
    CustomerId,
    MerchantId,
    ProfileId,
    TestMode,
    PaymentMethodId,
    MandateType,
    AmountLimit,
    Currency,
    Status,
    StartAt,
    EndAt,
    Version,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum Payments {
    Table,
    /// JSON: the mandate a payment with `setup_future_usage: off_session` should create.
    MandateRequest,
}

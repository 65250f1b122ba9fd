//! Webhook endpoints, events (the outbox), their deliveries and every delivery attempt.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(WebhookEndpoints::Table)
                    .col(string(WebhookEndpoints::Id).primary_key())
                    .col(string(WebhookEndpoints::MerchantId))
                    .col(string_uniq(WebhookEndpoints::ProfileId))
                    .col(text(WebhookEndpoints::Url))
                    .col(string(WebhookEndpoints::Secret))
                    .col(string_null(WebhookEndpoints::PreviousSecret))
                    .col(timestamp_with_time_zone_null(
                        WebhookEndpoints::PreviousSecretExpiresAt,
                    ))
                    .col(boolean(WebhookEndpoints::Enabled))
                    .col(timestamp_with_time_zone(WebhookEndpoints::CreatedAt))
                    .col(timestamp_with_time_zone(WebhookEndpoints::UpdatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(Events::Table)
                    .col(string(Events::Id).primary_key())
                    .col(string(Events::MerchantId))
                    .col(string_null(Events::ProfileId))
                    .col(boolean(Events::TestMode))
                    .col(string(Events::EventType))
                    .col(string(Events::ObjectId))
                    .col(text(Events::Payload))
                    .col(timestamp_with_time_zone(Events::CreatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_events_merchant")
                    .table(Events::Table)
                    .col(Events::MerchantId)
                    .col(Events::TestMode)
                    .col(Events::Id)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_events_object")
                    .table(Events::Table)
                    .col(Events::ObjectId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(Deliveries::Table)
                    .col(string(Deliveries::Id).primary_key())
                    .col(string(Deliveries::EventId))
                    .col(string(Deliveries::MerchantId))
                    .col(string(Deliveries::EndpointId))
                    .col(string(Deliveries::Status))
                    .col(integer(Deliveries::Attempts))
                    .col(integer(Deliveries::TransientFailures))
                    .col(integer(Deliveries::AuthFailures))
                    .col(timestamp_with_time_zone(Deliveries::NextAttemptAt))
                    .col(string_null(Deliveries::LeaseOwner))
                    .col(timestamp_with_time_zone_null(Deliveries::LeaseUntil))
                    .col(integer_null(Deliveries::LastStatusCode))
                    .col(text_null(Deliveries::LastError))
                    .col(timestamp_with_time_zone_null(Deliveries::DeliveredAt))
                    .col(timestamp_with_time_zone(Deliveries::CreatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(Deliveries::Table, Deliveries::EventId)
                            .to(Events::Table, Events::Id),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_deliveries_due")
                    .table(Deliveries::Table)
                    .col(Deliveries::Status)
                    .col(Deliveries::NextAttemptAt)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_deliveries_event")
                    .table(Deliveries::Table)
                    .col(Deliveries::EventId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(DeliveryAttempts::Table)
                    .col(string(DeliveryAttempts::Id).primary_key())
                    .col(string(DeliveryAttempts::DeliveryId))
                    .col(string(DeliveryAttempts::EventId))
                    .col(integer(DeliveryAttempts::Number))
                    .col(string(DeliveryAttempts::Trigger))
                    .col(text(DeliveryAttempts::RequestHeaders))
                    .col(integer_null(DeliveryAttempts::ResponseStatus))
                    .col(text_null(DeliveryAttempts::ResponseBody))
                    .col(string_null(DeliveryAttempts::ErrorKind))
                    .col(big_integer(DeliveryAttempts::DurationMs))
                    .col(timestamp_with_time_zone_null(
                        DeliveryAttempts::NextAttemptAt,
                    ))
                    .col(timestamp_with_time_zone(DeliveryAttempts::CreatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_delivery_attempts_event")
                    .table(DeliveryAttempts::Table)
                    .col(DeliveryAttempts::EventId)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in [
            DeliveryAttempts::Table.into_iden(),
            Deliveries::Table.into_iden(),
            Events::Table.into_iden(),
            WebhookEndpoints::Table.into_iden(),
        ] {
            manager
                .drop_table(Table::drop().table(table).to_owned())
                .await?;
        }
        Ok(())
    }
}

#[derive(DeriveIden)]
enum WebhookEndpoints {
    Table,
    Id,
    MerchantId,
    ProfileId,
    Url,
    Secret,
    PreviousSecret,
    PreviousSecretExpiresAt,
    Enabled,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum Events {
    Table,
    Id,
    MerchantId,
    ProfileId,
    TestMode,
    EventType,
    ObjectId,
    Payload,
    CreatedAt,
}

#[derive(DeriveIden)]
enum Deliveries {
    Table,
    Id,
    EventId,
    MerchantId,
    EndpointId,
    Status,
    Attempts,
    TransientFailures,
    AuthFailures,
    NextAttemptAt,
    LeaseOwner,
    LeaseUntil,
    LastStatusCode,
    LastError,
    DeliveredAt,
    CreatedAt,
}

#[derive(DeriveIden)]
enum DeliveryAttempts {
    Table,
    Id,
    DeliveryId,
    EventId,
    Number,
    Trigger,
    RequestHeaders,
    ResponseStatus,
    ResponseBody,
    ErrorKind,
    DurationMs,
    NextAttemptAt,
    CreatedAt,
}

//! Webhook operations for the long run: each endpoint's health (its failure streak, its last
//! success, why payd disabled it), its delivery rate limit and the turn of its next request,
//! and the mode of the keys that configured it; events whose payload the retention purge
//! replaced (`purged_at`); and the indexes the purge reads by age.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // One column per statement: SQLite alters one at a time.
        let endpoint_columns = [
            integer(WebhookEndpoints::ConsecutiveFailures)
                .default(0)
                .to_owned(),
            timestamp_with_time_zone_null(WebhookEndpoints::FailingSince),
            timestamp_with_time_zone_null(WebhookEndpoints::LastSuccessAt),
            string_null(WebhookEndpoints::DisabledReason),
            integer_null(WebhookEndpoints::MaxPerSecond),
            timestamp_with_time_zone_null(WebhookEndpoints::NextSendAt),
            boolean(WebhookEndpoints::TestMode)
                .default(false)
                .to_owned(),
        ];
        for mut column in endpoint_columns {
            manager
                .alter_table(
                    Table::alter()
                        .table(WebhookEndpoints::Table)
                        .add_column(&mut column)
                        .to_owned(),
                )
                .await?;
        }
        manager
            .alter_table(
                Table::alter()
                    .table(Events::Table)
                    .add_column(timestamp_with_time_zone_null(Events::PurgedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_events_created")
                    .table(Events::Table)
                    .col(Events::CreatedAt)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_delivery_attempts_created")
                    .table(DeliveryAttempts::Table)
                    .col(DeliveryAttempts::CreatedAt)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_index(
                Index::drop()
                    .name("idx_delivery_attempts_created")
                    .table(DeliveryAttempts::Table)
                    .to_owned(),
            )
            .await?;
        manager
            .drop_index(
                Index::drop()
                    .name("idx_events_created")
                    .table(Events::Table)
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Events::Table)
                    .drop_column(Events::PurgedAt)
                    .to_owned(),
            )
            .await?;
        for column in [
            WebhookEndpoints::ConsecutiveFailures,
            WebhookEndpoints::FailingSince,
            WebhookEndpoints::LastSuccessAt,
            WebhookEndpoints::DisabledReason,
            WebhookEndpoints::MaxPerSecond,
            WebhookEndpoints::NextSendAt,
            WebhookEndpoints::TestMode,
        ] {
            manager
                .alter_table(
                    Table::alter()
                        .table(WebhookEndpoints::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}

#[derive(DeriveIden)]
enum WebhookEndpoints {
    Table,
    /// Attempts failed since the last success.
    ConsecutiveFailures,
    /// The first failure after the last success; null while healthy.
    FailingSince,
    LastSuccessAt,
    /// `failing` when payd disabled it, `merchant` when its shop's keys did; null when enabled.
    DisabledReason,
    /// The most requests a second payd sends it; null: no limit.
    MaxPerSecond,
    /// The first moment (wall time) the next request to it may start: every instance takes
    /// its turn from here, so the rate holds across instances.
    NextSendAt,
    /// The mode of the keys that last configured it (its own events carry it).
    TestMode,
}

#[derive(DeriveIden)]
enum Events {
    Table,
    /// When the retention purge replaced the payload with a tombstone.
    PurgedAt,
    CreatedAt,
}

#[derive(DeriveIden)]
enum DeliveryAttempts {
    Table,
    CreatedAt,
}

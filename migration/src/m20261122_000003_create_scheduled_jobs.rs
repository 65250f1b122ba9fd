//! Persisted due work (expiries, deadlines, renewals, retries) claimed with a lease.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(ScheduledJobs::Table)
                    .col(string(ScheduledJobs::Id).primary_key())
                    .col(string(ScheduledJobs::Kind))
                    .col(string(ScheduledJobs::EntityId))
                    .col(timestamp_with_time_zone(ScheduledJobs::DueAt))
                    .col(text(ScheduledJobs::Payload))
                    .col(integer(ScheduledJobs::Attempts))
                    .col(text_null(ScheduledJobs::LastError))
                    .col(string_null(ScheduledJobs::LeaseOwner))
                    .col(timestamp_with_time_zone_null(ScheduledJobs::LeaseUntil))
                    .col(timestamp_with_time_zone(ScheduledJobs::CreatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("uq_scheduled_jobs_kind_entity")
                    .table(ScheduledJobs::Table)
                    .col(ScheduledJobs::Kind)
                    .col(ScheduledJobs::EntityId)
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_scheduled_jobs_due")
                    .table(ScheduledJobs::Table)
                    .col(ScheduledJobs::DueAt)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(ScheduledJobs::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
enum ScheduledJobs {
    Table,
    Id,
    Kind,
    EntityId,
    DueAt,
    Payload,
    Attempts,
    LastError,
    LeaseOwner,
    LeaseUntil,
    CreatedAt,
}

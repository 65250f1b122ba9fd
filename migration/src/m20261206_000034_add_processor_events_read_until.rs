//! How far a Stripe account's events have been read from Stripe's `GET /v1/events` (Unix
//! seconds): the catch-up of events whose delivery was missed starts there.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(ProcessorAccounts::Table)
                    .add_column(big_integer_null(ProcessorAccounts::EventsReadUntil))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(ProcessorAccounts::Table)
                    .drop_column(ProcessorAccounts::EventsReadUntil)
                    .to_owned(),
            )
            .await
    }
}

#[derive(DeriveIden)]
enum ProcessorAccounts {
    Table,
    EventsReadUntil,
}

//! Processor accounts of kind `remote` keep how to reach their processor (URL, secret, timeout).

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
                    .add_column(text_null(ProcessorAccounts::Config))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(ProcessorAccounts::Table)
                    .drop_column(ProcessorAccounts::Config)
                    .to_owned(),
            )
            .await
    }
}

#[derive(DeriveIden)]
enum ProcessorAccounts {
    Table,
    /// JSON: `{url, secret, timeout_ms}` for remote processors.
    Config,
}

//! A remote processor account receives card data, so an operator may require approving each
//! one before it is used (`processors.require_operator_approval`).

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
                    .add_column(string(ProcessorAccounts::Approval).default("approved"))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(ProcessorAccounts::Table)
                    .drop_column(ProcessorAccounts::Approval)
                    .to_owned(),
            )
            .await
    }
}

#[derive(DeriveIden)]
enum ProcessorAccounts {
    Table,
    /// `approved`, or `pending` until an operator approves the account.
    Approval,
}

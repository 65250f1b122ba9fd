//! A payment records the processor operation it is about to send (its intent) before sending
//! it, so that an answer lost to a crash, a timeout or a failed commit is reconciled, never
//! forgotten.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Payments::Table)
                    .add_column(text_null(Payments::PendingOperation))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Payments::Table)
                    .drop_column(Payments::PendingOperation)
                    .to_owned(),
            )
            .await
    }
}

#[derive(DeriveIden)]
enum Payments {
    Table,
    /// JSON: the authorization, capture or void sent to the processor whose outcome payd has
    /// not recorded yet; none otherwise.
    PendingOperation,
}

//! An `Idempotency-Key` remembers the object its request made or moved, written in the same
//! transaction as that change: a retry after an answer that was never stored resumes from the
//! object instead of running the request a second time.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(IdempotencyKeys::Table)
                    .add_column(string_null(IdempotencyKeys::RecoveryPoint))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(IdempotencyKeys::Table)
                    .drop_column(IdempotencyKeys::RecoveryPoint)
                    .to_owned(),
            )
            .await
    }
}

#[derive(DeriveIden)]
enum IdempotencyKeys {
    Table,
    /// The id of the object the key's request committed a change to; none before its first
    /// commit.
    RecoveryPoint,
}

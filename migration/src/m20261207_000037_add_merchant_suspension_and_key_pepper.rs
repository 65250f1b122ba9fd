//! A merchant the operator suspended (`merchants.suspended_at`: its keys are refused until it
//! is reinstated), and the pepper each API key was hashed under (`api_keys.pepper_id`, the
//! first 8 hex digits of the pepper's SHA-256), so that an operator rotating the pepper sees
//! how many keys still need the old one. Both nullable: the release before runs beside it.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Merchants::Table)
                    .add_column(timestamp_with_time_zone_null(Merchants::SuspendedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(ApiKeys::Table)
                    .add_column(string_null(ApiKeys::PepperId))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(ApiKeys::Table)
                    .drop_column(ApiKeys::PepperId)
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Merchants::Table)
                    .drop_column(Merchants::SuspendedAt)
                    .to_owned(),
            )
            .await
    }
}

#[derive(DeriveIden)]
enum Merchants {
    Table,
    SuspendedAt,
}

#[derive(DeriveIden)]
enum ApiKeys {
    Table,
    PepperId,
}

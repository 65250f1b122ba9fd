//! One row that readiness rewrites on SQLite: a file that can no longer be written (a full or
//! read-only disk) still answers reads, and only a write tells the truth.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(ReadinessProbe::Table)
                    .col(integer(ReadinessProbe::Id).primary_key())
                    .col(big_integer(ReadinessProbe::Checks))
                    .to_owned(),
            )
            .await?;
        manager
            .exec_stmt(
                Query::insert()
                    .into_table(ReadinessProbe::Table)
                    .columns([ReadinessProbe::Id, ReadinessProbe::Checks])
                    .values_panic([1.into(), 0.into()])
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(ReadinessProbe::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
enum ReadinessProbe {
    Table,
    Id,
    /// How many readiness checks wrote it.
    Checks,
}

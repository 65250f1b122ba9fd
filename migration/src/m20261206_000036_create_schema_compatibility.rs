//! What a payd release that does not know a migration does on a database it was applied to
//! (`runs` or `refuses`, and why): written for each migration the policy covers when it is
//! applied, read by an older release at start-up (docs/upgrading.md).

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(SchemaCompatibility::Table)
                    .col(string(SchemaCompatibility::Migration).primary_key())
                    .col(string(SchemaCompatibility::OlderReleases))
                    .col(string(SchemaCompatibility::Reason))
                    .col(string(SchemaCompatibility::RecordedBy))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(SchemaCompatibility::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
enum SchemaCompatibility {
    Table,
    Migration,
    OlderReleases,
    Reason,
    RecordedBy,
}

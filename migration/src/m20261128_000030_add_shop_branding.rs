//! A shop's branding on the hosted pages: the name buyers see, a logo (one of the merchant's
//! uploaded images) and an accent colour.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

const COLUMNS: [Profiles; 3] = [
    Profiles::DisplayName,
    Profiles::LogoFileId,
    Profiles::AccentColor,
];

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // SQLite adds one column per statement.
        for column in COLUMNS {
            manager
                .alter_table(
                    Table::alter()
                        .table(Profiles::Table)
                        .add_column(string_null(column))
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in COLUMNS {
            manager
                .alter_table(
                    Table::alter()
                        .table(Profiles::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}

#[derive(DeriveIden, Clone, Copy)]
enum Profiles {
    Table,
    DisplayName,
    LogoFileId,
    AccentColor,
}

//! A payment's `locale`: the language of its hosted pages, over the buyer's
//! `Accept-Language`.

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
                    .add_column(string_null(Payments::Locale))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Payments::Table)
                    .drop_column(Payments::Locale)
                    .to_owned(),
            )
            .await
    }
}

#[derive(DeriveIden)]
enum Payments {
    Table,
    Locale,
}

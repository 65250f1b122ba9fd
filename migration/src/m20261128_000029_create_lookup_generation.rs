//! One row counting the changes to what every request reads and instances cache (API keys,
//! a merchant's test clock, shops' processor accounts and routing rules): each such change
//! adds one in its own transaction, and an instance that sees the count move drops its caches.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(LookupGeneration::Table)
                    .col(integer(LookupGeneration::Id).primary_key())
                    .col(big_integer(LookupGeneration::Generation))
                    .to_owned(),
            )
            .await?;
        manager
            .exec_stmt(
                Query::insert()
                    .into_table(LookupGeneration::Table)
                    .columns([LookupGeneration::Id, LookupGeneration::Generation])
                    .values_panic([1.into(), 0.into()])
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(LookupGeneration::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
enum LookupGeneration {
    Table,
    Id,
    Generation,
}

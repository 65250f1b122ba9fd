//! The dispatcher finds the merchants with a delivery due, and each one's oldest, by this index
//! when another merchant's queue is full: walking the due order past a full queue's backlog
//! instead cost a read of every row of that backlog on every claim.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

const NAME: &str = "idx_deliveries_merchant_due";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_index(
                Index::create()
                    .name(NAME)
                    .table(Deliveries::Table)
                    .col(Deliveries::Status)
                    .col(Deliveries::MerchantId)
                    .col(Deliveries::NextAttemptAt)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_index(Index::drop().name(NAME).table(Deliveries::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden, Clone, Copy)]
enum Deliveries {
    Table,
    Status,
    MerchantId,
    NextAttemptAt,
}

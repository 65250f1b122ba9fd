//! A processor's events name its own payment (Stripe's PaymentIntent id, in refund, charge and
//! dispute events): a payment is found by its processor reference within its shop.

use sea_orm_migration::prelude::*;

#[derive(DeriveMigrationName)]
pub struct Migration;

const NAME: &str = "idx_payments_processor_reference";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_index(
                Index::create()
                    .name(NAME)
                    .table(Payments::Table)
                    .col(Payments::ProcessorReference)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_index(Index::drop().name(NAME).table(Payments::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden, Clone, Copy)]
enum Payments {
    Table,
    ProcessorReference,
}

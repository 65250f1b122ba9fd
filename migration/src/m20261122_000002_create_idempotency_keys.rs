//! Stored answers to POST requests sent with an `Idempotency-Key`.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(IdempotencyKeys::Table)
                    .col(string(IdempotencyKeys::MerchantId))
                    .col(string(IdempotencyKeys::Mode))
                    .col(string(IdempotencyKeys::Key))
                    .col(string(IdempotencyKeys::Fingerprint))
                    .col(string(IdempotencyKeys::State))
                    .col(integer_null(IdempotencyKeys::ResponseStatus))
                    .col(text_null(IdempotencyKeys::ResponseHeaders))
                    .col(text_null(IdempotencyKeys::ResponseBody))
                    .col(timestamp_with_time_zone(IdempotencyKeys::CreatedAt))
                    .col(timestamp_with_time_zone(IdempotencyKeys::LockedUntil))
                    .primary_key(
                        Index::create()
                            .col(IdempotencyKeys::MerchantId)
                            .col(IdempotencyKeys::Mode)
                            .col(IdempotencyKeys::Key),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_idempotency_keys_created")
                    .table(IdempotencyKeys::Table)
                    .col(IdempotencyKeys::CreatedAt)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(IdempotencyKeys::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
enum IdempotencyKeys {
    Table,
    MerchantId,
    Mode,
    Key,
    Fingerprint,
    State,
    ResponseStatus,
    ResponseHeaders,
    ResponseBody,
    CreatedAt,
    LockedUntil,
}

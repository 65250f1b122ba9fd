//! Idempotency keys are scoped by the calling key's kind and bound shop, and an answer that
//! carries a one-time secret remembers the API key it belongs to.
//!
//! The scope joins the primary key, which neither SQLite nor PostgreSQL lets a table change
//! in place: the table is rebuilt and its rows (answers of at most a day) are kept, scoped
//! to unbound secret keys, which made nearly all of them.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

const OLD: &str = "idempotency_keys_unscoped";

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .rename_table(
                Table::rename()
                    .table(IdempotencyKeys::Table, Alias::new(OLD))
                    .to_owned(),
            )
            .await?;
        // The old index keeps its name through the rename; it goes with the old table.
        manager
            .drop_index(
                Index::drop()
                    .name("idx_idempotency_keys_created")
                    .table(Alias::new(OLD))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(IdempotencyKeys::Table)
                    .col(string(IdempotencyKeys::MerchantId))
                    .col(string(IdempotencyKeys::Mode))
                    .col(string(IdempotencyKeys::Scope))
                    .col(string(IdempotencyKeys::Key))
                    .col(string(IdempotencyKeys::Fingerprint))
                    .col(string(IdempotencyKeys::State))
                    .col(integer_null(IdempotencyKeys::ResponseStatus))
                    .col(text_null(IdempotencyKeys::ResponseHeaders))
                    .col(text_null(IdempotencyKeys::ResponseBody))
                    .col(string_null(IdempotencyKeys::OwnerKeyId))
                    .col(timestamp_with_time_zone(IdempotencyKeys::CreatedAt))
                    .col(timestamp_with_time_zone(IdempotencyKeys::LockedUntil))
                    .primary_key(
                        Index::create()
                            .col(IdempotencyKeys::MerchantId)
                            .col(IdempotencyKeys::Mode)
                            .col(IdempotencyKeys::Scope)
                            .col(IdempotencyKeys::Key),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .get_connection()
            .execute_unprepared(&format!(
                "INSERT INTO idempotency_keys (merchant_id, mode, scope, \"key\", fingerprint, state, \
                 response_status, response_headers, response_body, owner_key_id, created_at, \
                 locked_until) SELECT merchant_id, mode, 'secret:*', \"key\", fingerprint, \
                 state, response_status, response_headers, response_body, NULL, created_at, \
                 locked_until FROM {OLD}"
            ))
            .await?;
        manager
            .drop_table(Table::drop().table(Alias::new(OLD)).to_owned())
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
        // Answers are a day's convenience, not records: going back drops them.
        manager
            .drop_table(Table::drop().table(IdempotencyKeys::Table).to_owned())
            .await?;
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
}

#[derive(DeriveIden)]
enum IdempotencyKeys {
    Table,
    MerchantId,
    Mode,
    /// `{key kind}:{bound shop or *}`: keys of other kinds or shops never see each other's answers.
    Scope,
    Key,
    Fingerprint,
    State,
    ResponseStatus,
    ResponseHeaders,
    ResponseBody,
    /// Set when the answer carries a one-time secret: only this API key gets it replayed.
    OwnerKeyId,
    CreatedAt,
    LockedUntil,
}

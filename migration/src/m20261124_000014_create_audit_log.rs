//! The account's security actions (keys created and revoked, webhook URLs changed, secrets
//! rotated, processor accounts added), listed by `GET /account/audit-log`.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(AuditLog::Table)
                    .col(string(AuditLog::Id).primary_key())
                    .col(string(AuditLog::MerchantId))
                    .col(string_null(AuditLog::ActorKeyId))
                    .col(string(AuditLog::Action))
                    .col(string(AuditLog::TargetId))
                    .col(text(AuditLog::Details))
                    .col(timestamp_with_time_zone(AuditLog::CreatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_audit_log_merchant")
                    .table(AuditLog::Table)
                    .col(AuditLog::MerchantId)
                    .col(AuditLog::Id)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(AuditLog::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
enum AuditLog {
    Table,
    Id,
    MerchantId,
    ActorKeyId,
    Action,
    TargetId,
    Details,
    CreatedAt,
}

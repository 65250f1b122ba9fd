//! Disputes, the files merchants upload as evidence, and which files are attached to which
//! dispute.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Disputes::Table)
                    .col(string(Disputes::Id).primary_key())
                    .col(string(Disputes::PaymentId))
                    .col(string(Disputes::MerchantId))
                    .col(string(Disputes::ProfileId))
                    .col(boolean(Disputes::TestMode))
                    .col(string(Disputes::Stage))
                    .col(string(Disputes::Status))
                    .col(big_integer(Disputes::Amount))
                    .col(string(Disputes::Currency))
                    .col(string(Disputes::Reason))
                    .col(string_null(Disputes::Processor))
                    .col(string_null(Disputes::ProcessorReference))
                    .col(timestamp_with_time_zone(Disputes::EvidenceDueBy))
                    .col(timestamp_with_time_zone_null(Disputes::EvidenceSubmittedAt))
                    .col(text_null(Disputes::Explanation))
                    .col(big_integer(Disputes::Version))
                    .col(timestamp_with_time_zone(Disputes::CreatedAt))
                    .col(timestamp_with_time_zone(Disputes::UpdatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(Disputes::Table, Disputes::PaymentId)
                            .to(Payments::Table, Payments::Id),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_disputes_payment")
                    .table(Disputes::Table)
                    .col(Disputes::PaymentId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_disputes_merchant")
                    .table(Disputes::Table)
                    .col(Disputes::MerchantId)
                    .col(Disputes::TestMode)
                    .col(Disputes::Id)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(Files::Table)
                    .col(string(Files::Id).primary_key())
                    .col(string(Files::MerchantId))
                    .col(boolean(Files::TestMode))
                    .col(string(Files::Purpose))
                    .col(string(Files::Filename))
                    .col(string(Files::ContentType))
                    .col(big_integer(Files::Size))
                    .col(string(Files::Sha256))
                    .col(blob(Files::Bytes))
                    .col(timestamp_with_time_zone(Files::CreatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(DisputeEvidence::Table)
                    .col(string(DisputeEvidence::DisputeId))
                    .col(string(DisputeEvidence::FileId))
                    .col(string(DisputeEvidence::EvidenceType))
                    .col(timestamp_with_time_zone(DisputeEvidence::CreatedAt))
                    .primary_key(
                        Index::create()
                            .col(DisputeEvidence::DisputeId)
                            .col(DisputeEvidence::FileId),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .from(DisputeEvidence::Table, DisputeEvidence::DisputeId)
                            .to(Disputes::Table, Disputes::Id),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .from(DisputeEvidence::Table, DisputeEvidence::FileId)
                            .to(Files::Table, Files::Id),
                    )
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in [
            DisputeEvidence::Table.into_iden(),
            Files::Table.into_iden(),
            Disputes::Table.into_iden(),
        ] {
            manager
                .drop_table(Table::drop().table(table).to_owned())
                .await?;
        }
        Ok(())
    }
}

#[derive(DeriveIden)]
enum Disputes {
    Table,
    Id,
    PaymentId,
    MerchantId,
    ProfileId,
    TestMode,
    Stage,
    Status,
    Amount,
    Currency,
    Reason,
    Processor,
    ProcessorReference,
    EvidenceDueBy,
    EvidenceSubmittedAt,
    Explanation,
    Version,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum Files {
    Table,
    Id,
    MerchantId,
    TestMode,
    Purpose,
    Filename,
    ContentType,
    Size,
    Sha256,
    Bytes,
    CreatedAt,
}

#[derive(DeriveIden)]
enum DisputeEvidence {
    Table,
    DisputeId,
    FileId,
    EvidenceType,
    CreatedAt,
}

#[derive(DeriveIden)]
enum Payments {
    Table,
    Id,
}

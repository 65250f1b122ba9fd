//! The sandbox wallet processor's seller cases and their append-only history, and the link from
//! a dispute to the case it follows.
//!
//! `wallet_cases` and `wallet_case_entries` are the processor's side: in production they live
//! at the wallet processor; the sandbox keeps them here so they survive restarts and are the
//! same for every instance. A dispute that follows a case names it (`case_id`, unique) and
//! remembers the case's version it last followed, so importing the same case twice changes
//! nothing.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(WalletCases::Table)
                    .col(string(WalletCases::Id).primary_key())
                    .col(string(WalletCases::MerchantId))
                    .col(string(WalletCases::ProfileId))
                    .col(boolean(WalletCases::TestMode))
                    .col(string(WalletCases::PaymentId))
                    .col(string(WalletCases::CaseType))
                    .col(string(WalletCases::Status))
                    .col(string_null(WalletCases::Outcome))
                    .col(text(WalletCases::Reason))
                    .col(big_integer(WalletCases::Amount))
                    .col(string(WalletCases::Currency))
                    .col(big_integer_null(WalletCases::OfferAmount))
                    .col(boolean(WalletCases::ReturnShipped))
                    .col(text_null(WalletCases::Note))
                    .col(timestamp_with_time_zone_null(WalletCases::DueAt))
                    .col(big_integer(WalletCases::Entries))
                    .col(big_integer(WalletCases::Version))
                    .col(timestamp_with_time_zone(WalletCases::CreatedAt))
                    .col(timestamp_with_time_zone(WalletCases::UpdatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(WalletCases::Table, WalletCases::PaymentId)
                            .to(Payments::Table, Payments::Id),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_wallet_cases_merchant")
                    .table(WalletCases::Table)
                    .col(WalletCases::MerchantId)
                    .col(WalletCases::TestMode)
                    .col(WalletCases::Id)
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_wallet_cases_payment")
                    .table(WalletCases::Table)
                    .col(WalletCases::PaymentId)
                    .unique()
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(WalletCaseEntries::Table)
                    .col(string(WalletCaseEntries::CaseId))
                    .col(big_integer(WalletCaseEntries::Seq))
                    .col(string(WalletCaseEntries::Actor))
                    .col(string(WalletCaseEntries::Kind))
                    .col(string(WalletCaseEntries::CaseType))
                    .col(string_null(WalletCaseEntries::StatusFrom))
                    .col(string_null(WalletCaseEntries::StatusTo))
                    .col(text_null(WalletCaseEntries::Message))
                    .col(big_integer_null(WalletCaseEntries::Amount))
                    .col(text_null(WalletCaseEntries::FileIds))
                    .col(timestamp_with_time_zone(WalletCaseEntries::CreatedAt))
                    .primary_key(
                        Index::create()
                            .col(WalletCaseEntries::CaseId)
                            .col(WalletCaseEntries::Seq),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .from(WalletCaseEntries::Table, WalletCaseEntries::CaseId)
                            .to(WalletCases::Table, WalletCases::Id),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Disputes::Table)
                    .add_column(string_null(Disputes::CaseId))
                    .to_owned(),
            )
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(Disputes::Table)
                    .add_column(big_integer_null(Disputes::CaseVersion))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_disputes_case")
                    .table(Disputes::Table)
                    .col(Disputes::CaseId)
                    .unique()
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_index(
                Index::drop()
                    .name("idx_disputes_case")
                    .table(Disputes::Table)
                    .to_owned(),
            )
            .await?;
        for column in [Disputes::CaseVersion, Disputes::CaseId] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Disputes::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        for table in [
            WalletCaseEntries::Table.into_iden(),
            WalletCases::Table.into_iden(),
        ] {
            manager
                .drop_table(Table::drop().table(table).to_owned())
                .await?;
        }
        Ok(())
    }
}

#[derive(DeriveIden)]
enum WalletCases {
    Table,
    Id,
    MerchantId,
    ProfileId,
    TestMode,
    PaymentId,
    /// `INQUIRY`, `CHARGEBACK`, `PRE_ARBITRATION` or `ARBITRATION`.
    CaseType,
    Status,
    /// How a `RESOLVED` case ended.
    Outcome,
    Reason,
    Amount,
    Currency,
    /// The seller's open offer, while the buyer considers it.
    OfferAmount,
    /// The buyer shipped the item back; the seller may acknowledge the return.
    ReturnShipped,
    /// The seller's last message or evidence note: its words decide what the sandbox does.
    Note,
    /// When the processor acts on the case next (a reply, a review, a deadline).
    DueAt,
    /// How many history entries the case has.
    Entries,
    Version,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum WalletCaseEntries {
    Table,
    CaseId,
    Seq,
    /// `buyer`, `seller` or `processor`.
    Actor,
    Kind,
    CaseType,
    StatusFrom,
    StatusTo,
    Message,
    Amount,
    /// A JSON array of file ids.
    FileIds,
    CreatedAt,
}

#[derive(DeriveIden)]
enum Disputes {
    Table,
    CaseId,
    CaseVersion,
}

#[derive(DeriveIden)]
enum Payments {
    Table,
    Id,
}

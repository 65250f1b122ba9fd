//! The shops' ledger (`balance_transactions`, immutable entries whose sums are the balances),
//! the per-shop rows that serialize payouts' reservations, and payouts. Existing payments and
//! disputes get their entries: one per payment for what it kept (captured less refunded, none
//! after a cancel post capture) and one per dispute the buyer kept.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // Keyed by shop, mode, currency and time-ordered id: an entry is appended to its
        // shop's range of one index (on SQLite the table itself, `WITHOUT ROWID`), which is
        // also what a balance sums. A separate id key and shop index cost a payment's commit
        // about 10 % on SQLite (docs/performance.md).
        let ledger = Table::create()
            .table(BalanceTransactions::Table)
            .col(string(BalanceTransactions::ProfileId))
            .col(boolean(BalanceTransactions::TestMode))
            .col(string(BalanceTransactions::Currency))
            .col(string(BalanceTransactions::Id))
            .col(string(BalanceTransactions::MerchantId))
            // `available` or `pending`.
            .col(string(BalanceTransactions::Bucket))
            .col(big_integer(BalanceTransactions::Amount))
            .col(string(BalanceTransactions::Kind))
            .col(string(BalanceTransactions::SourceId))
            .col(timestamp_with_time_zone(BalanceTransactions::CreatedAt))
            .primary_key(
                Index::create()
                    .col(BalanceTransactions::ProfileId)
                    .col(BalanceTransactions::TestMode)
                    .col(BalanceTransactions::Currency)
                    .col(BalanceTransactions::Id),
            )
            .to_owned();
        match manager.get_database_backend() {
            sea_orm::DatabaseBackend::Sqlite => {
                let sql = format!("{} WITHOUT ROWID", ledger.to_string(SqliteQueryBuilder));
                manager.get_connection().execute_unprepared(&sql).await?;
            }
            _ => manager.create_table(ledger).await?,
        }
        manager
            .create_table(
                Table::create()
                    .table(BalanceLocks::Table)
                    .col(string(BalanceLocks::ProfileId))
                    .col(boolean(BalanceLocks::TestMode))
                    .col(string(BalanceLocks::Currency))
                    .col(big_integer(BalanceLocks::Reservations))
                    .primary_key(
                        Index::create()
                            .col(BalanceLocks::ProfileId)
                            .col(BalanceLocks::TestMode)
                            .col(BalanceLocks::Currency),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(Payouts::Table)
                    .col(string(Payouts::Id).primary_key())
                    .col(string(Payouts::MerchantId))
                    .col(string(Payouts::ProfileId))
                    .col(boolean(Payouts::TestMode))
                    .col(string(Payouts::Status))
                    .col(big_integer(Payouts::Amount))
                    .col(string(Payouts::Currency))
                    .col(text(Payouts::Destination))
                    .col(string(Payouts::Recipient))
                    .col(text_null(Payouts::Description))
                    .col(text(Payouts::Metadata))
                    .col(boolean(Payouts::AutoFulfill))
                    .col(boolean(Payouts::Reserved))
                    .col(string_null(Payouts::FailureCode))
                    .col(text_null(Payouts::FailureMessage))
                    .col(string_null(Payouts::ProcessorReference))
                    .col(timestamp_with_time_zone_null(Payouts::SubmittedAt))
                    .col(timestamp_with_time_zone(Payouts::CreatedAt))
                    .col(timestamp_with_time_zone(Payouts::UpdatedAt))
                    .col(big_integer(Payouts::Version))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_payouts_merchant")
                    .table(Payouts::Table)
                    .col(Payouts::MerchantId)
                    .col(Payouts::TestMode)
                    .col(Payouts::Id)
                    .to_owned(),
            )
            .await?;
        // Entries for what exists: ids `bt_` + the source's own UUID (unique, time-sortable).
        let db = manager.get_connection();
        db.execute_unprepared(
            "INSERT INTO balance_transactions \
               (id, merchant_id, profile_id, test_mode, currency, bucket, amount, kind, source_id, created_at) \
             SELECT 'bt_' || substr(id, 5), merchant_id, profile_id, test_mode, currency, 'available', \
                    amount_captured - amount_refunded, 'capture', id, updated_at \
             FROM payments \
             WHERE amount_captured > amount_refunded AND status <> 'cancelled_post_capture'",
        )
        .await?;
        db.execute_unprepared(
            "INSERT INTO balance_transactions \
               (id, merchant_id, profile_id, test_mode, currency, bucket, amount, kind, source_id, created_at) \
             SELECT 'bt_' || substr(id, 4), merchant_id, profile_id, test_mode, currency, 'available', \
                    0 - amount, 'dispute', id, updated_at \
             FROM disputes WHERE status IN ('lost', 'accepted', 'expired')",
        )
        .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(Payouts::Table).to_owned())
            .await?;
        manager
            .drop_table(Table::drop().table(BalanceLocks::Table).to_owned())
            .await?;
        manager
            .drop_table(Table::drop().table(BalanceTransactions::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
enum BalanceTransactions {
    Table,
    Id,
    MerchantId,
    ProfileId,
    TestMode,
    Currency,
    Bucket,
    Amount,
    Kind,
    SourceId,
    CreatedAt,
}

#[derive(DeriveIden)]
enum BalanceLocks {
    Table,
    ProfileId,
    TestMode,
    Currency,
    Reservations,
}

#[derive(DeriveIden)]
enum Payouts {
    Table,
    Id,
    MerchantId,
    ProfileId,
    TestMode,
    Status,
    Amount,
    Currency,
    Destination,
    Recipient,
    Description,
    Metadata,
    AutoFulfill,
    Reserved,
    FailureCode,
    FailureMessage,
    ProcessorReference,
    SubmittedAt,
    CreatedAt,
    UpdatedAt,
    Version,
}

//! A shop's available balance kept as a running total on its lock row (`balance_locks.
//! available`) plus the entries not yet folded into it (`balance_deltas`, one row per
//! available-bucket ledger entry, deleted as a reservation folds it). A payout's reservation
//! then reads a handful of rows instead of summing the shop's whole history under its lock.
//!
//! The entries already written become one delta per shop, mode and currency: the first
//! reservation after the upgrade folds it. Every instance must run a release that writes the
//! deltas: one of the previous release beside this one would write entries without them (see
//! the CHANGELOG).

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(BalanceLocks::Table)
                    .add_column(big_integer(BalanceLocks::Available).default(0))
                    .to_owned(),
            )
            .await?;
        // Keyed by account first: a reservation reads and deletes one account's deltas, a
        // range of this one index (no second index to keep per row).
        manager
            .create_table(
                Table::create()
                    .table(BalanceDeltas::Table)
                    .col(string(BalanceDeltas::ProfileId))
                    .col(boolean(BalanceDeltas::TestMode))
                    .col(string(BalanceDeltas::Currency))
                    .col(string(BalanceDeltas::Id))
                    .col(big_integer(BalanceDeltas::Amount))
                    .primary_key(
                        Index::create()
                            .col(BalanceDeltas::ProfileId)
                            .col(BalanceDeltas::TestMode)
                            .col(BalanceDeltas::Currency)
                            .col(BalanceDeltas::Id),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .get_connection()
            .execute_unprepared(
                "INSERT INTO balance_deltas (id, profile_id, test_mode, currency, amount) \
                 SELECT 'bd_' || profile_id || '_' || currency || '_' || \
                        CASE WHEN test_mode THEN 'test' ELSE 'live' END, \
                        profile_id, test_mode, currency, SUM(amount) \
                 FROM balance_transactions WHERE bucket = 'available' \
                 GROUP BY profile_id, test_mode, currency",
            )
            .await?;
        Ok(())
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(BalanceDeltas::Table).to_owned())
            .await?;
        manager
            .alter_table(
                Table::alter()
                    .table(BalanceLocks::Table)
                    .drop_column(BalanceLocks::Available)
                    .to_owned(),
            )
            .await
    }
}

#[derive(DeriveIden)]
enum BalanceLocks {
    Table,
    Available,
}

#[derive(DeriveIden)]
enum BalanceDeltas {
    Table,
    Id,
    ProfileId,
    TestMode,
    Currency,
    Amount,
}

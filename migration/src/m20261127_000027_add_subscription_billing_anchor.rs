//! Billing over time: a subscription's periods are counted from an anchor that a resume moves
//! (`anchor_index`: the period number at the anchor), and what its current period was paid at
//! (`paid_rate`: a whole period's price), which bounds the credit of a plan change.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        // SQLite adds one column per statement.
        for column in [Subscriptions::AnchorIndex, Subscriptions::PaidRate] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Subscriptions::Table)
                        .add_column(big_integer(column).default(0))
                        .to_owned(),
                )
                .await?;
        }
        // Until now every period was paid at the plan's price.
        manager
            .exec_stmt(
                Query::update()
                    .table(Subscriptions::Table)
                    .value(Subscriptions::PaidRate, Expr::col(Subscriptions::Amount))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for column in [Subscriptions::AnchorIndex, Subscriptions::PaidRate] {
            manager
                .alter_table(
                    Table::alter()
                        .table(Subscriptions::Table)
                        .drop_column(column)
                        .to_owned(),
                )
                .await?;
        }
        Ok(())
    }
}

#[derive(DeriveIden, Clone, Copy)]
enum Subscriptions {
    Table,
    Amount,
    /// The period number at `anchor_at` (0 at creation: the first period ends one interval
    /// after it).
    AnchorIndex,
    /// What a whole period is paid at for the current period.
    PaidRate,
}

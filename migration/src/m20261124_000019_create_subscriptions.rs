//! Subscriptions and their billing cycles. A cycle is the record of one period's charge: its
//! amount and lines, the attempts made to collect it, and the payment of the last attempt.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Subscriptions::Table)
                    .col(string(Subscriptions::Id).primary_key())
                    .col(string(Subscriptions::MerchantId))
                    .col(string(Subscriptions::ProfileId))
                    .col(boolean(Subscriptions::TestMode))
                    .col(string(Subscriptions::CustomerId))
                    .col(string_null(Subscriptions::PaymentMethodId))
                    .col(string_null(Subscriptions::MandateId))
                    .col(text_null(Subscriptions::CheckoutUrl))
                    .col(text(Subscriptions::Items))
                    .col(big_integer(Subscriptions::Amount))
                    .col(big_integer(Subscriptions::PendingAdjustment))
                    .col(string(Subscriptions::Currency))
                    .col(string(Subscriptions::Interval))
                    .col(big_integer(Subscriptions::IntervalCount))
                    .col(string(Subscriptions::Status))
                    .col(timestamp_with_time_zone(Subscriptions::AnchorAt))
                    .col(big_integer(Subscriptions::PeriodIndex))
                    .col(timestamp_with_time_zone(Subscriptions::CurrentPeriodStart))
                    .col(timestamp_with_time_zone(Subscriptions::CurrentPeriodEnd))
                    .col(boolean(Subscriptions::CancelAtPeriodEnd))
                    .col(timestamp_with_time_zone_null(Subscriptions::CancelledAt))
                    .col(text_null(Subscriptions::CancellationReason))
                    .col(string(Subscriptions::Billing))
                    .col(string(Subscriptions::TransitionId))
                    .col(boolean(Subscriptions::EverActive))
                    .col(string_null(Subscriptions::OpenCycleId))
                    .col(text(Subscriptions::Metadata))
                    .col(big_integer(Subscriptions::Version))
                    .col(timestamp_with_time_zone(Subscriptions::CreatedAt))
                    .col(timestamp_with_time_zone(Subscriptions::UpdatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_subscriptions_merchant")
                    .table(Subscriptions::Table)
                    .col(Subscriptions::MerchantId)
                    .col(Subscriptions::TestMode)
                    .col(Subscriptions::Id)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(SubscriptionCycles::Table)
                    .col(string(SubscriptionCycles::Id).primary_key())
                    .col(string(SubscriptionCycles::SubscriptionId))
                    .col(big_integer(SubscriptionCycles::Seq))
                    .col(timestamp_with_time_zone(SubscriptionCycles::PeriodStart))
                    .col(timestamp_with_time_zone(SubscriptionCycles::PeriodEnd))
                    .col(big_integer(SubscriptionCycles::Amount))
                    .col(string(SubscriptionCycles::Currency))
                    .col(text(SubscriptionCycles::Lines))
                    .col(string(SubscriptionCycles::Status))
                    .col(big_integer(SubscriptionCycles::Attempts))
                    .col(boolean(SubscriptionCycles::Charging))
                    .col(string_null(SubscriptionCycles::PaymentId))
                    .col(timestamp_with_time_zone_null(
                        SubscriptionCycles::NextAttemptAt,
                    ))
                    .col(timestamp_with_time_zone(SubscriptionCycles::CreatedAt))
                    .col(timestamp_with_time_zone(SubscriptionCycles::UpdatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(
                                SubscriptionCycles::Table,
                                SubscriptionCycles::SubscriptionId,
                            )
                            .to(Subscriptions::Table, Subscriptions::Id),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_subscription_cycles_seq")
                    .table(SubscriptionCycles::Table)
                    .col(SubscriptionCycles::SubscriptionId)
                    .col(SubscriptionCycles::Seq)
                    .unique()
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        for table in [
            SubscriptionCycles::Table.into_iden(),
            Subscriptions::Table.into_iden(),
        ] {
            manager
                .drop_table(Table::drop().table(table).to_owned())
                .await?;
        }
        Ok(())
    }
}

#[derive(DeriveIden)]
enum Subscriptions {
    Table,
    Id,
    MerchantId,
    ProfileId,
    TestMode,
    CustomerId,
    PaymentMethodId,
    /// None while a subscription made for the hosted checkout waits for the buyer.
    MandateId,
    /// Where the buyer pays the first cycle (and saves a card under a mandate), for one made
    /// with `POST /subscriptions/create`.
    CheckoutUrl,
    /// JSON array of `{price_id, product_id, quantity, unit_amount}`.
    Items,
    /// What one cycle charges.
    Amount,
    /// Prorations of plan changes for the next renewal (negative: a credit).
    PendingAdjustment,
    Currency,
    /// `day`, `week`, `month` or `year`.
    Interval,
    IntervalCount,
    Status,
    /// The start of the first period: every period starts a whole number of intervals after it.
    AnchorAt,
    /// Which period is current: 1 for the first (it ends one interval after the anchor).
    PeriodIndex,
    CurrentPeriodStart,
    CurrentPeriodEnd,
    CancelAtPeriodEnd,
    CancelledAt,
    CancellationReason,
    /// `payd`: payd charges each cycle against the saved method and mandate.
    Billing,
    /// New on every transition.
    TransitionId,
    /// Whether it was ever active (`subscription_active` is sent once).
    EverActive,
    /// The cycle being collected, if any.
    OpenCycleId,
    Metadata,
    Version,
    CreatedAt,
    UpdatedAt,
}

#[derive(DeriveIden)]
enum SubscriptionCycles {
    Table,
    Id,
    SubscriptionId,
    /// 1, 2, 3 … per subscription.
    Seq,
    PeriodStart,
    PeriodEnd,
    Amount,
    Currency,
    /// JSON array of the payment lines.
    Lines,
    /// `open`, `paid` or `void`.
    Status,
    Attempts,
    /// An attempt's payment was recorded before it was made, and its outcome not yet.
    Charging,
    /// The payment of the last attempt.
    PaymentId,
    NextAttemptAt,
    CreatedAt,
    UpdatedAt,
}

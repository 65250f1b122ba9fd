//! Merchants, their shops (profiles) and API keys.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(Merchants::Table)
                    .col(string(Merchants::Id).primary_key())
                    .col(string(Merchants::Name))
                    .col(timestamp_with_time_zone(Merchants::CreatedAt))
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(Profiles::Table)
                    .col(string(Profiles::Id).primary_key())
                    .col(string(Profiles::MerchantId))
                    .col(string(Profiles::Name))
                    .col(timestamp_with_time_zone(Profiles::CreatedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(Profiles::Table, Profiles::MerchantId)
                            .to(Merchants::Table, Merchants::Id),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_profiles_merchant")
                    .table(Profiles::Table)
                    .col(Profiles::MerchantId)
                    .to_owned(),
            )
            .await?;
        manager
            .create_table(
                Table::create()
                    .table(ApiKeys::Table)
                    .col(string(ApiKeys::Id).primary_key())
                    .col(string(ApiKeys::MerchantId))
                    .col(string_null(ApiKeys::ProfileId))
                    .col(string(ApiKeys::Kind))
                    .col(string(ApiKeys::Mode))
                    .col(string_uniq(ApiKeys::KeyHash))
                    .col(string(ApiKeys::Last4))
                    .col(string_null(ApiKeys::Name))
                    .col(timestamp_with_time_zone(ApiKeys::CreatedAt))
                    .col(timestamp_with_time_zone_null(ApiKeys::RevokedAt))
                    .foreign_key(
                        ForeignKey::create()
                            .from(ApiKeys::Table, ApiKeys::MerchantId)
                            .to(Merchants::Table, Merchants::Id),
                    )
                    .foreign_key(
                        ForeignKey::create()
                            .from(ApiKeys::Table, ApiKeys::ProfileId)
                            .to(Profiles::Table, Profiles::Id),
                    )
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_api_keys_merchant")
                    .table(ApiKeys::Table)
                    .col(ApiKeys::MerchantId)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(ApiKeys::Table).to_owned())
            .await?;
        manager
            .drop_table(Table::drop().table(Profiles::Table).to_owned())
            .await?;
        manager
            .drop_table(Table::drop().table(Merchants::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
enum Merchants {
    Table,
    Id,
    Name,
    CreatedAt,
}

#[derive(DeriveIden)]
enum Profiles {
    Table,
    Id,
    MerchantId,
    Name,
    CreatedAt,
}

#[derive(DeriveIden)]
enum ApiKeys {
    Table,
    Id,
    MerchantId,
    ProfileId,
    Kind,
    Mode,
    KeyHash,
    Last4,
    Name,
    CreatedAt,
    RevokedAt,
}

//! The origins that may frame a shop's card form (`profiles.embed_origins`, a JSON array of
//! `scheme://host[:port]`): the embedded checkout's `frame-ancestors`. Nullable (none: no page
//! of the shop can be framed), so the release before runs beside it.

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Profiles::Table)
                    .add_column(text_null(Profiles::EmbedOrigins))
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .alter_table(
                Table::alter()
                    .table(Profiles::Table)
                    .drop_column(Profiles::EmbedOrigins)
                    .to_owned(),
            )
            .await
    }
}

#[derive(DeriveIden)]
enum Profiles {
    Table,
    EmbedOrigins,
}

//! Uploaded files are written as they arrive, in chunks, so an upload in flight holds one
//! chunk in memory rather than the whole file. (Files stored before keep their bytes in
//! `files.bytes`; new files leave it empty.)

use sea_orm_migration::{prelude::*, schema::*};

#[derive(DeriveMigrationName)]
pub struct Migration;

#[async_trait::async_trait]
impl MigrationTrait for Migration {
    async fn up(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .create_table(
                Table::create()
                    .table(FileChunks::Table)
                    .col(string(FileChunks::FileId))
                    .col(integer(FileChunks::Seq))
                    .col(blob(FileChunks::Bytes))
                    .col(timestamp_with_time_zone(FileChunks::CreatedAt))
                    .primary_key(Index::create().col(FileChunks::FileId).col(FileChunks::Seq))
                    .to_owned(),
            )
            .await?;
        manager
            .create_index(
                Index::create()
                    .name("idx_file_chunks_created")
                    .table(FileChunks::Table)
                    .col(FileChunks::CreatedAt)
                    .to_owned(),
            )
            .await
    }

    async fn down(&self, manager: &SchemaManager) -> Result<(), DbErr> {
        manager
            .drop_table(Table::drop().table(FileChunks::Table).to_owned())
            .await
    }
}

#[derive(DeriveIden)]
enum FileChunks {
    Table,
    /// The file's id; chunks of an upload that never finished have no `files` row and are
    /// purged after a day.
    FileId,
    /// 0, 1, 2 … in the order of the bytes.
    Seq,
    Bytes,
    CreatedAt,
}

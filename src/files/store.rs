//! Persistence of uploaded files: their rows, bytes included.

use payd_entity::file;
use sea_orm::{ConnectionTrait, DatabaseConnection, DbErr, EntityTrait};

use crate::commit::{self, Change, CommitError};

/// A file of this merchant and mode; `None` for anyone else's.
pub async fn find_owned(
    db: &impl ConnectionTrait,
    id: &str,
    merchant_id: &str,
    test_mode: bool,
) -> Result<Option<file::Model>, DbErr> {
    Ok(file::Entity::find_by_id(id)
        .one(db)
        .await?
        .filter(|f| f.merchant_id == merchant_id && f.test_mode == test_mode))
}

pub async fn insert(db: &DatabaseConnection, f: file::Model) -> Result<file::Model, CommitError> {
    commit::commit(
        db,
        Change::at(f.created_at).write(commit::insert(f.clone())),
    )
    .await?;
    Ok(f)
}

//! Persistence of uploaded files: their rows, bytes included.

use payd_entity::file;
use sea_orm::{ActiveModelTrait, ConnectionTrait, DbErr, EntityTrait, IntoActiveModel};

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

pub async fn insert(db: &impl ConnectionTrait, f: file::Model) -> Result<file::Model, DbErr> {
    f.clone().into_active_model().reset_all().insert(db).await?;
    Ok(f)
}

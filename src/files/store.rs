//! Persistence of uploaded files: their rows, and their bytes in chunks written as they
//! arrive.

use chrono::{DateTime, Utc};
use payd_entity::{file, file_chunk};
use sea_orm::{
    sea_query::{Expr, ExprTrait, Func, Query, SimpleExpr},
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder, QuerySelect,
    QueryTrait,
};

use crate::commit::Db;
use crate::{
    accounts,
    commit::{self, Change, CommitError, Write},
    recovery::RequestKey,
};

/// The `seq`th chunk of a file's bytes; `None` past the last.
pub async fn chunk(
    db: &impl ConnectionTrait,
    file_id: &str,
    seq: i32,
) -> Result<Option<Vec<u8>>, DbErr> {
    Ok(file_chunk::Entity::find_by_id((file_id.to_owned(), seq))
        .one(db)
        .await?
        .map(|c| c.bytes))
}

/// How many files the merchant stores (either mode) and their bytes together.
pub async fn usage(db: &impl ConnectionTrait, merchant_id: &str) -> Result<(u64, u64), DbErr> {
    let (count, bytes): (i64, i64) = file::Entity::find()
        .select_only()
        .column_as(Expr::cust("COUNT(*)"), "count")
        .column_as(
            Expr::cust("CAST(COALESCE(SUM(size), 0) AS BIGINT)"),
            "bytes",
        )
        .filter(file::Column::MerchantId.eq(merchant_id))
        .into_tuple()
        .one(db)
        .await?
        .unwrap_or((0, 0));
    Ok((Ord::max(count, 0) as u64, Ord::max(bytes, 0) as u64))
}

/// Stores the `seq`th piece of file `file_id`'s bytes.
pub async fn put_chunk(
    db: &Db,
    now: DateTime<Utc>,
    file_id: &str,
    seq: i32,
    bytes: Vec<u8>,
) -> Result<(), CommitError> {
    let chunk = file_chunk::Model {
        file_id: file_id.to_owned(),
        seq,
        bytes,
        created_at: now,
    };
    commit::commit(db, Change::at(now).write(commit::insert(chunk))).await?;
    Ok(())
}

/// Forgets the chunks of an upload that did not finish.
pub async fn drop_chunks(db: &Db, now: DateTime<Utc>, file_id: &str) -> Result<(), CommitError> {
    let delete = file_chunk::Entity::delete_many()
        .filter(file_chunk::Column::FileId.eq(file_id))
        .into_query();
    commit::commit(db, Change::at(now).write(Write::Delete(delete))).await?;
    Ok(())
}

/// The refusals of the merchant's file bounds.
pub const FILES_BOUND: &str = "limits.max_files_per_merchant";
pub const BYTES_BOUND: &str = "limits.max_file_bytes_per_merchant";

/// What a merchant may store: how many files, and their bytes together.
#[derive(Debug, Clone, Copy)]
pub struct Bounds {
    pub files: u64,
    pub bytes: u64,
}

/// Stores a file's row once its chunks are all written (and, for a request with an
/// `Idempotency-Key`, names it the key's recovery point in the same transaction), if the
/// merchant stays within its bounds with it: counted inside the commit, so concurrent uploads
/// never pass them (refused as a [`Conflict::Bound`](crate::conflict::Conflict) naming
/// [`FILES_BOUND`] or [`BYTES_BOUND`]).
pub async fn insert(
    db: &Db,
    f: file::Model,
    key: Option<&RequestKey>,
    bounds: Bounds,
) -> Result<file::Model, CommitError> {
    let usage = |having: SimpleExpr| {
        Query::select()
            .expr(Func::count(Expr::col(file::Column::Id)))
            .from(file::Entity)
            .and_where(file::Column::MerchantId.eq(f.merchant_id.as_str()))
            .and_having(having)
            .to_owned()
    };
    let count = Expr::expr(Func::count(Expr::col(file::Column::Id))).lte(bounds.files as i64);
    let bytes = Expr::expr(Func::coalesce([
        Expr::from(Func::sum(Expr::col(file::Column::Size))),
        Expr::val(0i64),
    ]))
    .lte(bounds.bytes as i64);
    let lock = || accounts::store::merchant_lock(&f.merchant_id);
    let mut change = Change::at(f.created_at)
        .write(commit::insert(f.clone()))
        .write_all(commit::bounded(
            lock(),
            usage(count),
            FILES_BOUND,
            bounds.files,
        ))
        .write_all(commit::bounded(
            lock(),
            usage(bytes),
            BYTES_BOUND,
            bounds.bytes,
        ));
    if let Some(key) = key {
        change = change.write(key.bind(&f.id));
    }
    commit::commit(db, change).await?;
    Ok(f)
}

/// The scheduled job that drops the chunks of uploads a crash cut off (one for the deployment).
pub const PURGE_JOB: &str = "file_chunk_purge";

/// Registers [`PURGE_JOB`]: hourly, chunks of no file older than a day are deleted (an
/// upload outlives no request deadline; a day is far beyond any).
pub fn register_purge(scheduler: &mut crate::scheduler::Scheduler, db: &Db) {
    let db = db.clone();
    scheduler.register_periodic(PURGE_JOB, chrono::Duration::hours(1), move |now| {
        let db = db.clone();
        async move {
            purge_orphan_chunks(&db, now - chrono::Duration::days(1))
                .await
                .map(drop)
        }
    });
}

/// Deletes chunks older than `before` that belong to no file (uploads cut off by a crash);
/// run by the scheduler.
pub async fn purge_orphan_chunks(
    db: &impl ConnectionTrait,
    before: DateTime<Utc>,
) -> Result<u64, DbErr> {
    let files = Query::select()
        .column(file::Column::Id)
        .from(file::Entity)
        .to_owned();
    let res = file_chunk::Entity::delete_many()
        .filter(file_chunk::Column::CreatedAt.lt(before))
        .filter(file_chunk::Column::FileId.not_in_subquery(files))
        .exec(db)
        .await?;
    Ok(res.rows_affected)
}

/// A small file's record and its whole bytes (product images: a few MiB at most), or `None`.
pub async fn read_all(
    db: &impl ConnectionTrait,
    file_id: &crate::ids::FileId,
) -> Result<Option<(file::Model, Vec<u8>)>, DbErr> {
    let Some(mut f) = file::Entity::find_by_id(file_id.clone()).one(db).await? else {
        return Ok(None);
    };
    let chunks = file_chunk::Entity::find()
        .filter(file_chunk::Column::FileId.eq(file_id))
        .order_by_asc(file_chunk::Column::Seq)
        .all(db)
        .await?;
    let bytes = if chunks.is_empty() {
        std::mem::take(&mut f.bytes)
    } else {
        chunks.into_iter().flat_map(|c| c.bytes).collect()
    };
    Ok(Some((f, bytes)))
}

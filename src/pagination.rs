//! List pages: `limit` (1–100, default 10), `starting_after` / `ending_before` cursors on ids,
//! newest first, answered as `{"data": [...], "has_more": bool}`.

use chrono::{DateTime, Utc};
use sea_orm::{
    ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder, QuerySelect, Select,
};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};

use crate::{error::ApiError, ids::Id};

pub const DEFAULT_LIMIT: u64 = 10;
pub const MAX_LIMIT: u64 = 100;

/// The paging parameters as a client sends them (query string or JSON body).
#[derive(Debug, Default, Clone, Deserialize, IntoParams, ToSchema)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ListQuery {
    /// How many objects to return, 1 to 100 (default 10).
    #[param(minimum = 1, maximum = 100)]
    #[schema(minimum = 1, maximum = 100)]
    pub limit: Option<i64>,
    /// Return objects older than this id (the next page).
    pub starting_after: Option<String>,
    /// Return objects newer than this id (the previous page).
    pub ending_before: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cursor {
    None,
    After(String),
    Before(String),
}

/// Validated paging parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Page {
    pub limit: u64,
    pub cursor: Cursor,
}

impl Page {
    /// Checks the paging parameters of a list of objects with ids of kind `T`: a cursor that
    /// is not such an id is 400 naming it (it would silently page from the start).
    pub fn parse<T: Id>(q: &ListQuery) -> Result<Self, ApiError> {
        let prefix = T::PREFIX;
        let limit = match q.limit {
            None => DEFAULT_LIMIT,
            Some(n) if (1..=MAX_LIMIT as i64).contains(&n) => n as u64,
            Some(_) => {
                return Err(ApiError::invalid_param(
                    "limit",
                    format!("limit must be between 1 and {MAX_LIMIT}"),
                ))
            }
        };
        let cursor = match (&q.starting_after, &q.ending_before) {
            (Some(_), Some(_)) => {
                return Err(ApiError::invalid_param(
                    "ending_before",
                    "send starting_after or ending_before, not both",
                ))
            }
            (Some(id), None) => Cursor::After(id.clone()),
            (None, Some(id)) => Cursor::Before(id.clone()),
            (None, None) => Cursor::None,
        };
        let not_an_id = |param: &str, id: &str| {
            ApiError::invalid_param(
                param,
                format!(
                    "{param} must be the id of an object of this list ({prefix}_…), not {id:?}"
                ),
            )
        };
        match &cursor {
            Cursor::After(id) if T::parse(id).is_none() => {
                return Err(not_an_id("starting_after", id))
            }
            Cursor::Before(id) if T::parse(id).is_none() => {
                return Err(not_an_id("ending_before", id))
            }
            _ => {}
        }
        Ok(Self { limit, cursor })
    }
}

/// One page of a list.
#[derive(Debug, Serialize, ToSchema)]
pub struct List<T> {
    pub data: Vec<T>,
    pub has_more: bool,
}

impl<T> List<T> {
    pub fn map<U>(self, f: impl FnMut(T) -> U) -> List<U> {
        List {
            data: self.data.into_iter().map(f).collect(),
            has_more: self.has_more,
        }
    }

    /// [`List::map`] with a conversion that can fail (a stored value that does not decode).
    pub fn try_map<U, E>(self, f: impl FnMut(T) -> Result<U, E>) -> Result<List<U>, E> {
        Ok(List {
            data: self.data.into_iter().map(f).collect::<Result<_, E>>()?,
            has_more: self.has_more,
        })
    }
}

/// The `created_after` / `created_before` filter of every list (both bounds exclusive).
pub fn created_between<E, C>(
    select: Select<E>,
    created_at: C,
    after: Option<DateTime<Utc>>,
    before: Option<DateTime<Utc>>,
) -> Select<E>
where
    E: EntityTrait,
    C: ColumnTrait + Copy,
{
    let select = match after {
        Some(t) => select.filter(created_at.gt(t)),
        None => select,
    };
    match before {
        Some(t) => select.filter(created_at.lt(t)),
        None => select,
    }
}

/// Why a page could not be read.
#[derive(Debug, thiserror::Error)]
pub enum PageError {
    #[error(transparent)]
    Db(#[from] DbErr),
    /// The cursor has the shape of this list's ids, but the caller has no such object.
    #[error("{param}: no such object {id:?}")]
    CursorMissing { param: &'static str, id: String },
}

impl From<PageError> for ApiError {
    fn from(e: PageError) -> Self {
        match e {
            PageError::Db(e) => e.into(),
            PageError::CursorMissing { param, id } => ApiError::invalid(
                "resource_missing",
                format!("{param}: no such object {id:?} (a page starts at an object you can see)"),
            )
            .param(param),
        }
    }
}

/// Runs `filtered` for one page, newest first by `id` (ids are time-sortable UUIDv7). The
/// cursor must be an object of `visible` (the caller's merchant, mode and shop; the list's
/// filters may since have stopped matching it): otherwise 400 `resource_missing`, since paging
/// on from an id nobody can see would silently answer an empty or wrong page.
pub async fn paginate<E, C>(
    db: &impl ConnectionTrait,
    visible: Select<E>,
    filtered: Select<E>,
    id: C,
    page: &Page,
) -> Result<List<E::Model>, PageError>
where
    E: EntityTrait,
    C: ColumnTrait,
{
    let cursor = match &page.cursor {
        Cursor::None => None,
        Cursor::After(c) => Some(("starting_after", c)),
        Cursor::Before(c) => Some(("ending_before", c)),
    };
    if let Some((param, cursor)) = cursor {
        if visible
            .filter(id.eq(cursor.as_str()))
            .select_only()
            .column(id)
            .into_tuple::<String>()
            .one(db)
            .await?
            .is_none()
        {
            return Err(PageError::CursorMissing {
                param,
                id: cursor.clone(),
            });
        }
    }
    let fetch = page.limit + 1;
    let (select, reverse) = match &page.cursor {
        Cursor::None => (filtered.order_by_desc(id), false),
        Cursor::After(cursor) => (
            filtered.filter(id.lt(cursor.as_str())).order_by_desc(id),
            false,
        ),
        Cursor::Before(cursor) => (
            filtered.filter(id.gt(cursor.as_str())).order_by_asc(id),
            true,
        ),
    };
    let mut data = select.limit(fetch).all(db).await?;
    let has_more = data.len() as u64 > page.limit;
    data.truncate(page.limit as usize);
    if reverse {
        data.reverse();
    }
    Ok(List { data, has_more })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::PaymentId;

    #[test]
    fn limits_and_cursors_are_validated() {
        let page = Page::parse::<PaymentId>(&ListQuery::default()).unwrap();
        assert_eq!(page.limit, DEFAULT_LIMIT);
        for bad in [0, -1, 101] {
            let q = ListQuery {
                limit: Some(bad),
                ..Default::default()
            };
            assert_eq!(
                Page::parse::<PaymentId>(&q).unwrap_err().param.as_deref(),
                Some("limit")
            );
        }
        let q = ListQuery {
            starting_after: Some("a".into()),
            ending_before: Some("b".into()),
            ..Default::default()
        };
        assert!(Page::parse::<PaymentId>(&q).is_err());
        let cursor = |after: &str| ListQuery {
            starting_after: Some(after.into()),
            ..Default::default()
        };
        let good = format!("pay_{}", "0a".repeat(16));
        assert_eq!(
            Page::parse::<PaymentId>(&cursor(&good)).unwrap().cursor,
            Cursor::After(good.clone())
        );
        for bad in ["pay_garbage", "ref_0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a0a", ""] {
            let e = Page::parse::<PaymentId>(&cursor(bad)).unwrap_err();
            assert_eq!(
                (e.code, e.param.as_deref()),
                ("parameter_invalid", Some("starting_after")),
                "{bad}"
            );
        }
    }
}

//! Persistence of the catalog. A product is the aggregate: every change of it, of its prices,
//! add-on groups or bundle commits under a compare-and-set on the product's `version`, so two
//! writers never interleave and a price never changes behind a product's back.

use std::collections::BTreeMap;

use chrono::{DateTime, Utc};
use payd_entity::{payment_line, price, product, product_category, product_image, profile};
use sea_orm::{
    sea_query::{Expr, ExprTrait, Func, Query},
    ActiveModelTrait, ColumnTrait, Condition, ConnectionTrait, DbErr, EntityTrait, IntoActiveModel,
    QueryFilter, QueryOrder, QuerySelect, QueryTrait,
};

use super::api::{AddonGroup, Component, ListCategoriesQuery, ListProductsQuery};
use crate::commit::Db;
use crate::ids::{CategoryId, ImageId, PriceId, ProductId};
use crate::{
    auth::keys::Scope,
    commit::{self, Change, Write},
    conflict::Conflict,
    pagination::{paginate, List, Page, PageError},
};

pub use crate::commit::CommitError;

pub async fn find(
    db: &impl ConnectionTrait,
    id: &ProductId,
) -> Result<Option<product::Model>, DbErr> {
    product::Entity::find_by_id(id.clone()).one(db).await
}

pub async fn find_price(
    db: &impl ConnectionTrait,
    id: &PriceId,
) -> Result<Option<price::Model>, DbErr> {
    price::Entity::find_by_id(id.clone()).one(db).await
}

/// The prices of these products, oldest first.
pub async fn prices_of(
    db: &impl ConnectionTrait,
    product_ids: &[ProductId],
) -> Result<Vec<price::Model>, DbErr> {
    price::Entity::find()
        .filter(price::Column::ProductId.is_in(product_ids.iter().cloned()))
        .order_by_asc(price::Column::Id)
        .all(db)
        .await
}

/// The add-on groups stored on a product, in the product's mode.
pub fn groups(p: &product::Model) -> Vec<AddonGroup> {
    let mut groups = p.addon_groups.0.clone();
    for g in &mut groups {
        g.test_mode = p.test_mode;
    }
    groups
}

/// A bundle's components; `None` for a product that is not a bundle.
pub fn components(p: &product::Model) -> Option<Vec<Component>> {
    p.bundle.as_ref().map(|b| b.0.clone())
}

/// A new product with its prices, in one commit.
pub async fn insert(
    db: &Db,
    p: &product::Model,
    prices: &[price::Model],
    now: DateTime<Utc>,
    max: u64,
) -> Result<(), CommitError> {
    let change = Change::at(now)
        .write(commit::insert(p.clone()))
        .write_all(prices.iter().map(|price| commit::insert(price.clone())))
        .write_all(commit::bounded(
            shop_lock(&p.profile_id),
            within(p, max),
            PRODUCTS_BOUND,
            max,
        ));
    commit::commit(db, change).await?;
    Ok(())
}

/// The refusal of `limits.max_products_per_shop`.
pub const PRODUCTS_BOUND: &str = "limits.max_products_per_shop";

/// Locks the shop's row until the change commits: products added to one shop follow one
/// another ([`commit::bounded`]).
fn shop_lock(profile_id: &str) -> sea_orm::sea_query::UpdateStatement {
    profile::Entity::update_many()
        .col_expr(profile::Column::Id, Expr::col(profile::Column::Id))
        .filter(profile::Column::Id.eq(profile_id))
        .into_query()
}

/// Finds a row while the product's shop (in its mode) holds at most `max` products.
fn within(p: &product::Model, max: u64) -> sea_orm::sea_query::SelectStatement {
    Query::select()
        .expr(Func::count(Expr::col(product::Column::Id)))
        .from(product::Entity)
        .and_where(product::Column::MerchantId.eq(p.merchant_id.as_str()))
        .and_where(product::Column::TestMode.eq(p.test_mode))
        .and_where(product::Column::ProfileId.eq(p.profile_id.as_str()))
        .and_having(Expr::expr(Func::count(Expr::col(product::Column::Id))).lte(max as i64))
        .to_owned()
}

/// The compare-and-set of a product's row: `after` replaces `before` if nobody wrote since.
pub fn cas(before: &product::Model, after: &product::Model) -> Write {
    Write::Cas(
        product::Entity::update_many()
            .set(after.clone().into_active_model().reset_all())
            .filter(product::Column::Id.eq(before.id.as_str()))
            .filter(product::Column::Version.eq(before.version))
            .into_query(),
    )
}

/// The write of a price's new row (its product's compare-and-set guards it).
pub fn price_update(p: price::Model) -> Write {
    Write::Update(
        price::Entity::update_many()
            .filter(price::Column::Id.eq(p.id.as_str()))
            .set(p.into_active_model().reset_all())
            .into_query(),
    )
}

/// Replaces the product (version bumped) and then makes the other writes of its change (its
/// prices, the conditions it needs), in one commit.
pub async fn commit(
    db: &Db,
    before: &product::Model,
    mut after: product::Model,
    writes: Vec<Write>,
) -> Result<product::Model, CommitError> {
    after.version = before.version + 1;
    // Invariant: the compare-and-set comes first, so the product's row is held (PostgreSQL:
    // locked) before any condition of the change is read.
    let mut change = Change::at(after.updated_at).write(cas(before, &after));
    for w in writes {
        change = change.write(w);
    }
    commit::commit(db, change).await?;
    Ok(after)
}

/// The shop's other products whose bundle or add-on groups name one of `ids` (product or price
/// ids of `p`). Components and members are stored as JSON arrays of ids, so an id is found as
/// the quoted string `"id"` (ids never hold a quote or a backslash).
fn holders_query(p: &product::Model, ids: &[String]) -> sea_orm::Select<product::Entity> {
    let mut named = Condition::any();
    for id in ids {
        let pattern = format!(
            "%\"{}\"%",
            id.replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_")
        );
        for column in [product::Column::Bundle, product::Column::AddonGroups] {
            named = named.add(
                Expr::col(column)
                    .like(sea_orm::sea_query::LikeExpr::new(pattern.clone()).escape('\\')),
            );
        }
    }
    product::Entity::find()
        .filter(product::Column::MerchantId.eq(p.merchant_id.as_str()))
        .filter(product::Column::TestMode.eq(p.test_mode))
        .filter(product::Column::ProfileId.eq(p.profile_id.as_str()))
        .filter(product::Column::Id.ne(p.id.as_str()))
        .filter(named)
}

/// The products holding one of `ids` in a bundle or an add-on group (at most 20, oldest first).
pub async fn holders(
    db: &impl ConnectionTrait,
    p: &product::Model,
    ids: &[String],
) -> Result<Vec<product::Model>, DbErr> {
    holders_query(p, ids)
        .order_by_asc(product::Column::Id)
        .limit(20)
        .all(db)
        .await
}

/// The condition that no bundle or add-on group holds one of `ids`, checked inside the commit
/// (after the product's compare-and-set): a bundle or group edit naming one of them touches
/// its row while it is on sale (`on_sale`), so either that edit commits first and this
/// condition sees it, or the edit finds it archived.
pub fn not_held(p: &product::Model, ids: &[String], refusal: Conflict) -> Write {
    Write::Require {
        query: holders_query(p, ids)
            .select_only()
            .expr(Expr::val(1))
            .limit(1)
            .into_query(),
        exists: false,
        refusal,
    }
}

/// Writes that hold a product and a price on sale until the change carrying them commits: an
/// update of the row by itself that must touch it while it is active, so a concurrent archive
/// or delete waits for the change or makes it lose.
pub fn on_sale(product_id: Option<&str>, price_id: Option<&str>) -> Vec<Write> {
    let mut writes = Vec::new();
    if let Some(p) = product_id {
        writes.push(Write::Cas(
            product::Entity::update_many()
                .col_expr(product::Column::Active, Expr::col(product::Column::Active))
                .filter(product::Column::Id.eq(p))
                .filter(product::Column::Active.eq(true))
                .into_query(),
        ));
    }
    if let Some(p) = price_id {
        writes.push(Write::Cas(
            price::Entity::update_many()
                .col_expr(price::Column::Active, Expr::col(price::Column::Active))
                .filter(price::Column::Id.eq(p))
                .filter(price::Column::Active.eq(true))
                .into_query(),
        ));
    }
    writes
}

/// Deletes a product and its prices if nobody wrote since, no payment line names it or one of
/// its prices, and no bundle or add-on group holds it or one of `prices` (its price ids); both
/// checked inside the commit, after the compare-and-set holds the row, so a payment or an edit
/// naming it cannot slip in between.
pub async fn delete(
    db: &Db,
    before: &product::Model,
    prices: &[String],
    now: DateTime<Utc>,
) -> Result<(), CommitError> {
    let mut held_ids = vec![before.id.to_string()];
    held_ids.extend_from_slice(prices);
    let mut held = before.clone();
    held.version = before.version + 1;
    held.updated_at = now;
    let on_a_line = Query::select()
        .expr(Expr::val(1))
        .from(payment_line::Entity)
        .cond_where(
            Condition::any()
                .add(payment_line::Column::ProductId.eq(before.id.as_str()))
                .add(
                    payment_line::Column::PriceId.in_subquery(
                        Query::select()
                            .column(price::Column::Id)
                            .from(price::Entity)
                            .and_where(price::Column::ProductId.eq(before.id.as_str()))
                            .to_owned(),
                    ),
                ),
        )
        .limit(1)
        .to_owned();
    let change = Change::at(now)
        .write(cas(before, &held))
        .write(Write::Require {
            query: on_a_line,
            exists: false,
            refusal: Conflict::ProductHasSales,
        })
        .write(not_held(before, &held_ids, Conflict::ProductInUse))
        .write(Write::Delete(
            price::Entity::delete_many()
                .filter(price::Column::ProductId.eq(before.id.as_str()))
                .into_query(),
        ))
        .write(Write::Delete(
            product::Entity::delete_many()
                .filter(product::Column::Id.eq(before.id.as_str()))
                .into_query(),
        ));
    commit::commit(db, change).await?;
    Ok(())
}

/// The products of `merchant_id` in this mode, of shop `profile_id` if one is given.
pub async fn list(
    db: &impl ConnectionTrait,
    merchant_id: &str,
    test_mode: bool,
    profile_id: Option<&str>,
    f: &ListProductsQuery,
    page: &Page,
) -> Result<List<product::Model>, PageError> {
    let mut q = product::Entity::find()
        .filter(product::Column::MerchantId.eq(merchant_id))
        .filter(product::Column::TestMode.eq(test_mode));
    if let Some(p) = profile_id {
        q = q.filter(product::Column::ProfileId.eq(p));
    }
    let visible = q.clone();
    if let Some(a) = f.active {
        q = q.filter(product::Column::Active.eq(a));
    }
    if let Some(c) = &f.category_id {
        q = q.filter(product::Column::CategoryId.eq(c.as_str()));
    }
    if let Some(n) = f.name.as_deref().filter(|n| !n.is_empty()) {
        let pattern = format!(
            "%{}%",
            n.to_lowercase()
                .replace('\\', "\\\\")
                .replace('%', "\\%")
                .replace('_', "\\_")
        );
        q = q.filter(
            Expr::expr(Func::lower(Expr::col(product::Column::Name)))
                .like(sea_orm::sea_query::LikeExpr::new(pattern).escape('\\')),
        );
    }
    paginate(db, visible, q, product::Column::Id, page).await
}

/// Every product of a shop (at most `limit`), oldest first: what a bundle's cycle check and an
/// import compare against.
pub async fn of_shop(
    db: &impl ConnectionTrait,
    merchant_id: &str,
    test_mode: bool,
    profile_id: &str,
    limit: u64,
) -> Result<Vec<product::Model>, DbErr> {
    product::Entity::find()
        .filter(product::Column::MerchantId.eq(merchant_id))
        .filter(product::Column::TestMode.eq(test_mode))
        .filter(product::Column::ProfileId.eq(profile_id))
        .order_by_asc(product::Column::Id)
        .limit(limit)
        .all(db)
        .await
}

/// The shop's bundles: each bundle's component products (a price counted as its product).
pub async fn bundle_graph(
    db: &impl ConnectionTrait,
    merchant_id: &str,
    test_mode: bool,
    profile_id: &str,
) -> Result<BTreeMap<String, Vec<String>>, DbErr> {
    let bundles = product::Entity::find()
        .filter(product::Column::MerchantId.eq(merchant_id))
        .filter(product::Column::TestMode.eq(test_mode))
        .filter(product::Column::ProfileId.eq(profile_id))
        .filter(product::Column::Bundle.is_not_null())
        .all(db)
        .await?;
    let parts: Vec<_> = bundles
        .iter()
        .map(|b| (b.id.to_string(), components(b).unwrap_or_default()))
        .collect();
    let price_ids: Vec<&String> = parts
        .iter()
        .flat_map(|(_, c)| c.iter().filter_map(|c| c.price_id.as_ref()))
        .collect();
    let owners: BTreeMap<String, String> = price::Entity::find()
        .filter(price::Column::Id.is_in(price_ids))
        .all(db)
        .await?
        .into_iter()
        .map(|p| (p.id.into(), p.product_id.into()))
        .collect();
    Ok(parts
        .into_iter()
        .map(|(id, components)| {
            let to = components
                .into_iter()
                .filter_map(|c| {
                    c.product_id
                        .or_else(|| c.price_id.and_then(|p| owners.get(&p).cloned()))
                })
                .collect();
            (id, to)
        })
        .collect())
}

/// Writes a payment's commit adds for its catalog lines: each named product and price must
/// still be on sale when the payment is written (an update of its own row that must touch it,
/// so a concurrent archive or delete waits for the payment or makes it lose), and the line is
/// indexed for the sales report.
pub fn line_writes(
    payment_id: &crate::ids::PaymentId,
    line_id: &str,
    product_id: Option<&str>,
    price_id: Option<&str>,
    now: DateTime<Utc>,
) -> Vec<Write> {
    let mut writes = on_sale(product_id, price_id);
    writes.extend(line_index(payment_id, line_id, product_id, price_id, now));
    writes
}

/// The index row of a payment line that names the catalog (the sales report reads it); none
/// for a line that names nothing of it.
pub fn line_index(
    payment_id: &crate::ids::PaymentId,
    line_id: &str,
    product_id: Option<&str>,
    price_id: Option<&str>,
    now: DateTime<Utc>,
) -> Option<Write> {
    (product_id.is_some() || price_id.is_some()).then(|| {
        commit::insert(payment_line::Model {
            payment_id: payment_id.to_owned(),
            line_id: line_id.to_owned(),
            product_id: product_id.map(str::to_owned),
            price_id: price_id.map(str::to_owned),
            created_at: now,
        })
    })
}

/// The payment lines naming the product or one of these prices.
pub async fn lines_of(
    db: &impl ConnectionTrait,
    product_id: &str,
    price_ids: &[String],
) -> Result<Vec<payment_line::Model>, DbErr> {
    payment_line::Entity::find()
        .filter(
            Condition::any()
                .add(payment_line::Column::ProductId.eq(product_id))
                .add(payment_line::Column::PriceId.is_in(price_ids.iter().map(String::as_str))),
        )
        .order_by_asc(payment_line::Column::PaymentId)
        .all(db)
        .await
}

pub async fn insert_category(db: &Db, c: &product_category::Model) -> Result<(), CommitError> {
    commit::commit(
        db,
        Change::at(c.created_at).write(commit::insert(c.clone())),
    )
    .await?;
    Ok(())
}

/// A category of the caller's scope.
pub async fn find_category(
    db: &impl ConnectionTrait,
    id: &CategoryId,
    scope: &Scope,
) -> Result<Option<product_category::Model>, DbErr> {
    Ok(product_category::Entity::find_by_id(id.clone())
        .one(db)
        .await?
        .filter(|c| scope.sees(&c.merchant_id, c.test_mode, &c.profile_id)))
}

pub async fn list_categories(
    db: &impl ConnectionTrait,
    merchant_id: &str,
    test_mode: bool,
    profile_id: Option<&str>,
    f: &ListCategoriesQuery,
    page: &Page,
) -> Result<List<product_category::Model>, PageError> {
    let mut q = product_category::Entity::find()
        .filter(product_category::Column::MerchantId.eq(merchant_id))
        .filter(product_category::Column::TestMode.eq(test_mode));
    if let Some(p) = profile_id {
        q = q.filter(product_category::Column::ProfileId.eq(p));
    }
    let visible = q.clone();
    if let Some(p) = &f.parent_id {
        q = q.filter(product_category::Column::ParentId.eq(p.as_str()));
    }
    paginate(db, visible, q, product_category::Column::Id, page).await
}

pub async fn insert_image(db: &Db, i: &product_image::Model) -> Result<(), CommitError> {
    commit::commit(
        db,
        Change::at(i.created_at).write(commit::insert(i.clone())),
    )
    .await?;
    Ok(())
}

pub async fn find_image(
    db: &impl ConnectionTrait,
    id: &ImageId,
) -> Result<Option<product_image::Model>, DbErr> {
    product_image::Entity::find_by_id(id.clone()).one(db).await
}

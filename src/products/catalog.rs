//! The catalog's changes: each reads the product and its prices, decides with the checks of
//! `machine.rs` and the shop's other objects, and commits under the product's version — again
//! from the read after a lost race (`commit::retrying`). Requests were parsed at the edge
//! (`api.rs`); what can go wrong here is a [`CatalogError`], which the routes map to the API's
//! error.

use chrono::{DateTime, Utc};
use payd_entity::{price, product, product_category};
use sea_orm::DbErr;

use super::{
    api::{
        AddonGroup, AddonGroupInput, Component, NewCategory, NewPrice, NewProduct, Price,
        PricePatch, Product, ProductPatch, Recurring, MAX_PRICES,
    },
    machine::{self, Refusal},
    store,
};
use crate::commit::Db;
use crate::stored::Json;
use crate::{
    auth::keys::Scope,
    commit::{self, CommitError, Write},
    conflict::Conflict,
    fields::Metadata,
    ids::{new_id, CategoryId, ImageId, PriceId, ProductId, ProfileId},
};

/// Reads and commits of one change before giving up to concurrent writers.
const TRIES: usize = 5;

/// At most this many add-on groups per product.
pub const MAX_GROUPS: usize = 20;

/// Why a change of the catalog was refused: a rule of `machine.rs`, or what it names is not
/// there, or a bound is reached.
#[derive(Debug, thiserror::Error)]
pub enum CatalogError {
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// No such `what`, named by the request's `param`.
    #[error("no such {what}")]
    NotFound { what: &'static str, param: String },
    #[error("at most {max} {what}")]
    Limit { what: &'static str, max: u64 },
    #[error(transparent)]
    Commit(#[from] CommitError),
    #[error("database: {0}")]
    Db(#[from] DbErr),
}

fn not_found(what: &'static str, param: &str) -> CatalogError {
    CatalogError::NotFound {
        what,
        param: param.to_owned(),
    }
}

/// A product of the caller's scope, or 404.
pub async fn owned(db: &Db, scope: &Scope, id: &str) -> Result<product::Model, CatalogError> {
    let Some(id) = crate::ids::ProductId::parse(id) else {
        return Err(not_found("product", "product_id"));
    };
    crate::owned::find_owned(db, &id, scope)
        .await?
        .ok_or_else(|| not_found("product", "product_id"))
}

/// The product as shown: with every price (`active_only`: the active ones).
pub async fn render(
    db: &Db,
    public_url: &str,
    products: Vec<product::Model>,
    active_only: bool,
) -> Result<Vec<Product>, DbErr> {
    let ids: Vec<ProductId> = products.iter().map(|p| p.id.clone()).collect();
    let prices = store::prices_of(db, &ids).await?;
    Ok(products
        .into_iter()
        .map(|p| {
            let own = prices
                .iter()
                .filter(|x| x.product_id == p.id && (x.active || !active_only))
                .map(|x| render_price(x, p.default_price_id.as_deref()))
                .collect();
            let images: Vec<String> = p.images.iter().map(ToString::to_string).collect();
            Product {
                product_id: p.id.to_string(),
                version: p.version,
                profile_id: p.profile_id.to_string(),
                name: p.name.clone(),
                description: p.description.clone(),
                active: p.active,
                category_id: p.category_id.as_ref().map(ToString::to_string),
                default_price_id: p.default_price_id.as_ref().map(ToString::to_string),
                prices: own,
                addon_groups: store::groups(&p),
                bundle: store::components(&p).map(|components| super::api::Bundle { components }),
                image_urls: images
                    .iter()
                    .map(|i| format!("{public_url}/products/images/{i}"))
                    .collect(),
                images,
                metadata: shown(p.metadata.as_ref()),
                external_id: p.external_id.clone(),
                test_mode: p.test_mode,
                created_at: p.created_at,
                updated_at: p.updated_at,
            }
        })
        .collect())
}

pub fn render_price(p: &price::Model, default: Option<&str>) -> Price {
    Price {
        price_id: p.id.to_string(),
        product_id: p.product_id.to_string(),
        unit_amount: p.unit_amount,
        currency: p.currency.clone(),
        recurring: p.recurring_interval.as_ref().map(|i| Recurring {
            interval: i.to_string(),
            interval_count: p.recurring_interval_count.unwrap_or(1),
        }),
        nickname: p.nickname.clone(),
        metadata: shown(p.metadata.as_ref()),
        active: p.active,
        default: default == Some(p.id.as_str()),
        external_id: p.external_id.clone(),
        test_mode: p.test_mode,
        created_at: p.created_at,
        updated_at: p.updated_at,
    }
}

/// Stored metadata as shown: an object, empty when none was set.
fn shown(stored: Option<&Json<Metadata>>) -> Metadata {
    stored.map(|m| m.0.clone()).unwrap_or_default()
}

/// A new price row of `p`.
fn price_row(p: &product::Model, ask: &NewPrice, now: DateTime<Utc>) -> price::Model {
    price::Model {
        id: PriceId::new(),
        product_id: p.id.clone(),
        merchant_id: p.merchant_id.clone(),
        profile_id: p.profile_id.clone(),
        test_mode: p.test_mode,
        unit_amount: ask.unit_amount,
        currency: ask.currency.clone(),
        recurring_interval: ask.recurring.as_ref().map(|r| r.0),
        recurring_interval_count: ask.recurring.as_ref().map(|r| r.1),
        nickname: ask.nickname.clone(),
        metadata: ask.metadata.clone().map(Json),
        active: true,
        external_id: None,
        created_at: now,
        updated_at: now,
    }
}

/// Images of the caller's merchant and mode, as stored.
async fn check_images(
    db: &Db,
    scope: &Scope,
    images: &[String],
) -> Result<Json<Vec<ImageId>>, CatalogError> {
    let mut ids = Vec::with_capacity(images.len());
    for id in images {
        let found = match ImageId::parse(id) {
            Some(id) => store::find_image(db, &id).await?,
            None => None,
        };
        match found {
            Some(i)
                if i.merchant_id == scope.merchant_id.as_str()
                    && i.test_mode == scope.test_mode =>
            {
                ids.push(i.id)
            }
            _ => return Err(not_found("image", "images")),
        }
    }
    Ok(Json(ids))
}

/// A category of the product's shop.
async fn check_category(
    db: &Db,
    scope: &Scope,
    shop: &ProfileId,
    id: &str,
    param: &str,
) -> Result<product_category::Model, CatalogError> {
    match CategoryId::parse(id) {
        Some(id) => store::find_category(db, &id, scope).await?,
        None => None,
    }
    .filter(|c| c.profile_id == *shop)
    .ok_or_else(|| not_found("category", param))
}

/// `POST /products`: the product with its prices, in one commit.
pub async fn create(
    db: &Db,
    scope: &Scope,
    ask: NewProduct,
    max_products: u64,
    now: DateTime<Utc>,
) -> Result<product::Model, CatalogError> {
    let category_id = match &ask.category_id {
        Some(c) => Some(
            check_category(db, scope, &ask.shop, c, "category_id")
                .await?
                .id,
        ),
        None => None,
    };
    let mut p = product::Model {
        id: ProductId::new(),
        merchant_id: scope.merchant_id.clone(),
        profile_id: ask.shop,
        test_mode: scope.test_mode,
        name: ask.name,
        description: ask.description,
        category_id,
        metadata: ask.metadata.map(Json),
        images: check_images(db, scope, &ask.images).await?,
        active: true,
        default_price_id: None,
        bundle: None,
        addon_groups: Default::default(),
        external_id: None,
        version: 1,
        created_at: now,
        updated_at: now,
    };
    let prices: Vec<price::Model> = ask.prices.iter().map(|x| price_row(&p, x, now)).collect();
    // The parse let at most one be the default; none: the first.
    let default = ask.prices.iter().position(|x| x.default).unwrap_or(0);
    p.default_price_id = prices.get(default).map(|x| x.id.clone());
    store::insert(db, &p, &prices, now, max_products).await?;
    Ok(p)
}

/// One change of a product: read it and its prices, decide, commit under its version; again
/// after a lost race.
async fn change<T>(
    db: &Db,
    scope: &Scope,
    id: &str,
    now: DateTime<Utc>,
    decide: impl AsyncFn(
        &product::Model,
        &[price::Model],
    ) -> Result<(product::Model, Vec<Write>, T), CatalogError>,
) -> Result<(product::Model, T), CatalogError> {
    commit::retrying(TRIES, || async {
        let before = owned(db, scope, id).await?;
        let prices = store::prices_of(db, std::slice::from_ref(&before.id)).await?;
        let (mut after, writes, out) = decide(&before, &prices).await?;
        after.updated_at = now;
        match store::commit(db, &before, after, writes).await {
            Ok(p) => Ok(Some((p, out))),
            // A lost race, or a condition of the change that no longer holds (a bundle took
            // the product meanwhile): decide again on what is there now, which names why.
            Err(
                CommitError::LostRace
                | CommitError::Refused(Conflict::ProductInUse | Conflict::PriceInUse),
            ) => Ok(None),
            Err(e) => Err(e.into()),
        }
    })
    .await
}

/// Refuses to take `id` (`p` or one of its prices) off sale while a bundle or an add-on group
/// of the shop holds one of `ids`, naming them.
async fn check_not_held(
    db: &Db,
    p: &product::Model,
    what: &'static str,
    id: &str,
    ids: &[String],
) -> Result<(), CatalogError> {
    let holders = store::holders(db, p, ids).await?;
    if holders.is_empty() {
        return Ok(());
    }
    let named = |x: &Option<String>| x.as_ref().is_some_and(|x| ids.contains(x));
    let mut described = Vec::new();
    for h in &holders {
        let components = store::components(h).unwrap_or_default();
        if components
            .iter()
            .any(|c| named(&c.product_id) || named(&c.price_id))
        {
            described.push(format!("bundle {}", h.id));
        }
        for g in store::groups(h) {
            if g.products.iter().chain(&g.prices).any(|m| ids.contains(m)) {
                described.push(format!("add-on group {} of {}", g.group_id, h.id));
            }
        }
    }
    Err(Refusal::InUse {
        what,
        id: id.to_owned(),
        holders: described,
    }
    .into())
}

/// The product's id and its prices' ids: what a bundle or add-on group may name of it.
fn own_ids(p: &product::Model, prices: &[price::Model]) -> Vec<String> {
    std::iter::once(p.id.to_string())
        .chain(prices.iter().map(|x| x.id.to_string()))
        .collect()
}

/// The price of this product, or 404.
fn price_of<'a>(
    prices: &'a [price::Model],
    price_id: &str,
    param: &str,
) -> Result<&'a price::Model, CatalogError> {
    prices
        .iter()
        .find(|p| p.id == price_id)
        .ok_or_else(|| not_found("price", param))
}

/// `POST /products/{product_id}`.
pub async fn update(
    db: &Db,
    scope: &Scope,
    id: &str,
    patch: &ProductPatch,
    now: DateTime<Utc>,
) -> Result<product::Model, CatalogError> {
    let images = match &patch.images {
        Some(i) => Some(check_images(db, scope, i).await?),
        None => None,
    };
    let (p, ()) = change(db, scope, id, now, async |p, prices| {
        let mut after = p.clone();
        if let Some(n) = &patch.name {
            after.name = n.clone();
        }
        if patch.description.is_some() {
            after.description = patch.description.clone();
        }
        if patch.metadata.is_some() {
            after.metadata = patch.metadata.clone().map(Json);
        }
        if let Some(i) = &images {
            after.images = i.clone();
        }
        match patch.category_id.as_deref() {
            Some("") => after.category_id = None,
            Some(c) => {
                let found = check_category(db, scope, &p.profile_id, c, "category_id").await?;
                after.category_id = Some(found.id);
            }
            None => {}
        }
        if let Some(d) = &patch.default_price_id {
            let price = price_of(prices, d, "default_price_id")?;
            if !price.active {
                return Err(archived_price(price, "the default", "default_price_id"));
            }
            after.default_price_id = Some(price.id.clone());
        }
        Ok((after, vec![], ()))
    })
    .await?;
    Ok(p)
}

fn archived_price(p: &price::Model, use_: &'static str, param: &str) -> CatalogError {
    Refusal::Archived {
        what: "price",
        id: p.id.to_string(),
        use_,
        param: param.to_owned(),
    }
    .into()
}

/// `POST …/archive` and `…/restore`.
pub async fn set_active(
    db: &Db,
    scope: &Scope,
    id: &str,
    active: bool,
    now: DateTime<Utc>,
) -> Result<product::Model, CatalogError> {
    let (p, ()) = change(db, scope, id, now, async |p, prices| {
        let mut after = p.clone();
        after.active = active;
        if active {
            return Ok((after, vec![], ()));
        }
        let ids = own_ids(p, prices);
        check_not_held(db, p, "product", &p.id, &ids).await?;
        Ok((
            after,
            vec![store::not_held(p, &ids, Conflict::ProductInUse)],
            (),
        ))
    })
    .await?;
    Ok(p)
}

/// `DELETE /products/{product_id}`: only a product no payment line names.
pub async fn delete(
    db: &Db,
    scope: &Scope,
    id: &str,
    now: DateTime<Utc>,
) -> Result<(), CatalogError> {
    // The store's commit refuses a product on a payment line or held by a bundle or an
    // add-on group: the checks that hold, inside it; the read before only names the holders.
    let p = owned(db, scope, id).await?;
    let prices = store::prices_of(db, std::slice::from_ref(&p.id)).await?;
    let ids = own_ids(&p, &prices);
    check_not_held(db, &p, "product", &p.id, &ids).await?;
    match store::delete(db, &p, &ids[1..], now).await {
        Ok(()) => Ok(()),
        Err(CommitError::Refused(Conflict::ProductHasSales)) => Err(Refusal::HasSales.into()),
        Err(CommitError::Refused(Conflict::ProductInUse)) => {
            check_not_held(db, &p, "product", &p.id, &ids).await?;
            Err(CommitError::Refused(Conflict::ProductInUse).into())
        }
        Err(e) => Err(e.into()),
    }
}

/// `POST /products/{product_id}/prices`.
pub async fn add_price(
    db: &Db,
    scope: &Scope,
    id: &str,
    ask: &NewPrice,
    now: DateTime<Utc>,
) -> Result<(product::Model, price::Model), CatalogError> {
    change(db, scope, id, now, async |p, prices| {
        if prices.len() >= MAX_PRICES * 5 {
            return Err(CatalogError::Limit {
                what: "prices per product",
                max: (MAX_PRICES * 5) as u64,
            });
        }
        let row = price_row(p, ask, now);
        let mut after = p.clone();
        if ask.default || p.default_price_id.is_none() {
            after.default_price_id = Some(row.id.clone());
        }
        Ok((after, vec![commit::insert(row.clone())], row))
    })
    .await
}

/// `POST /products/{product_id}/prices/{price_id}`: nickname, metadata, the default flag.
pub async fn update_price(
    db: &Db,
    scope: &Scope,
    id: &str,
    price_id: &str,
    patch: &PricePatch,
    now: DateTime<Utc>,
) -> Result<(product::Model, price::Model), CatalogError> {
    change(db, scope, id, now, async |p, prices| {
        let mut row = price_of(prices, price_id, "price_id")?.clone();
        let mut after = p.clone();
        match patch.default {
            Some(true) if !row.active => {
                return Err(archived_price(&row, "the default", "default"))
            }
            Some(true) => after.default_price_id = Some(row.id.clone()),
            Some(false) if p.default_price_id.as_deref() == Some(price_id) => {
                return Err(invalid("default", "make another price the default instead"))
            }
            _ => {}
        }
        if patch.nickname.is_some() {
            row.nickname = patch.nickname.clone();
        }
        if patch.metadata.is_some() {
            row.metadata = patch.metadata.clone().map(Json);
        }
        row.updated_at = now;
        Ok((after, vec![store::price_update(row.clone())], row))
    })
    .await
}

/// `POST …/prices/{price_id}/archive`: never the default price.
pub async fn archive_price(
    db: &Db,
    scope: &Scope,
    id: &str,
    price_id: &str,
    now: DateTime<Utc>,
) -> Result<(product::Model, price::Model), CatalogError> {
    change(db, scope, id, now, async |p, prices| {
        let mut row = price_of(prices, price_id, "price_id")?.clone();
        machine::archive_price(p.default_price_id.as_deref() == Some(price_id))?;
        let ids = [row.id.to_string()];
        check_not_held(db, p, "price", &row.id, &ids).await?;
        row.active = false;
        row.updated_at = now;
        let writes = vec![
            store::price_update(row.clone()),
            store::not_held(p, &ids, Conflict::PriceInUse),
        ];
        Ok((p.clone(), writes, row))
    })
    .await
}

/// The members of an add-on group: active products and prices (of active products) of the same
/// shop, never the product itself or its own prices. Returns the writes that hold them on sale
/// until the group is committed.
async fn check_members(
    db: &Db,
    scope: &Scope,
    p: &product::Model,
    input: &AddonGroupInput,
) -> Result<Vec<Write>, CatalogError> {
    let mut held = Vec::new();
    machine::check_addon_group(
        &input.name,
        input.min_selections,
        input.max_selections,
        &input.products,
        &input.prices,
    )?;
    for (i, m) in input.products.iter().enumerate() {
        let param = format!("products[{i}]");
        if m == &p.id {
            return Err(invalid(&param, "a product is not its own add-on"));
        }
        let member = sibling_product(db, scope, p, m, &param).await?;
        if !member.active {
            return Err(archived_product(&member, "an add-on", &param));
        }
        held.extend(store::on_sale(Some(&member.id), None));
    }
    for (i, m) in input.prices.iter().enumerate() {
        let param = format!("prices[{i}]");
        let price = sibling_price(db, scope, p, m, &param).await?;
        if price.product_id == p.id {
            return Err(invalid(&param, "a product's own price is not its add-on"));
        }
        if !price.active {
            return Err(archived_price(&price, "an add-on", &param));
        }
        owner_on_sale(db, &price, "an add-on", &param).await?;
        held.extend(store::on_sale(Some(&price.product_id), Some(&price.id)));
    }
    Ok(held)
}

/// A price's product must be on sale for the price to be a member or component.
async fn owner_on_sale(
    db: &Db,
    price: &price::Model,
    use_: &'static str,
    param: &str,
) -> Result<(), CatalogError> {
    match store::find(db, &price.product_id).await? {
        Some(owner) if !owner.active => Err(archived_product(&owner, use_, param)),
        Some(_) => Ok(()),
        None => Err(not_found("price", param)),
    }
}

fn archived_product(p: &product::Model, use_: &'static str, param: &str) -> CatalogError {
    Refusal::Archived {
        what: "product",
        id: p.id.to_string(),
        use_,
        param: param.to_owned(),
    }
    .into()
}

/// Another product of `p`'s shop, or 404 naming `param`.
async fn sibling_product(
    db: &Db,
    scope: &Scope,
    p: &product::Model,
    id: &str,
    param: &str,
) -> Result<product::Model, CatalogError> {
    match crate::ids::ProductId::parse(id) {
        Some(id) => crate::owned::find_owned(db, &id, scope).await?,
        None => None,
    }
    .filter(|x| x.profile_id == p.profile_id)
    .ok_or_else(|| not_found("product", param))
}

/// A price of `p`'s shop, or 404 naming `param`.
async fn sibling_price(
    db: &Db,
    scope: &Scope,
    p: &product::Model,
    id: &str,
    param: &str,
) -> Result<price::Model, CatalogError> {
    match PriceId::parse(id) {
        Some(id) => store::find_price(db, &id).await?,
        None => None,
    }
    .filter(|x| {
        scope.sees(&x.merchant_id, x.test_mode, &x.profile_id) && x.profile_id == p.profile_id
    })
    .ok_or_else(|| not_found("price", param))
}

/// Adds (`group_id: None`) or replaces an add-on group.
pub async fn put_group(
    db: &Db,
    scope: &Scope,
    id: &str,
    group_id: Option<&str>,
    input: &AddonGroupInput,
    now: DateTime<Utc>,
) -> Result<AddonGroup, CatalogError> {
    let (_, group) = change(db, scope, id, now, async |p, _| {
        let held = check_members(db, scope, p, input).await?;
        let mut groups = store::groups(p);
        let group = AddonGroup {
            group_id: group_id.map_or_else(|| new_id("grp"), str::to_owned),
            name: input.name.trim().to_owned(),
            min_selections: input.min_selections,
            max_selections: input.max_selections,
            products: input.products.clone(),
            prices: input.prices.clone(),
            test_mode: p.test_mode,
        };
        match group_id {
            Some(g) => {
                let slot = groups
                    .iter_mut()
                    .find(|x| x.group_id == g)
                    .ok_or_else(|| not_found("add-on group", "group_id"))?;
                *slot = group.clone();
            }
            None if groups.len() >= MAX_GROUPS => {
                return Err(CatalogError::Limit {
                    what: "add-on groups per product",
                    max: MAX_GROUPS as u64,
                })
            }
            None => groups.push(group.clone()),
        }
        let mut after = p.clone();
        after.addon_groups = Json(groups);
        Ok((after, held, group))
    })
    .await?;
    Ok(group)
}

/// Removes an add-on group.
pub async fn remove_group(
    db: &Db,
    scope: &Scope,
    id: &str,
    group_id: &str,
    now: DateTime<Utc>,
) -> Result<(), CatalogError> {
    change(db, scope, id, now, async |p, _| {
        let mut groups = store::groups(p);
        let before = groups.len();
        groups.retain(|g| g.group_id != group_id);
        if groups.len() == before {
            return Err(not_found("add-on group", "group_id"));
        }
        let mut after = p.clone();
        after.addon_groups = Json(groups);
        Ok((after, vec![], ()))
    })
    .await?;
    Ok(())
}

/// `POST /products/{product_id}/bundle`: components of the same shop, on sale, without a
/// cycle through other bundles.
pub async fn set_bundle(
    db: &Db,
    scope: &Scope,
    id: &str,
    components: &[Component],
    now: DateTime<Utc>,
) -> Result<product::Model, CatalogError> {
    let (p, ()) = change(db, scope, id, now, async |p, _| {
        let mut targets = Vec::with_capacity(components.len());
        let mut held = Vec::new();
        for (i, c) in components.iter().enumerate() {
            let param = |f: &str| format!("components[{i}].{f}");
            let product_id = match (&c.product_id, &c.price_id) {
                (Some(prod), None) => {
                    if prod == &p.id {
                        return Err(
                            Refusal::BundleCycle(vec![p.id.to_string(), p.id.to_string()]).into(),
                        );
                    }
                    let member = sibling_product(db, scope, p, prod, &param("product_id")).await?;
                    if !member.active {
                        return Err(archived_product(
                            &member,
                            "a component",
                            &param("product_id"),
                        ));
                    }
                    held.extend(store::on_sale(Some(&member.id), None));
                    member.id
                }
                (None, Some(price)) => {
                    let price = sibling_price(db, scope, p, price, &param("price_id")).await?;
                    if !price.active {
                        return Err(archived_price(&price, "a component", &param("price_id")));
                    }
                    owner_on_sale(db, &price, "a component", &param("price_id")).await?;
                    held.extend(store::on_sale(Some(&price.product_id), Some(&price.id)));
                    price.product_id
                }
                // The parse let through only one of the two.
                _ => {
                    return Err(invalid(
                        &format!("components[{i}]"),
                        "a component names a product_id or a price_id, not both",
                    ))
                }
            };
            targets.push(product_id.to_string());
        }
        let graph = store::bundle_graph(db, &p.merchant_id, p.test_mode, &p.profile_id).await?;
        if let Some(cycle) = machine::find_cycle(&p.id, &targets, &graph) {
            return Err(Refusal::BundleCycle(cycle).into());
        }
        let mut after = p.clone();
        after.bundle = (!components.is_empty()).then(|| Json(components.to_vec()));
        Ok((after, held, ()))
    })
    .await?;
    Ok(p)
}

/// `POST /products/categories`.
pub async fn create_category(
    db: &Db,
    scope: &Scope,
    ask: NewCategory,
    now: DateTime<Utc>,
) -> Result<product_category::Model, CatalogError> {
    let parent_id = match &ask.parent_id {
        Some(parent) => {
            let parent = check_category(db, scope, &ask.shop, parent, "parent_id").await?;
            if parent.parent_id.is_some() {
                return Err(invalid(
                    "parent_id",
                    "categories nest one level: the parent must be a top-level category",
                ));
            }
            Some(parent.id)
        }
        None => None,
    };
    let c = product_category::Model {
        id: CategoryId::new(),
        merchant_id: scope.merchant_id.clone(),
        profile_id: ask.shop,
        test_mode: scope.test_mode,
        name: ask.name,
        parent_id,
        created_at: now,
    };
    store::insert_category(db, &c).await?;
    Ok(c)
}

/// A refusal about one field.
fn invalid(param: &str, message: &str) -> CatalogError {
    Refusal::Invalid {
        param: param.to_owned(),
        message: message.to_owned(),
    }
    .into()
}

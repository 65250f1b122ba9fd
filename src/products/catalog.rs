//! The catalog's changes: each reads the product and its prices, decides with the checks of
//! `machine.rs` and the shop's other objects, and commits under the product's version — again
//! from the read after a lost race (`commit::retrying`).

use chrono::{DateTime, Utc};
use payd_entity::{price, product, product_category};

use super::{
    api::{
        AddonGroup, AddonGroupInput, Component, CreateCategoryRequest, CreateProductRequest, Price,
        PriceInput, Product, Recurring, UpdatePriceRequest, UpdateProductRequest,
    },
    machine::{self, Refusal},
    store::{self, HAS_SALES, PRICE_IN_USE, PRODUCT_IN_USE},
};
use crate::commit::Db;
use crate::{
    auth::keys::{Caller, Scope},
    commit::{self, CommitError, Write},
    error::ApiError,
    fields::{check_metadata, check_text, parse_amount, parse_currency, Metadata},
    ids::new_id,
};

/// Reads and commits of one change before giving up to concurrent writers.
const TRIES: usize = 5;

/// At most this many prices per product, images per product and components per bundle.
pub const MAX_PRICES: usize = 20;
pub const MAX_IMAGES: usize = 8;
pub const MAX_COMPONENTS: usize = 50;
pub const MAX_GROUPS: usize = 20;

impl From<Refusal> for ApiError {
    #[track_caller]
    fn from(r: Refusal) -> Self {
        match r {
            Refusal::Invalid { param, message } => ApiError::invalid_param(&param, message),
            Refusal::Archived { ref param, .. } => {
                ApiError::invalid("archived", r.to_string()).param(param.clone())
            }
            Refusal::DefaultPrice => ApiError::conflict("default_price", r.to_string()),
            Refusal::HasSales => ApiError::conflict(HAS_SALES, r.to_string()),
            Refusal::BundleCycle(_) => {
                ApiError::invalid("bundle_cycle", r.to_string()).param("components")
            }
            Refusal::InUse { what: "price", .. } => {
                ApiError::conflict(PRICE_IN_USE, r.to_string()).param("price_id")
            }
            Refusal::InUse { .. } => {
                ApiError::conflict(PRODUCT_IN_USE, r.to_string()).param("product_id")
            }
        }
    }
}

fn not_found(what: &str, param: &str) -> ApiError {
    ApiError::not_found(what).param(param)
}

/// A product of the caller's scope, or 404.
pub async fn owned(db: &Db, scope: &Scope, id: &str) -> Result<product::Model, ApiError> {
    if crate::ids::ProductId::parse(id).is_none() {
        return Err(not_found("product", "product_id"));
    }
    store::find_owned(db, id, scope)
        .await?
        .ok_or_else(|| not_found("product", "product_id"))
}

/// The product as shown: with every price (`active_only`: the active ones).
pub async fn render(
    db: &Db,
    public_url: &str,
    products: Vec<product::Model>,
    active_only: bool,
) -> Result<Vec<Product>, ApiError> {
    let ids: Vec<String> = products.iter().map(|p| p.id.clone()).collect();
    let prices = store::prices_of(db, &ids).await?;
    products
        .into_iter()
        .map(|p| {
            let own = prices
                .iter()
                .filter(|x| x.product_id == p.id && (x.active || !active_only))
                .map(|x| render_price(x, p.default_price_id.as_deref()))
                .collect::<Result<_, _>>()?;
            let images = store::images(&p)?;
            Ok(Product {
                product_id: p.id.clone(),
                version: p.version,
                profile_id: p.profile_id.clone(),
                name: p.name.clone(),
                description: p.description.clone(),
                active: p.active,
                category_id: p.category_id.clone(),
                default_price_id: p.default_price_id.clone(),
                prices: own,
                addon_groups: store::groups(&p)?,
                bundle: store::components(&p)?.map(|components| super::api::Bundle { components }),
                image_urls: images
                    .iter()
                    .map(|i| format!("{public_url}/products/images/{i}"))
                    .collect(),
                images,
                metadata: parse_metadata(&p.id, p.metadata.as_deref())?,
                external_id: p.external_id.clone(),
                test_mode: p.test_mode,
                created_at: p.created_at,
                updated_at: p.updated_at,
            })
        })
        .collect()
}

pub fn render_price(p: &price::Model, default: Option<&str>) -> Result<Price, sea_orm::DbErr> {
    Ok(Price {
        price_id: p.id.clone(),
        product_id: p.product_id.clone(),
        unit_amount: p.unit_amount,
        currency: p.currency.clone(),
        recurring: p.recurring_interval.as_ref().map(|i| Recurring {
            interval: i.clone(),
            interval_count: p.recurring_interval_count.unwrap_or(1),
        }),
        nickname: p.nickname.clone(),
        metadata: parse_metadata(&p.id, p.metadata.as_deref())?,
        active: p.active,
        default: default == Some(p.id.as_str()),
        external_id: p.external_id.clone(),
        test_mode: p.test_mode,
        created_at: p.created_at,
        updated_at: p.updated_at,
    })
}

/// Stored metadata as shown: an object, empty when none was set.
fn parse_metadata(id: &str, stored: Option<&str>) -> Result<Metadata, sea_orm::DbErr> {
    crate::stored::json_opt("metadata", id, stored).map(Option::unwrap_or_default)
}

fn metadata_json(md: Option<&Metadata>) -> Result<Option<String>, ApiError> {
    check_metadata(md)
}

fn check_name(param: &str, name: &str, max: usize) -> Result<String, ApiError> {
    let n = name.trim();
    if n.is_empty() || name.chars().count() > max {
        return Err(ApiError::invalid_param(
            param,
            format!("{param} must be 1 to {max} characters"),
        ));
    }
    Ok(n.to_owned())
}

/// A new price row of `p` from its input (`param`: where it is in the request, `""` when it is
/// the whole body).
pub fn new_price(
    p: &product::Model,
    input: &PriceInput,
    param: &str,
    max_amount: i64,
    now: DateTime<Utc>,
) -> Result<price::Model, ApiError> {
    let at = |f: &str| match param {
        "" => f.to_owned(),
        _ => format!("{param}.{f}"),
    };
    // A free price (0) is a price, as in Stripe's catalog: the rule is 0 to the maximum, and
    // the refusal says so (`parse_amount` alone would refuse 0 and say "greater than 0").
    if input.unit_amount < 0 {
        return Err(ApiError::invalid_param(
            &at("unit_amount"),
            format!("unit_amount must be 0 or more (0 to {max_amount} minor units)"),
        ));
    }
    if input.unit_amount != 0 {
        parse_amount(&at("unit_amount"), input.unit_amount, max_amount)?;
    }
    let currency = parse_currency(&at("currency"), &input.currency)?;
    let recurring = match &input.recurring {
        Some(r) => {
            machine::check_recurring(&at("recurring"), &r.interval, r.interval_count)?;
            Some((r.interval.clone(), r.interval_count))
        }
        None => None,
    };
    Ok(price::Model {
        id: new_id("price"),
        product_id: p.id.clone(),
        merchant_id: p.merchant_id.clone(),
        profile_id: p.profile_id.clone(),
        test_mode: p.test_mode,
        unit_amount: input.unit_amount,
        currency,
        recurring_interval: recurring.as_ref().map(|r| r.0.clone()),
        recurring_interval_count: recurring.map(|r| r.1),
        nickname: check_text(&at("nickname"), input.nickname.as_ref(), 250)?,
        metadata: metadata_json(input.metadata.as_ref())?,
        active: true,
        external_id: None,
        created_at: now,
        updated_at: now,
    })
}

/// Images of the caller's merchant and mode, at most [`MAX_IMAGES`].
async fn check_images(db: &Db, scope: &Scope, images: &[String]) -> Result<String, ApiError> {
    if images.len() > MAX_IMAGES {
        return Err(ApiError::invalid_param(
            "images",
            format!("at most {MAX_IMAGES} images"),
        ));
    }
    for id in images {
        let found = match crate::ids::ImageId::parse(id) {
            Some(_) => store::find_image(db, id).await?,
            None => None,
        };
        if !found
            .is_some_and(|i| i.merchant_id == scope.merchant_id && i.test_mode == scope.test_mode)
        {
            return Err(not_found("image", "images"));
        }
    }
    Ok(serde_json::to_string(images).unwrap_or_else(|_| "[]".into()))
}

/// A category of the product's shop.
async fn check_category(
    db: &Db,
    scope: &Scope,
    shop: &str,
    id: &str,
) -> Result<product_category::Model, ApiError> {
    match crate::ids::CategoryId::parse(id) {
        Some(_) => store::find_category(db, id, scope).await?,
        None => None,
    }
    .filter(|c| c.profile_id == shop)
    .ok_or_else(|| not_found("category", "category_id"))
}

/// `POST /products`: the product with its prices, in one commit.
pub async fn create(
    db: &Db,
    caller: &Caller,
    req: CreateProductRequest,
    max_amount: i64,
    max_products: u64,
    now: DateTime<Utc>,
) -> Result<product::Model, ApiError> {
    let shop = caller.require_shop()?.to_string();
    let scope = caller.scope();
    let name = check_name("name", &req.name, 250)?;
    if req.prices.is_empty() || req.prices.len() > MAX_PRICES {
        return Err(ApiError::invalid_param(
            "prices",
            format!("a product has 1 to {MAX_PRICES} prices"),
        ));
    }
    if let Some(c) = &req.category_id {
        check_category(db, &scope, &shop, c).await?;
    }
    let mut p = product::Model {
        id: new_id("prod"),
        merchant_id: scope.merchant_id.clone(),
        profile_id: shop,
        test_mode: scope.test_mode,
        name,
        description: check_text("description", req.description.as_ref(), 5000)?,
        category_id: req.category_id.clone(),
        metadata: metadata_json(req.metadata.as_ref())?,
        images: check_images(db, &scope, req.images.as_deref().unwrap_or_default()).await?,
        active: true,
        default_price_id: None,
        bundle: None,
        addon_groups: "[]".into(),
        external_id: None,
        version: 1,
        created_at: now,
        updated_at: now,
    };
    let mut prices = Vec::with_capacity(req.prices.len());
    let mut default = None;
    for (i, input) in req.prices.iter().enumerate() {
        let row = new_price(&p, input, &format!("prices[{i}]"), max_amount, now)?;
        if input.default == Some(true) {
            if default.is_some() {
                return Err(ApiError::invalid_param(
                    &format!("prices[{i}].default"),
                    "only one price can be the default",
                ));
            }
            default = Some(row.id.clone());
        }
        prices.push(row);
    }
    p.default_price_id = default.or_else(|| prices.first().map(|x| x.id.clone()));
    store::insert(db, &p, &prices, now, max_products)
        .await
        .map_err(|e| match e {
            CommitError::Refused(bound) => ApiError::limit_reached(bound, max_products),
            other => other.into(),
        })?;
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
    ) -> Result<(product::Model, Vec<Write>, T), ApiError>,
) -> Result<(product::Model, T), ApiError> {
    commit::retrying(TRIES, || async {
        let before = owned(db, scope, id).await?;
        let prices = store::prices_of(db, std::slice::from_ref(&before.id)).await?;
        let (mut after, writes, out) = decide(&before, &prices).await?;
        after.updated_at = now;
        match store::commit(db, &before, after, writes).await {
            Ok(p) => Ok(Some((p, out))),
            // A lost race, or a condition of the change that no longer holds (a bundle took
            // the product meanwhile): decide again on what is there now, which names why.
            Err(CommitError::LostRace | CommitError::Refused(_)) => Ok(None),
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
) -> Result<(), ApiError> {
    let holders = store::holders(db, p, ids).await?;
    if holders.is_empty() {
        return Ok(());
    }
    let named = |x: &Option<String>| x.as_ref().is_some_and(|x| ids.contains(x));
    let mut described = Vec::new();
    for h in &holders {
        let components = store::components(h)?.unwrap_or_default();
        if components
            .iter()
            .any(|c| named(&c.product_id) || named(&c.price_id))
        {
            described.push(format!("bundle {}", h.id));
        }
        for g in store::groups(h)? {
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
    std::iter::once(p.id.clone())
        .chain(prices.iter().map(|x| x.id.clone()))
        .collect()
}

/// The price of this product, or 404.
fn price_of<'a>(prices: &'a [price::Model], price_id: &str) -> Result<&'a price::Model, ApiError> {
    prices
        .iter()
        .find(|p| p.id == price_id)
        .ok_or_else(|| not_found("price", "price_id"))
}

/// `POST /products/{product_id}`.
pub async fn update(
    db: &Db,
    scope: &Scope,
    id: &str,
    req: &UpdateProductRequest,
    now: DateTime<Utc>,
) -> Result<product::Model, ApiError> {
    let name = req
        .name
        .as_deref()
        .map(|n| check_name("name", n, 250))
        .transpose()?;
    let description = check_text("description", req.description.as_ref(), 5000)?;
    let metadata = metadata_json(req.metadata.as_ref())?;
    let images = match &req.images {
        Some(i) => Some(check_images(db, scope, i).await?),
        None => None,
    };
    let (p, ()) = change(db, scope, id, now, async |p, prices| {
        let mut after = p.clone();
        if let Some(n) = &name {
            after.name = n.clone();
        }
        if description.is_some() {
            after.description = description.clone();
        }
        if metadata.is_some() {
            after.metadata = metadata.clone();
        }
        if let Some(i) = &images {
            after.images = i.clone();
        }
        match req.category_id.as_deref() {
            Some("") => after.category_id = None,
            Some(c) => {
                check_category(db, scope, &p.profile_id, c).await?;
                after.category_id = Some(c.to_owned());
            }
            None => {}
        }
        if let Some(d) = &req.default_price_id {
            let price = price_of(prices, d).map_err(|e| e.param("default_price_id"))?;
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

fn archived_price(p: &price::Model, use_: &'static str, param: &str) -> ApiError {
    Refusal::Archived {
        what: "price",
        id: p.id.clone(),
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
) -> Result<product::Model, ApiError> {
    let (p, ()) = change(db, scope, id, now, async |p, prices| {
        let mut after = p.clone();
        after.active = active;
        if active {
            return Ok((after, vec![], ()));
        }
        let ids = own_ids(p, prices);
        check_not_held(db, p, "product", &p.id, &ids).await?;
        Ok((after, vec![store::not_held(p, &ids, PRODUCT_IN_USE)], ()))
    })
    .await?;
    Ok(p)
}

/// `DELETE /products/{product_id}`: only a product no payment line names.
pub async fn delete(db: &Db, scope: &Scope, id: &str, now: DateTime<Utc>) -> Result<(), ApiError> {
    // The store's commit refuses a product on a payment line or held by a bundle or an
    // add-on group: the checks that hold, inside it; the read before only names the holders.
    let p = owned(db, scope, id).await?;
    let prices = store::prices_of(db, std::slice::from_ref(&p.id)).await?;
    let ids = own_ids(&p, &prices);
    check_not_held(db, &p, "product", &p.id, &ids).await?;
    match store::delete(db, &p, &ids[1..], now).await {
        Ok(()) => Ok(()),
        Err(CommitError::Refused(HAS_SALES)) => Err(Refusal::HasSales.into()),
        Err(CommitError::Refused(PRODUCT_IN_USE)) => {
            check_not_held(db, &p, "product", &p.id, &ids).await?;
            Err(CommitError::Refused(PRODUCT_IN_USE).into())
        }
        Err(e) => Err(e.into()),
    }
}

/// `POST /products/{product_id}/prices`.
pub async fn add_price(
    db: &Db,
    scope: &Scope,
    id: &str,
    input: &PriceInput,
    max_amount: i64,
    now: DateTime<Utc>,
) -> Result<(product::Model, price::Model), ApiError> {
    change(db, scope, id, now, async |p, prices| {
        if prices.len() >= MAX_PRICES * 5 {
            return Err(ApiError::limit_reached(
                "prices per product",
                MAX_PRICES * 5,
            ));
        }
        // The request body is the price itself: its fields are named as they are.
        let row = new_price(p, input, "", max_amount, now)?;
        let mut after = p.clone();
        if input.default == Some(true) || p.default_price_id.is_none() {
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
    req: &UpdatePriceRequest,
    now: DateTime<Utc>,
) -> Result<(product::Model, price::Model), ApiError> {
    let nickname = check_text("nickname", req.nickname.as_ref(), 250)?;
    let metadata = metadata_json(req.metadata.as_ref())?;
    change(db, scope, id, now, async |p, prices| {
        let mut row = price_of(prices, price_id)?.clone();
        let mut after = p.clone();
        match req.default {
            Some(true) if !row.active => {
                return Err(archived_price(&row, "the default", "default"))
            }
            Some(true) => after.default_price_id = Some(row.id.clone()),
            Some(false) if p.default_price_id.as_deref() == Some(price_id) => {
                return Err(ApiError::invalid_param(
                    "default",
                    "make another price the default instead",
                ))
            }
            _ => {}
        }
        if nickname.is_some() {
            row.nickname = nickname.clone();
        }
        if metadata.is_some() {
            row.metadata = metadata.clone();
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
) -> Result<(product::Model, price::Model), ApiError> {
    change(db, scope, id, now, async |p, prices| {
        let mut row = price_of(prices, price_id)?.clone();
        machine::archive_price(p.default_price_id.as_deref() == Some(price_id))?;
        let ids = [row.id.clone()];
        check_not_held(db, p, "price", &row.id, &ids).await?;
        row.active = false;
        row.updated_at = now;
        let writes = vec![
            store::price_update(row.clone()),
            store::not_held(p, &ids, PRICE_IN_USE),
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
) -> Result<Vec<Write>, ApiError> {
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
            return Err(ApiError::invalid_param(
                &param,
                "a product is not its own add-on",
            ));
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
            return Err(ApiError::invalid_param(
                &param,
                "a product's own price is not its add-on",
            ));
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
) -> Result<(), ApiError> {
    match store::find(db, &price.product_id).await? {
        Some(owner) if !owner.active => Err(archived_product(&owner, use_, param)),
        Some(_) => Ok(()),
        None => Err(not_found("price", param)),
    }
}

fn archived_product(p: &product::Model, use_: &'static str, param: &str) -> ApiError {
    Refusal::Archived {
        what: "product",
        id: p.id.clone(),
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
) -> Result<product::Model, ApiError> {
    match crate::ids::ProductId::parse(id) {
        Some(_) => store::find_owned(db, id, scope).await?,
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
) -> Result<price::Model, ApiError> {
    match crate::ids::PriceId::parse(id) {
        Some(_) => store::find_price(db, id).await?,
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
) -> Result<AddonGroup, ApiError> {
    let (_, group) = change(db, scope, id, now, async |p, _| {
        let held = check_members(db, scope, p, input).await?;
        let mut groups = store::groups(p)?;
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
                return Err(ApiError::limit_reached(
                    "add-on groups per product",
                    MAX_GROUPS,
                ))
            }
            None => groups.push(group.clone()),
        }
        let mut after = p.clone();
        after.addon_groups = serde_json::to_string(&groups).unwrap_or_else(|_| "[]".into());
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
) -> Result<(), ApiError> {
    change(db, scope, id, now, async |p, _| {
        let mut groups = store::groups(p)?;
        let before = groups.len();
        groups.retain(|g| g.group_id != group_id);
        if groups.len() == before {
            return Err(not_found("add-on group", "group_id"));
        }
        let mut after = p.clone();
        after.addon_groups = serde_json::to_string(&groups).unwrap_or_else(|_| "[]".into());
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
) -> Result<product::Model, ApiError> {
    if components.len() > MAX_COMPONENTS {
        return Err(ApiError::invalid_param(
            "components",
            format!("a bundle has at most {MAX_COMPONENTS} components"),
        ));
    }
    let (p, ()) = change(db, scope, id, now, async |p, _| {
        let mut targets = Vec::with_capacity(components.len());
        let mut held = Vec::new();
        for (i, c) in components.iter().enumerate() {
            let param = |f: &str| format!("components[{i}].{f}");
            if !(1..=1000).contains(&c.quantity) {
                return Err(ApiError::invalid_param(
                    &param("quantity"),
                    "quantity must be 1 to 1000",
                ));
            }
            let product_id = match (&c.product_id, &c.price_id) {
                (Some(prod), None) => {
                    if prod == &p.id {
                        return Err(Refusal::BundleCycle(vec![p.id.clone(), p.id.clone()]).into());
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
                _ => {
                    return Err(ApiError::invalid_param(
                        &format!("components[{i}]"),
                        "a component names a product_id or a price_id, not both",
                    ))
                }
            };
            targets.push(product_id);
        }
        let graph = store::bundle_graph(db, &p.merchant_id, p.test_mode, &p.profile_id).await?;
        if let Some(cycle) = machine::find_cycle(&p.id, &targets, &graph) {
            return Err(Refusal::BundleCycle(cycle).into());
        }
        let mut after = p.clone();
        after.bundle = (!components.is_empty())
            .then(|| serde_json::to_string(components).unwrap_or_else(|_| "[]".into()));
        Ok((after, held, ()))
    })
    .await?;
    Ok(p)
}

/// `POST /products/categories`.
pub async fn create_category(
    db: &Db,
    caller: &Caller,
    req: &CreateCategoryRequest,
    now: DateTime<Utc>,
) -> Result<product_category::Model, ApiError> {
    let shop = caller.require_shop()?.to_string();
    let scope = caller.scope();
    let name = check_name("name", &req.name, 100)?;
    if let Some(parent) = &req.parent_id {
        let parent = check_category(db, &scope, &shop, parent)
            .await
            .map_err(|e| e.param("parent_id"))?;
        if parent.parent_id.is_some() {
            return Err(ApiError::invalid_param(
                "parent_id",
                "categories nest one level: the parent must be a top-level category",
            ));
        }
    }
    let c = product_category::Model {
        id: new_id("cat"),
        merchant_id: scope.merchant_id.clone(),
        profile_id: shop,
        test_mode: scope.test_mode,
        name,
        parent_id: req.parent_id.clone(),
        created_at: now,
    };
    store::insert_category(db, &c).await?;
    Ok(c)
}

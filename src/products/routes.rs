//! Handlers of the catalog routes: products, prices, add-on groups, bundles, categories and
//! images. Changes go through `catalog`; reads go to the store.

use actix_web::{http::header, web, HttpRequest, HttpResponse};
use serde::Serialize;
use utoipa::ToSchema;

use super::{
    api::{
        AddonGroup, AddonGroupInput, BundleRequest, Category, CreateCategoryRequest,
        CreateProductRequest, DeletedProduct, Image, ListCategoriesQuery, ListProductsQuery, Price,
        PriceInput, Product, UpdatePriceRequest, UpdateProductRequest,
    },
    catalog::{self, owned, render_price, CatalogError},
    machine::Refusal,
    store,
};
use crate::{
    auth::SecretKey,
    error::ApiError,
    files,
    http::{ApiJson, ApiQuery, PathId, PathIds},
    ids::{PriceId, ProductId},
    pagination::{List, Page},
    state::AppState,
};

// Literal segments before `{product_id}`: the first matching resource wins (the import's
// routes are mounted before these).
crate::http::routes! {
    "/products" => { post: create_product },
    "/products/list" => { get: list_products },
    "/products/images" => { post: upload_image },
    "/products/images/{image_id}" => { get: image_bytes },
    "/products/categories" => { post: create_category },
    "/products/categories/list" => { get: list_categories },
    "/products/{product_id}" => { get: retrieve_product, post: update_product, delete: delete_product },
    "/products/{product_id}/archive" => { post: archive_product },
    "/products/{product_id}/restore" => { post: restore_product },
    "/products/{product_id}/prices" => { post: add_price },
    "/products/{product_id}/prices/{price_id}" => { post: update_price },
    "/products/{product_id}/prices/{price_id}/archive" => { post: archive_price },
    "/products/{product_id}/addon-groups" => { post: add_group },
    "/products/{product_id}/addon-groups/{group_id}" => { post: replace_group, delete: remove_group },
    "/products/{product_id}/bundle" => { post: set_bundle },
}

impl From<Refusal> for ApiError {
    #[track_caller]
    fn from(r: Refusal) -> Self {
        match r {
            Refusal::Invalid { param, message } => ApiError::invalid_param(&param, message),
            Refusal::Archived { ref param, .. } => {
                ApiError::invalid("archived", r.to_string()).param(param.clone())
            }
            Refusal::DefaultPrice => ApiError::conflict("default_price", r.to_string()),
            Refusal::HasSales => ApiError::conflict("product_has_sales", r.to_string()),
            Refusal::BundleCycle(_) => {
                ApiError::invalid("bundle_cycle", r.to_string()).param("components")
            }
            Refusal::InUse { what: "price", .. } => {
                ApiError::conflict("price_in_use", r.to_string()).param("price_id")
            }
            Refusal::InUse { .. } => {
                ApiError::conflict("product_in_use", r.to_string()).param("product_id")
            }
        }
    }
}

impl From<CatalogError> for ApiError {
    #[track_caller]
    fn from(e: CatalogError) -> Self {
        match e {
            CatalogError::Refused(r) => r.into(),
            CatalogError::NotFound { what, param } => ApiError::not_found(what).param(param),
            CatalogError::Limit { what, max } => ApiError::limit_reached(what, max),
            CatalogError::Commit(e) => e.into(),
            CatalogError::Db(e) => e.into(),
        }
    }
}

/// One product as shown, with every price.
async fn one(state: &AppState, p: payd_entity::product::Model) -> Result<Product, ApiError> {
    let mut out = catalog::render(&state.db, &state.public_url, vec![p], false).await?;
    out.pop()
        .ok_or_else(|| ApiError::internal("a product renders as one"))
}

/// Create a product with its prices.
///
/// Creates an active product in the request's shop (`x-profile-id` or the key's bound shop)
/// with 1 to 20 prices, in one commit. The first price is the default unless another says
/// `default: true`; a price's amount, currency and recurrence never change afterwards. A shop
/// holds at most `limits.max_products_per_shop` products. Needs a secret key; catalog changes
/// send no webhook events.
///
/// Fails: `shop_required` (400), `amount_too_large` (400), `invalid_currency` (400), `resource_missing` (404), `limit_reached` (409).
///
/// Events: none.
#[utoipa::path(post, path = "/products", tag = "products", request_body = CreateProductRequest,
    responses((status = 201, body = Product), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody), (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn create_product(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    ApiJson(req): ApiJson<CreateProductRequest>,
) -> Result<HttpResponse, ApiError> {
    let limits = &state.settings.limits;
    let ask = req.parse(&caller, limits.max_amount)?;
    let (scope, max) = (caller.scope(), limits.max_products_per_shop);
    let p = catalog::create(&state.db, &scope, ask, max, state.clock.now()).await?;
    Ok(HttpResponse::Created().json(one(&state, p).await?))
}

/// The shop's catalog, newest first: each product with its active prices.
///
/// Lists the products the key reaches, filtered by `active`, `category_id`, `name` (contains,
/// case-insensitive) and `profile_id`, one page at a time (`limit`, `starting_after`,
/// `ending_before`). Each product shows only its active prices. Needs a secret key; a
/// shop-bound key lists its own shop only.
///
/// Fails: `resource_missing` (400), `profile_mismatch` (403).
///
/// Events: none.
#[utoipa::path(get, path = "/products/list", tag = "products", params(ListProductsQuery),
    responses((status = 200, body = List<Product>), (status = 400, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn list_products(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    ApiQuery(q): ApiQuery<ListProductsQuery>,
) -> Result<HttpResponse, ApiError> {
    let page = Page::parse::<crate::ids::ProductId>(&q.page_query())?;
    if q.name.as_deref().is_some_and(|n| n.chars().count() > 100) {
        return Err(ApiError::invalid_param(
            "name",
            "name must be at most 100 characters",
        ));
    }
    let shop = caller.scope().list_shop(q.profile_id.as_deref())?;
    let list = store::list(
        &state.db,
        caller.merchant_id.as_str(),
        caller.test_mode(),
        shop.as_deref(),
        &q,
        &page,
    )
    .await?;
    let data = catalog::render(&state.db, &state.public_url, list.data, true).await?;
    Ok(HttpResponse::Ok().json(List {
        data,
        has_more: list.has_more,
    }))
}

/// Retrieve a product with every price.
///
/// Answers the product with all of its prices, archived ones included, its add-on groups and
/// its bundle's components. A product of another shop, merchant or mode reads as missing.
/// Needs a secret key.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/products/{product_id}", tag = "products",
    params(("product_id" = String, Path)),
    responses((status = 200, body = Product), (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn retrieve_product(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::ProductId>,
) -> Result<HttpResponse, ApiError> {
    let p = owned(&state.db, &caller.scope(), &id).await?;
    Ok(HttpResponse::Ok().json(one(&state, p).await?))
}

/// Update a product's name, description, category, images, metadata or default price.
///
/// Changes only the fields sent: `category_id: ""` takes the product out of its category,
/// `images` must be the merchant's uploaded images, and `default_price_id` must name an active
/// price of the product. The change commits under the product's version and is decided again
/// on the stored product after a concurrent change. Needs a secret key.
///
/// Fails: `archived` (400), `resource_missing` (404), `concurrent_update` (409).
///
/// Events: none.
#[utoipa::path(post, path = "/products/{product_id}", tag = "products",
    params(("product_id" = String, Path)), request_body = UpdateProductRequest,
    responses((status = 200, body = Product), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn update_product(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::ProductId>,
    ApiJson(req): ApiJson<UpdateProductRequest>,
) -> Result<HttpResponse, ApiError> {
    let patch = req.parse()?;
    let p = catalog::update(&state.db, &caller.scope(), &id, &patch, state.clock.now()).await?;
    Ok(HttpResponse::Ok().json(one(&state, p).await?))
}

/// Delete a product no payment line names.
///
/// Deletes the product and its prices. A product that a payment line names, by itself or by
/// one of its prices, is refused with `product_has_sales`: archive it instead. One that a
/// bundle or an add-on group holds is refused with `product_in_use`, the message naming the
/// holders. Both checks run inside the delete's commit. Needs a secret key.
///
/// Fails: `resource_missing` (404), `product_has_sales` (409), `product_in_use` (409), `concurrent_update` (409).
///
/// Events: none.
#[utoipa::path(delete, path = "/products/{product_id}", tag = "products",
    params(("product_id" = String, Path)),
    responses((status = 200, body = DeletedProduct), (status = 404, body = crate::error::ErrorBody),
        (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn delete_product(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::ProductId>,
) -> Result<HttpResponse, ApiError> {
    catalog::delete(&state.db, &caller.scope(), &id, state.clock.now()).await?;
    Ok(HttpResponse::Ok().json(DeletedProduct {
        product_id: id.into_string(),
        deleted: true,
    }))
}

/// Take a product off sale.
///
/// Sets `active: false`: the product and its prices can no longer be sold, nor become an
/// add-on or a bundle component. A product that a bundle or an add-on group holds (itself or
/// one of its prices) is refused until it is taken out of them.
/// `POST /products/{product_id}/restore` puts it back. Needs a secret key.
///
/// Fails: `resource_missing` (404), `product_in_use` (409), `concurrent_update` (409).
///
/// Events: none.
#[utoipa::path(post, path = "/products/{product_id}/archive", tag = "products",
    params(("product_id" = String, Path)),
    responses((status = 200, body = Product), (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn archive_product(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::ProductId>,
) -> Result<HttpResponse, ApiError> {
    let p = catalog::set_active(&state.db, &caller.scope(), &id, false, state.clock.now()).await?;
    Ok(HttpResponse::Ok().json(one(&state, p).await?))
}

/// Put a product back on sale.
///
/// Sets `active: true` on an archived product, so its active prices can be sold again; prices
/// archived one by one stay archived. Needs a secret key.
///
/// Fails: `resource_missing` (404), `concurrent_update` (409).
///
/// Events: none.
#[utoipa::path(post, path = "/products/{product_id}/restore", tag = "products",
    params(("product_id" = String, Path)),
    responses((status = 200, body = Product), (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn restore_product(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::ProductId>,
) -> Result<HttpResponse, ApiError> {
    let p = catalog::set_active(&state.db, &caller.scope(), &id, true, state.clock.now()).await?;
    Ok(HttpResponse::Ok().json(one(&state, p).await?))
}

/// Add a price (its amount, currency and recurrence never change).
///
/// Adds a price of `unit_amount` (0 or more minor units, at most `limits.max_amount`) in
/// `currency`, one-off or `recurring` (at most a year per period). With `default: true`, or
/// when the product has no default, it becomes the product's default price. A product holds at
/// most 100 prices. To charge another amount later, add a price and archive the old one. Needs
/// a secret key.
///
/// Fails: `amount_too_large` (400), `invalid_currency` (400), `resource_missing` (404), `limit_reached` (409), `concurrent_update` (409).
///
/// Events: none.
#[utoipa::path(post, path = "/products/{product_id}/prices", tag = "products",
    params(("product_id" = String, Path)), request_body = PriceInput,
    responses((status = 201, body = Price), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn add_price(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::ProductId>,
    ApiJson(req): ApiJson<PriceInput>,
) -> Result<HttpResponse, ApiError> {
    // The request body is the price itself: its fields are named as they are.
    let ask = req.parse("", state.settings.limits.max_amount)?;
    let (p, price) =
        catalog::add_price(&state.db, &caller.scope(), &id, &ask, state.clock.now()).await?;
    Ok(HttpResponse::Created().json(render_price(&price, p.default_price_id.as_deref())))
}

/// Change a price's nickname, metadata or default flag; nothing else of a price changes.
///
/// Sending `default: true` makes the price the product's default (an archived price cannot
/// be); `default: false` on the default price is refused: make another price the default
/// instead. Any other field, such as the amount, is refused by name. Needs a secret key.
///
/// Fails: `archived` (400), `resource_missing` (404), `concurrent_update` (409).
///
/// Events: none.
#[utoipa::path(post, path = "/products/{product_id}/prices/{price_id}", tag = "products",
    params(("product_id" = String, Path), ("price_id" = String, Path)),
    request_body = UpdatePriceRequest,
    responses((status = 200, body = Price), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn update_price(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathIds(id, price_id): PathIds<ProductId, PriceId>,
    ApiJson(req): ApiJson<UpdatePriceRequest>,
) -> Result<HttpResponse, ApiError> {
    let patch = req.parse()?;
    let (p, price) = catalog::update_price(
        &state.db,
        &caller.scope(),
        &id,
        &price_id,
        &patch,
        state.clock.now(),
    )
    .await?;
    Ok(HttpResponse::Ok().json(render_price(&price, p.default_price_id.as_deref())))
}

/// Archive a price: it can no longer be sold.
///
/// Sets the price's `active: false`. The product's default price cannot be archived until
/// another price is the default (`default_price`), nor can a price that a bundle or an add-on
/// group holds (`price_in_use`, the message naming them). Needs a secret key.
///
/// Fails: `resource_missing` (404), `default_price` (409), `price_in_use` (409), `concurrent_update` (409).
///
/// Events: none.
#[utoipa::path(post, path = "/products/{product_id}/prices/{price_id}/archive", tag = "products",
    params(("product_id" = String, Path), ("price_id" = String, Path)),
    responses((status = 200, body = Price), (status = 404, body = crate::error::ErrorBody),
        (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn archive_price(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathIds(id, price_id): PathIds<ProductId, PriceId>,
) -> Result<HttpResponse, ApiError> {
    let (p, price) = catalog::archive_price(
        &state.db,
        &caller.scope(),
        &id,
        &price_id,
        state.clock.now(),
    )
    .await?;
    Ok(HttpResponse::Ok().json(render_price(&price, p.default_price_id.as_deref())))
}

/// Add an add-on group to a product.
///
/// Adds a group of 1 to 50 distinct members: products or prices of the same shop, on sale,
/// never the product itself or one of its own prices; `min_selections` is 0 to
/// `max_selections`, and `max_selections` 1 to the number of members. The commit holds each
/// member on sale while the group names it. A product has at most 20 groups. Needs a secret
/// key.
///
/// Fails: `archived` (400), `resource_missing` (404), `limit_reached` (409), `concurrent_update` (409).
///
/// Events: none.
#[utoipa::path(post, path = "/products/{product_id}/addon-groups", tag = "products",
    params(("product_id" = String, Path)), request_body = AddonGroupInput,
    responses((status = 201, body = AddonGroup), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn add_group(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::ProductId>,
    ApiJson(req): ApiJson<AddonGroupInput>,
) -> Result<HttpResponse, ApiError> {
    let g = catalog::put_group(
        &state.db,
        &caller.scope(),
        &id,
        None,
        &req,
        state.clock.now(),
    )
    .await?;
    Ok(HttpResponse::Created().json(g))
}

/// Replace an add-on group.
///
/// Replaces the group's name, selection bounds and members with the ones sent, checked as when
/// a group is added; the group keeps its `group_id`. Needs a secret key.
///
/// Fails: `archived` (400), `resource_missing` (404), `concurrent_update` (409).
///
/// Events: none.
#[utoipa::path(post, path = "/products/{product_id}/addon-groups/{group_id}", tag = "products",
    params(("product_id" = String, Path), ("group_id" = String, Path)),
    request_body = AddonGroupInput,
    responses((status = 200, body = AddonGroup), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn replace_group(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    ApiJson(req): ApiJson<AddonGroupInput>,
) -> Result<HttpResponse, ApiError> {
    let (id, group_id) = path.into_inner();
    let g = catalog::put_group(
        &state.db,
        &caller.scope(),
        &id,
        Some(&group_id),
        &req,
        state.clock.now(),
    )
    .await?;
    Ok(HttpResponse::Ok().json(g))
}

/// The answer to removing an add-on group.
#[derive(Debug, Serialize, ToSchema)]
pub struct RemovedGroup {
    pub group_id: String,
    pub deleted: bool,
}

/// Remove an add-on group.
///
/// Removes the group from the product; what it held on sale can then be archived, unless
/// something else holds it. Needs a secret key.
///
/// Fails: `resource_missing` (404), `concurrent_update` (409).
///
/// Events: none.
#[utoipa::path(delete, path = "/products/{product_id}/addon-groups/{group_id}", tag = "products",
    params(("product_id" = String, Path), ("group_id" = String, Path)),
    responses((status = 200, body = RemovedGroup), (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn remove_group(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (id, group_id) = path.into_inner();
    catalog::remove_group(
        &state.db,
        &caller.scope(),
        &id,
        &group_id,
        state.clock.now(),
    )
    .await?;
    Ok(HttpResponse::Ok().json(RemovedGroup {
        group_id,
        deleted: true,
    }))
}

/// Set a bundle's components (an empty list: no longer a bundle).
///
/// Replaces the product's components: at most 50 products or prices of the same shop, on sale,
/// 1 to 1 000 of each. A bundle cannot contain itself, directly or through another bundle
/// (`bundle_cycle`, the cycle in the message). The commit holds each component on sale. Needs
/// a secret key.
///
/// Fails: `archived` (400), `bundle_cycle` (400), `resource_missing` (404), `concurrent_update` (409).
///
/// Events: none.
#[utoipa::path(post, path = "/products/{product_id}/bundle", tag = "products",
    params(("product_id" = String, Path)), request_body = BundleRequest,
    responses((status = 200, body = Product), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn set_bundle(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::ProductId>,
    ApiJson(req): ApiJson<BundleRequest>,
) -> Result<HttpResponse, ApiError> {
    let components = req.parse()?;
    let p = catalog::set_bundle(
        &state.db,
        &caller.scope(),
        &id,
        &components,
        state.clock.now(),
    )
    .await?;
    Ok(HttpResponse::Ok().json(one(&state, p).await?))
}

fn render_category(c: payd_entity::product_category::Model) -> Category {
    Category {
        category_id: c.id.into(),
        profile_id: c.profile_id.into(),
        name: c.name,
        parent_id: c.parent_id.map(String::from),
        test_mode: c.test_mode,
        created_at: c.created_at,
    }
}

/// Create a category (one level of nesting).
///
/// Creates a category in the request's shop (`x-profile-id` or the key's bound shop); with
/// `parent_id`, under a top-level category of the same shop (a parent that has a parent itself
/// is refused by name). Needs a secret key.
///
/// Fails: `shop_required` (400), `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(post, path = "/products/categories", tag = "products",
    request_body = CreateCategoryRequest,
    responses((status = 201, body = Category), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn create_category(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    ApiJson(req): ApiJson<CreateCategoryRequest>,
) -> Result<HttpResponse, ApiError> {
    let ask = req.parse(&caller)?;
    let c = catalog::create_category(&state.db, &caller.scope(), ask, state.clock.now()).await?;
    Ok(HttpResponse::Created().json(render_category(c)))
}

/// The shop's categories, newest first.
///
/// Lists the categories the key reaches, filtered by `parent_id` and `profile_id`, one page at
/// a time (`limit`, `starting_after`, `ending_before`). Needs a secret key; a shop-bound key
/// lists its own shop only.
///
/// Fails: `resource_missing` (400), `profile_mismatch` (403).
///
/// Events: none.
#[utoipa::path(get, path = "/products/categories/list", tag = "products",
    params(ListCategoriesQuery),
    responses((status = 200, body = List<Category>), (status = 400, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn list_categories(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    ApiQuery(q): ApiQuery<ListCategoriesQuery>,
) -> Result<HttpResponse, ApiError> {
    let page = Page::parse::<crate::ids::CategoryId>(&q.page_query())?;
    let shop = caller.scope().list_shop(q.profile_id.as_deref())?;
    let list = store::list_categories(
        &state.db,
        caller.merchant_id.as_str(),
        caller.test_mode(),
        shop.as_deref(),
        &q,
        &page,
    )
    .await?;
    Ok(HttpResponse::Ok().json(list.map(render_category)))
}

/// `POST /products/images`: a `multipart/form-data` body.
#[derive(Debug, ToSchema)]
#[allow(dead_code)] // Describes the form for the OpenAPI document; the handler reads the parts.
pub struct UploadImageForm {
    /// The image (PNG, JPEG or WebP, told by its bytes).
    #[schema(value_type = String, format = Binary)]
    pub file: Vec<u8>,
}

/// Upload a product image (PNG, JPEG or WebP, at most `limits.max_image_bytes`).
///
/// Takes a `multipart/form-data` body with one `file` part; the type is told by the bytes, not
/// the file name. The image is stored like an evidence file, within the merchant's file
/// limits, and answered with the `url` storefronts read it from. Attach it to a product by
/// listing its id in the product's `images`. Needs a secret key.
///
/// Fails: `invalid_multipart` (400), `file_empty` (400), `file_type_unsupported` (400), `file_too_large` (413), `limit_reached` (409).
///
/// Events: none.
#[utoipa::path(post, path = "/products/images", tag = "products",
    request_body(content = UploadImageForm, content_type = "multipart/form-data"),
    responses((status = 201, body = Image), (status = 400, body = crate::error::ErrorBody),
        (status = 413, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn upload_image(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    req: HttpRequest,
    payload: web::Payload,
) -> Result<HttpResponse, ApiError> {
    let max = state.settings.limits.max_image_bytes;
    let f =
        files::routes::upload(&state, &caller, &req, payload, files::PRODUCT_IMAGE, max).await?;
    let image = payd_entity::product_image::Model {
        id: crate::ids::ImageId::new(),
        merchant_id: f.merchant_id.clone(),
        test_mode: f.test_mode,
        file_id: f.id.clone(),
        created_at: f.created_at,
    };
    store::insert_image(&state.db, &image).await?;
    Ok(HttpResponse::Created().json(Image {
        url: format!("{}/products/images/{}", state.public_url, image.id),
        image_id: image.id.into(),
        content_type: f.content_type,
        size: f.size,
        sha256: f.sha256,
        created_at: f.created_at,
    }))
}

/// A product image's bytes, for storefronts: no key (its id is not guessable).
///
/// Serves the stored bytes with their content type, an `etag` of their SHA-256 and a year's
/// immutable caching. No API key is needed: whoever has the image's id can read it.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/products/images/{image_id}", tag = "products",
    params(("image_id" = String, Path)),
    responses(
        (status = 200, description = "the image's bytes", content(
            (crate::fields::FileBytes = "image/png"), (crate::fields::FileBytes = "image/jpeg"),
            (crate::fields::FileBytes = "image/webp"))),
        (status = 404, body = crate::error::ErrorBody)))]
pub async fn image_bytes(
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::ImageId>,
) -> Result<HttpResponse, ApiError> {
    let missing = || ApiError::not_found("image").param("image_id");
    if crate::ids::ImageId::parse(&id).is_none() {
        return Err(missing());
    }
    let image = store::find_image(&state.db, &id)
        .await?
        .ok_or_else(missing)?;
    let file_id = crate::ids::FileId::parse(&image.file_id).ok_or_else(missing)?;
    let (file, bytes) = files::store::read_all(&state.db, &file_id)
        .await?
        .ok_or_else(missing)?;
    Ok(HttpResponse::Ok()
        .content_type(file.content_type.as_str())
        .insert_header((header::ETAG, format!("\"{}\"", file.sha256)))
        .insert_header((header::CACHE_CONTROL, "public, max-age=31536000, immutable"))
        .body(bytes))
}

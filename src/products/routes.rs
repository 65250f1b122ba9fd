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
    store::{self, HAS_SALES, PRICE_IN_USE, PRODUCT_IN_USE},
};
use crate::{
    auth::SecretKey,
    error::ApiError,
    files,
    http::{ApiJson, ApiQuery, PathId},
    ids::new_id,
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

/// Create a product with its prices (the first is the default unless another says so).
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

/// Delete a product no payment line names (one with sales is 409 `product_has_sales`:
/// archive it).
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
    Ok(HttpResponse::Created().json(render_price(&price, p.default_price_id.as_deref())?))
}

/// Change a price's nickname, metadata or default flag; nothing else of a price changes.
#[utoipa::path(post, path = "/products/{product_id}/prices/{price_id}", tag = "products",
    params(("product_id" = String, Path), ("price_id" = String, Path)),
    request_body = UpdatePriceRequest,
    responses((status = 200, body = Price), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn update_price(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
    ApiJson(req): ApiJson<UpdatePriceRequest>,
) -> Result<HttpResponse, ApiError> {
    let (id, price_id) = path.into_inner();
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
    Ok(HttpResponse::Ok().json(render_price(&price, p.default_price_id.as_deref())?))
}

/// Archive a price: it can no longer be sold (the default price cannot be archived: 409).
#[utoipa::path(post, path = "/products/{product_id}/prices/{price_id}/archive", tag = "products",
    params(("product_id" = String, Path), ("price_id" = String, Path)),
    responses((status = 200, body = Price), (status = 404, body = crate::error::ErrorBody),
        (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn archive_price(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (id, price_id) = path.into_inner();
    let (p, price) = catalog::archive_price(
        &state.db,
        &caller.scope(),
        &id,
        &price_id,
        state.clock.now(),
    )
    .await?;
    Ok(HttpResponse::Ok().json(render_price(&price, p.default_price_id.as_deref())?))
}

/// Add an add-on group.
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
        category_id: c.id,
        profile_id: c.profile_id,
        name: c.name,
        parent_id: c.parent_id,
        test_mode: c.test_mode,
        created_at: c.created_at,
    }
}

/// Create a category (one level of nesting).
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
        id: new_id("img"),
        merchant_id: f.merchant_id.clone(),
        test_mode: f.test_mode,
        file_id: f.id.clone(),
        created_at: f.created_at,
    };
    store::insert_image(&state.db, &image).await?;
    Ok(HttpResponse::Created().json(Image {
        url: format!("{}/products/images/{}", state.public_url, image.id),
        image_id: image.id,
        content_type: f.content_type,
        size: f.size,
        sha256: f.sha256,
        created_at: f.created_at,
    }))
}

/// A product image's bytes, for storefronts: no key (its id is not guessable).
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
    let (file, bytes) = files::store::read_all(&state.db, &image.file_id)
        .await?
        .ok_or_else(missing)?;
    Ok(HttpResponse::Ok()
        .content_type(file.content_type.as_str())
        .insert_header((header::ETAG, format!("\"{}\"", file.sha256)))
        .insert_header((header::CACHE_CONTROL, "public, max-age=31536000, immutable"))
        .body(bytes))
}

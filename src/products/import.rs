//! Importing a catalog from a processor: the sandbox catalog processor and its fixed catalog,
//! previews (what an import would create, update or archive, by external id, stored so that
//! applying does exactly that), applying a preview once, and the catalog actions of a shop's
//! processor accounts. Its routes are in `import_routes.rs`.

use chrono::{DateTime, Utc};
use payd_entity::{catalog_preview, price, processor_account, product};
use sea_orm::{
    ActiveModelTrait, ColumnTrait, DbErr, EntityTrait, IntoActiveModel, QueryFilter, QueryOrder,
    QueryTrait,
};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use utoipa::ToSchema;

use super::{
    api::MAX_PRICES,
    machine::{self, Interval, LocalProduct, RemotePrice, RemoteProduct, Step},
    store,
};
use crate::commit::Db;
use crate::stored::Json;
use crate::{
    auth::keys::Caller,
    commit::{self, Change, CommitError, Write},
    conflict::Conflict,
    ids::{ImportPreviewId, PriceId, ProductId, ProfileId},
};

/// Why a catalog import could not be previewed or applied. The routes map it to the API's
/// error.
#[derive(Debug, thiserror::Error)]
pub enum ImportError {
    #[error("no such processor account")]
    NoSuchAccount,
    #[error("no processor account of the shop supports import")]
    NoImporter,
    #[error("processor account {0:?} does not support catalog import")]
    CannotImport(String),
    #[error("no such preview")]
    NoSuchPreview,
    /// The shop's catalog changed after the preview (`while_applying`: during the apply).
    #[error("the shop's catalog changed {}: preview the import again", if *.while_applying { "while applying" } else { "after this preview" })]
    Stale { while_applying: bool },
    /// What the preview archives is held by a bundle or an add-on group.
    #[error("the import would archive a product or price that a bundle or an add-on group holds: take it out of them, then preview the import again")]
    Held(Conflict),
    #[error(transparent)]
    Commit(#[from] CommitError),
    #[error("database: {0}")]
    Db(#[from] DbErr),
}

/// The catalog processor every sandbox shop has.
pub const SANDBOX_CATALOG: &str = "sandbox_catalog";

/// The sandbox catalog processor's catalog: fixed, so a second import changes nothing.
pub fn sandbox_catalog() -> Vec<RemoteProduct> {
    let price = |id: &str, amount: i64, recurring: Option<(Interval, i64)>| RemotePrice {
        external_id: id.to_owned(),
        unit_amount: amount,
        currency: "EUR".to_owned(),
        recurring,
    };
    vec![
        RemoteProduct {
            external_id: "sbx_prod_coffee".into(),
            name: "Coffee beans, 1 kg".into(),
            description: Some("Single-origin, roasted weekly".into()),
            active: true,
            prices: vec![
                price("sbx_price_coffee", 2400, None),
                price("sbx_price_coffee_monthly", 2200, Some((Interval::Month, 1))),
            ],
        },
        RemoteProduct {
            external_id: "sbx_prod_mug".into(),
            name: "Mug".into(),
            description: None,
            active: true,
            prices: vec![price("sbx_price_mug", 1200, None)],
        },
        RemoteProduct {
            external_id: "sbx_prod_grinder".into(),
            name: "Burr grinder".into(),
            description: Some("Conical steel burrs".into()),
            active: true,
            prices: vec![price("sbx_price_grinder", 8900, None)],
        },
        RemoteProduct {
            external_id: "sbx_prod_teapot".into(),
            name: "Teapot".into(),
            description: None,
            active: false,
            prices: vec![price("sbx_price_teapot", 3500, None)],
        },
    ]
}

/// A processor account and the catalog actions it supports.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProviderAccount {
    /// The account's name (`sandbox_catalog`: the sandbox catalog processor).
    pub account: String,
    /// `sandbox` or `remote`.
    pub kind: String,
    /// `import`, `export`, or none.
    pub catalog_actions: Vec<String>,
}

/// `GET /products/provider-accounts`.
#[derive(Debug, Serialize, ToSchema)]
pub struct ProviderAccounts {
    pub data: Vec<ProviderAccount>,
}

/// The catalog processors of a shop: the sandbox catalog in test mode, then its configured
/// processor accounts of the caller's mode (which speak payments only: no catalog actions).
async fn accounts(db: &Db, caller: &Caller, shop: &str) -> Result<Vec<ProviderAccount>, DbErr> {
    let mut out = Vec::new();
    if caller.test_mode() {
        out.push(ProviderAccount {
            account: SANDBOX_CATALOG.into(),
            kind: "sandbox".into(),
            catalog_actions: vec!["import".into()],
        });
    }
    let configured = processor_account::Entity::find()
        .filter(processor_account::Column::MerchantId.eq(caller.merchant_id.as_str()))
        .filter(processor_account::Column::ProfileId.eq(shop))
        .filter(processor_account::Column::TestMode.eq(caller.test_mode()))
        .order_by_asc(processor_account::Column::Name)
        .all(db)
        .await?;
    out.extend(configured.into_iter().map(|a| ProviderAccount {
        account: a.name,
        kind: a.kind.to_string(),
        catalog_actions: vec![],
    }));
    Ok(out)
}

/// The processor accounts of the shop and the catalog actions each supports.
/// The processor accounts of the caller's shop and the catalog actions each supports.
pub async fn provider_accounts(
    db: &Db,
    caller: &Caller,
    shop: &str,
) -> Result<ProviderAccounts, DbErr> {
    Ok(ProviderAccounts {
        data: accounts(db, caller, shop).await?,
    })
}

/// `POST /products/import/preview`.
#[derive(Debug, Clone, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct PreviewRequest {
    /// The processor account to import from; by default the shop's account that supports
    /// import.
    #[serde(default)]
    pub account: Option<String>,
}

/// `POST /products/import/apply`.
#[derive(Debug, Clone, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ApplyRequest {
    pub preview_id: String,
}

/// What an import would do to one product.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct PlannedProduct {
    /// The product's id at the processor.
    pub external_id: String,
    /// The shop's product (none for one to create).
    pub product_id: Option<String>,
    pub name: String,
    /// External ids of the prices it would add.
    pub add_prices: Vec<String>,
    /// Price ids it would archive.
    pub archive_prices: Vec<String>,
}

/// A stored preview: exactly what applying it does.
#[derive(Debug, Serialize, ToSchema)]
pub struct Preview {
    pub preview_id: String,
    pub account: String,
    pub create: Vec<PlannedProduct>,
    pub update: Vec<PlannedProduct>,
    pub archive: Vec<PlannedProduct>,
    /// Imported products that already match the processor's.
    pub unchanged: usize,
    /// Whether it was applied (applying again returns the same answer).
    pub applied: bool,
    pub created_at: DateTime<Utc>,
}

/// The answer of an apply.
#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct Applied {
    pub preview_id: String,
    /// Products created, by external id.
    pub created: Vec<AppliedProduct>,
    pub updated: Vec<AppliedProduct>,
    pub archived: Vec<AppliedProduct>,
    pub applied_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Serialize, Deserialize, ToSchema)]
pub struct AppliedProduct {
    pub external_id: String,
    pub product_id: String,
}

/// The shop's imported products as the planner sees them, and the fingerprint of its whole
/// catalog (every product's id and version).
async fn local(
    db: &Db,
    caller: &Caller,
    shop: &str,
    max: u64,
) -> Result<(Vec<LocalProduct>, String), DbErr> {
    let products = store::of_shop(
        db,
        caller.merchant_id.as_str(),
        caller.test_mode(),
        shop,
        max,
    )
    .await?;
    let mut hash = Sha256::new();
    for p in &products {
        hash.update(format!("{}:{};", p.id, p.version));
    }
    let imported: Vec<&product::Model> = products
        .iter()
        .filter(|p| p.external_id.is_some())
        .collect();
    let ids: Vec<ProductId> = imported.iter().map(|p| p.id.clone()).collect();
    let prices = store::prices_of(db, &ids).await?;
    let out = imported
        .into_iter()
        .map(|p| LocalProduct {
            product_id: p.id.to_string(),
            external_id: p.external_id.clone().unwrap_or_default(),
            name: p.name.clone(),
            description: p.description.clone(),
            active: p.active,
            prices: prices
                .iter()
                .filter(|x| x.product_id == p.id)
                .filter_map(|x| Some((x.id.to_string(), x.external_id.clone()?, x.active)))
                .collect(),
        })
        .collect();
    Ok((out, hex::encode(hash.finalize())))
}

fn planned(
    steps: &[Step],
) -> (
    Vec<PlannedProduct>,
    Vec<PlannedProduct>,
    Vec<PlannedProduct>,
) {
    let (mut create, mut update, mut archive) = (vec![], vec![], vec![]);
    for s in steps {
        match s {
            Step::Create { product } => create.push(PlannedProduct {
                external_id: product.external_id.clone(),
                product_id: None,
                name: product.name.clone(),
                add_prices: product
                    .prices
                    .iter()
                    .map(|p| p.external_id.clone())
                    .collect(),
                archive_prices: vec![],
            }),
            Step::Update {
                product_id,
                product,
                add_prices,
                archive_prices,
            } => update.push(PlannedProduct {
                external_id: product.external_id.clone(),
                product_id: Some(product_id.clone()),
                name: product.name.clone(),
                add_prices: add_prices.iter().map(|p| p.external_id.clone()).collect(),
                archive_prices: archive_prices.clone(),
            }),
            Step::Archive {
                product_id,
                external_id,
            } => archive.push(PlannedProduct {
                external_id: external_id.clone(),
                product_id: Some(product_id.clone()),
                name: String::new(),
                add_prices: vec![],
                archive_prices: vec![],
            }),
        }
    }
    (create, update, archive)
}

fn render_preview(p: &catalog_preview::Model, local_count: usize) -> Result<Preview, DbErr> {
    let steps = &p.plan.0;
    let (create, update, archive) = planned(steps);
    let touched = update.len() + archive.len();
    Ok(Preview {
        preview_id: p.id.to_string(),
        account: p.account.clone(),
        unchanged: local_count.saturating_sub(touched),
        create,
        update,
        archive,
        applied: p.applied_at.is_some(),
        created_at: p.created_at,
    })
}

/// Preview an import: what it would create, update or archive, by external id.
/// Previews an import into the caller's shop and stores the preview.
pub async fn preview(
    db: &Db,
    caller: &Caller,
    shop: &ProfileId,
    req: &PreviewRequest,
    max_products: u64,
    now: DateTime<Utc>,
) -> Result<Preview, ImportError> {
    let shop = shop.clone();
    let accounts = accounts(db, caller, &shop).await?;
    let account = match &req.account {
        Some(name) => accounts
            .iter()
            .find(|a| &a.account == name)
            .ok_or(ImportError::NoSuchAccount)?,
        None => accounts
            .iter()
            .find(|a| a.catalog_actions.iter().any(|c| c == "import"))
            .ok_or(ImportError::NoImporter)?,
    };
    if !account.catalog_actions.iter().any(|c| c == "import") {
        return Err(ImportError::CannotImport(account.account.clone()));
    }
    let (local_products, fingerprint) = local(db, caller, &shop, max_products).await?;
    let steps = machine::plan(&local_products, &sandbox_catalog());
    let row = catalog_preview::Model {
        id: ImportPreviewId::new(),
        merchant_id: caller.merchant_id.clone(),
        profile_id: shop,
        test_mode: caller.test_mode(),
        account: account.account.clone(),
        plan: Json(steps),
        fingerprint,
        applied_at: None,
        result: None,
        created_at: now,
    };
    commit::commit(db, Change::at(now).write(commit::insert(row.clone()))).await?;
    Ok(render_preview(&row, local_products.len())?)
}

/// Applies a preview exactly as it was shown, in one commit; returns the answer's JSON (the
/// first apply's, when applied before). A preview of a catalog that changed since is 409
/// `preview_stale`.
pub async fn apply_preview(
    db: &Db,
    caller: &Caller,
    req: &ApplyRequest,
    max_products: u64,
    now: DateTime<Utc>,
) -> Result<String, ImportError> {
    let scope = caller.scope();
    let Some(id) = ImportPreviewId::parse(&req.preview_id) else {
        return Err(ImportError::NoSuchPreview);
    };
    let find = || async {
        catalog_preview::Entity::find_by_id(id.clone())
            .one(db)
            .await
            .map(|p| p.filter(|p| scope.sees(&p.merchant_id, p.test_mode, &p.profile_id)))
    };
    let preview = find().await?.ok_or(ImportError::NoSuchPreview)?;
    if let Some(done) = preview.result {
        return Ok(done);
    }
    let (_, fingerprint) = local(db, caller, &preview.profile_id, max_products).await?;
    if fingerprint != preview.fingerprint {
        // The catalog may have changed by this very preview, applied by a concurrent request
        // since it was read above: then its recorded answer is the answer.
        return match find().await?.and_then(|p| p.result) {
            Some(first) => Ok(first),
            None => Err(ImportError::Stale {
                while_applying: false,
            }),
        };
    }
    let steps = preview.plan.0.clone();
    let (change, applied) = apply(db, &preview, &steps, now).await?;
    let json = serde_json::to_string(&applied).unwrap_or_default();
    let mut done = preview.clone();
    done.applied_at = Some(now);
    done.result = Some(json.clone());
    // The preview is marked applied in the same commit, only if nobody applied it first.
    let mark = Write::Cas(
        catalog_preview::Entity::update_many()
            .set(done.into_active_model().reset_all())
            .filter(catalog_preview::Column::Id.eq(preview.id.as_str()))
            .filter(catalog_preview::Column::AppliedAt.is_null())
            .into_query(),
    );
    match commit::commit(db, change.write(mark)).await {
        Ok(_) => Ok(json),
        // Another apply of this preview, or a change of one of its products, came first.
        Err(CommitError::LostRace) => match find().await?.and_then(|p| p.result) {
            Some(first) => Ok(first),
            None => Err(ImportError::Stale {
                while_applying: true,
            }),
        },
        // What the preview archives is held by a bundle or an add-on group (see catalog.rs).
        Err(CommitError::Refused(code)) => Err(ImportError::Held(code)),
        Err(e) => Err(e.into()),
    }
}

/// The writes of a preview's steps, and what they do.
async fn apply(
    db: &Db,
    preview: &catalog_preview::Model,
    steps: &[Step],
    now: DateTime<Utc>,
) -> Result<(Change, Applied), ImportError> {
    let mut change = Change::at(now);
    let mut applied = Applied {
        preview_id: preview.id.to_string(),
        created: vec![],
        updated: vec![],
        archived: vec![],
        applied_at: now,
    };
    for step in steps {
        match step {
            Step::Create { product } => {
                let (writes, created) = create(preview, product, now);
                change = writes.into_iter().fold(change, Change::write);
                applied.created.push(created);
            }
            Step::Update {
                product_id,
                product,
                add_prices,
                archive_prices,
            } => {
                let found = match ProductId::parse(product_id) {
                    Some(id) => store::find(db, &id).await?,
                    None => None,
                };
                let Some(before) = found else {
                    continue;
                };
                let current = store::prices_of(db, std::slice::from_ref(&before.id)).await?;
                let writes = update(&before, product, add_prices, archive_prices, &current, now);
                change = writes.into_iter().fold(change, Change::write);
                applied.updated.push(AppliedProduct {
                    external_id: product.external_id.clone(),
                    product_id: before.id.into(),
                });
            }
            Step::Archive {
                product_id,
                external_id,
            } => {
                let found = match ProductId::parse(product_id) {
                    Some(id) => store::find(db, &id).await?,
                    None => None,
                };
                let Some(before) = found else {
                    continue;
                };
                let prices = store::prices_of(db, std::slice::from_ref(&before.id)).await?;
                change = archive(&before, &prices, now)
                    .into_iter()
                    .fold(change, Change::write);
                applied.archived.push(AppliedProduct {
                    external_id: external_id.clone(),
                    product_id: before.id.into(),
                });
            }
        }
    }
    Ok((change, applied))
}

/// A price of the processor's, new in the catalog under product `p`.
fn new_price(p: &product::Model, r: &RemotePrice, now: DateTime<Utc>) -> price::Model {
    price::Model {
        id: PriceId::new(),
        product_id: p.id.clone(),
        merchant_id: p.merchant_id.clone(),
        profile_id: p.profile_id.clone(),
        test_mode: p.test_mode,
        unit_amount: r.unit_amount,
        currency: r.currency.clone(),
        recurring_interval: r.recurring.as_ref().map(|(i, _)| *i),
        recurring_interval_count: r.recurring.as_ref().map(|(_, c)| *c),
        nickname: None,
        metadata: None,
        active: true,
        external_id: Some(r.external_id.clone()),
        created_at: now,
        updated_at: now,
    }
}

/// A product of the processor's that the catalog lacks: it and its prices, the first the
/// default.
fn create(
    preview: &catalog_preview::Model,
    r: &RemoteProduct,
    now: DateTime<Utc>,
) -> (Vec<Write>, AppliedProduct) {
    let mut p = product::Model {
        id: ProductId::new(),
        merchant_id: preview.merchant_id.clone(),
        profile_id: preview.profile_id.clone(),
        test_mode: preview.test_mode,
        name: r.name.clone(),
        description: r.description.clone(),
        category_id: None,
        metadata: None,
        images: Default::default(),
        active: true,
        default_price_id: None,
        bundle: None,
        addon_groups: Default::default(),
        external_id: Some(r.external_id.clone()),
        version: 1,
        created_at: now,
        updated_at: now,
    };
    let prices: Vec<price::Model> = r
        .prices
        .iter()
        .take(MAX_PRICES)
        .map(|x| new_price(&p, x, now))
        .collect();
    p.default_price_id = prices.first().map(|x| x.id.clone());
    let mut writes = vec![commit::insert(p.clone())];
    writes.extend(prices.into_iter().map(commit::insert));
    let created = AppliedProduct {
        external_id: r.external_id.clone(),
        product_id: p.id.into(),
    };
    (writes, created)
}

/// A product the processor changed: its name and description, the prices it added, and the
/// prices it archived (refused at commit while a payment holds one).
fn update(
    before: &product::Model,
    r: &RemoteProduct,
    add_prices: &[RemotePrice],
    archive_prices: &[String],
    current: &[price::Model],
    now: DateTime<Utc>,
) -> Vec<Write> {
    let mut after = before.clone();
    after.name = r.name.clone();
    after.description = r.description.clone();
    after.active = true;
    after.version = before.version + 1;
    after.updated_at = now;
    let added: Vec<price::Model> = add_prices
        .iter()
        .map(|x| new_price(before, x, now))
        .collect();
    // The default moves off a price about to be archived.
    if before
        .default_price_id
        .as_ref()
        .is_none_or(|d| archive_prices.iter().any(|a| d == a))
    {
        after.default_price_id = added.first().map(|x| x.id.clone()).or_else(|| {
            current
                .iter()
                .find(|x| x.active && !archive_prices.iter().any(|a| x.id == *a))
                .map(|x| x.id.clone())
        });
    }
    let mut writes = vec![store::cas(before, &after)];
    if !archive_prices.is_empty() {
        writes.push(store::not_held(
            before,
            archive_prices,
            Conflict::PriceInUse,
        ));
    }
    writes.extend(added.into_iter().map(commit::insert));
    for id in archive_prices {
        if let Some(mut x) = current.iter().find(|x| &x.id == id).cloned() {
            x.active = false;
            x.updated_at = now;
            writes.push(store::price_update(x));
        }
    }
    writes
}

/// A product the processor no longer has: archived (refused at commit while a payment holds
/// it or one of its prices).
fn archive(before: &product::Model, prices: &[price::Model], now: DateTime<Utc>) -> Vec<Write> {
    let mut after = before.clone();
    after.active = false;
    after.version = before.version + 1;
    after.updated_at = now;
    let mut held = vec![before.id.to_string()];
    held.extend(prices.iter().map(|x| x.id.to_string()));
    vec![
        store::cas(before, &after),
        store::not_held(before, &held, Conflict::ProductInUse),
    ]
}

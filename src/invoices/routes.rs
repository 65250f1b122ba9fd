//! Handlers of the invoice routes and of the buyer's share-link page. Changes go through the
//! invoice's actor; reads go to the store.

use actix_web::{web, HttpResponse};
use base64::Engine as _;
use chrono::Duration;
use payd_entity::{invoice, invoice_pdf, invoice_share_link};

use super::{
    actor::{Command, Done, Exec, InvoiceError, Invoices},
    api::{
        self, CreateInvoiceRequest, CreditNoteRequest, Invoice, ListInvoicesQuery, ShareLink,
        ShareLinkRequest, UpdateInvoiceRequest,
    },
    create::{self, CreateError},
    machine::{Kind, Refusal, Status},
    pdf, store,
};
use crate::{
    auth::{Caller, SecretKey},
    clock::{self, Timeline},
    error::ApiError,
    fields::parse_id,
    http::{ApiJson, ApiQuery, PathId},
    ids::{new_id, InvoiceId},
    pages::{html, Chrome},
    pagination::{List, Page},
    state::AppState,
};

crate::http::routes! {
    "/invoices" => { post: create_invoice, get: list_invoices },
    "/invoices/{invoice_id}" => { get: retrieve_invoice, patch: update_invoice, delete: delete_invoice },
    "/invoices/{invoice_id}/finalize" => { post: finalize },
    "/invoices/{invoice_id}/void" => { post: void_invoice },
    "/invoices/{invoice_id}/mark-paid" => { post: mark_paid },
    "/invoices/{invoice_id}/mark-uncollectible" => { post: mark_uncollectible },
    "/invoices/{invoice_id}/credit-note" => { post: credit_note },
    "/invoices/{invoice_id}/pdf" => { get: download_pdf },
    "/invoices/{invoice_id}/share-link" => { post: create_share_link },
    "/invoices/{invoice_id}/share-link/{link_id}" => { delete: revoke_share_link },
    "/invoice-links/{token}" => { get: shared_page },
    "/invoice-links/{token}/pdf" => { get: shared_pdf },
}

impl From<InvoiceError> for ApiError {
    #[track_caller]
    fn from(e: InvoiceError) -> Self {
        match e {
            InvoiceError::NotFound => ApiError::not_found("invoice").param("invoice_id"),
            InvoiceError::Refused(r) => refusal(r),
            InvoiceError::Overflow => ApiError::invalid_param("lines", e.to_string()),
            InvoiceError::LostRace => ApiError::concurrent_update("invoice"),
            InvoiceError::Conflict(c) => c.into(),
            InvoiceError::Render(cause) => ApiError::internal(cause),
            InvoiceError::Db(e) => e.into(),
        }
    }
}

impl From<CreateError> for ApiError {
    #[track_caller]
    fn from(e: CreateError) -> Self {
        let message = e.to_string();
        let line = |i: usize, field: &str| format!("lines[{i}].{field}");
        match e {
            CreateError::NoSuchPrice { line: i } => {
                ApiError::not_found("price").param(line(i, "price_id"))
            }
            CreateError::PriceCurrency { line: i, .. } | CreateError::OtherProduct { line: i } => {
                ApiError::invalid_param(&line(i, "price_id"), message)
            }
            CreateError::NoSuchProduct { line: i } => {
                ApiError::not_found("product").param(line(i, "product_id"))
            }
            CreateError::NoSuchCustomer => ApiError::not_found("customer").param("customer_id"),
            CreateError::NoSuchPayment => ApiError::no_such::<crate::ids::PaymentId>(),
            CreateError::NotCaptured(_) => {
                ApiError::conflict("payment_not_captured", message).param("payment_id")
            }
            CreateError::Refunded(_) => {
                ApiError::conflict("payment_refunded", message).param("payment_id")
            }
            CreateError::NoSuchSubscription => {
                ApiError::not_found("subscription").param("subscription_id")
            }
            CreateError::NoSuchCycle => ApiError::not_found("cycle").param("cycle_id"),
            CreateError::Exists { param } => {
                ApiError::conflict("invoice_exists", message).param(param)
            }
            CreateError::KeepsLines { param } => ApiError::invalid_param(param, message),
            CreateError::Invoice(e) => e.into(),
            CreateError::Commit(e) => e.into(),
            CreateError::Db(e) => e.into(),
        }
    }
}

fn refusal(r: Refusal) -> ApiError {
    let message = r.to_string();
    match r {
        Refusal::InvalidState { .. } | Refusal::CreditNote(_) => {
            ApiError::conflict("invalid_state", message)
        }
        Refusal::Paid(_) => ApiError::conflict("invoice_paid", message),
        Refusal::Credited => ApiError::conflict("invoice_credited", message),
        Refusal::NoLine(_) => ApiError::invalid("unknown_line", message).param("lines"),
        Refusal::LineExceeded { .. } | Refusal::QuantityExceeded { .. } => {
            ApiError::invalid("credit_exceeds_line", message).param("lines")
        }
        Refusal::TotalExceeded(_) => {
            ApiError::invalid("credit_exceeds_total", message).param("amount")
        }
        Refusal::Nothing => ApiError::invalid("nothing_to_credit", message).param("lines"),
        Refusal::DueBeforeIssue(_) => {
            ApiError::invalid("due_date_passed", message).param("due_date")
        }
        Refusal::PaymentRefunded => {
            ApiError::conflict("payment_refunded", message).param("payment_id")
        }
    }
}

fn missing() -> ApiError {
    ApiError::not_found("invoice").param("invoice_id")
}

/// Runs a command through the invoice's actor, as this caller.
async fn run(
    invoices: &Invoices,
    caller: &Caller,
    id: &InvoiceId,
    command: Command,
) -> Result<Done, ApiError> {
    let exec = Exec {
        scope: Some(caller.scope()),
        command,
        timeline: clock::current(),
    };
    Ok(invoices.send(id, exec).await??)
}

async fn owned(
    state: &AppState,
    caller: &Caller,
    id: &InvoiceId,
) -> Result<invoice::Model, ApiError> {
    store::find_owned(&state.db, id, &caller.scope())
        .await?
        .ok_or_else(missing)
}

fn ok(m: &invoice::Model) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(Invoice::render(m)?))
}

/// Create a draft invoice from a captured payment, a billing cycle or lines.
///
/// From `payment_id`: the lines of a payment captured in full and not refunded at all, with
/// the tax they were captured with. From `subscription_id` and `cycle_id`: the lines the cycle
/// charged, with its tax. From `lines` and `currency`: lines priced by the shop's tax rules,
/// whose `product_id` and `price_id` must be the shop's. One invoice per payment and per cycle
/// while it stands (`invoice_exists`; voiding or deleting it frees the source). The invoice is
/// a `draft` until finalized. Needs a secret key and a shop (`x-profile-id` or a shop-bound
/// key).
///
/// Fails: `shop_required` (400), `invalid_currency` (400), `resource_missing` (404), `payment_not_captured` (409), `payment_refunded` (409), `invoice_exists` (409).
///
/// Events: none.
#[utoipa::path(post, path = "/invoices", tag = "invoices", request_body = CreateInvoiceRequest,
    responses((status = 201, body = Invoice), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody), (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn create_invoice(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    ApiJson(req): ApiJson<CreateInvoiceRequest>,
) -> Result<HttpResponse, ApiError> {
    let now = state.clock.now();
    let max = state.settings.limits.max_amount;
    let ask = req.parse(&caller, max)?;
    let m = create::create(&state.db, &caller, ask, now).await?;
    Ok(HttpResponse::Created().json(Invoice::render(&m)?))
}

/// List invoices and credit notes, newest first.
///
/// Lists the invoices and credit notes the key reaches, filtered by `kind`, `status`,
/// `customer_id`, `original_invoice_id`, `profile_id` and `created_after`/`created_before`,
/// one page at a time (`limit`, `starting_after`, `ending_before`). Deleted drafts are never
/// listed. Needs a secret key.
///
/// Fails: `resource_missing` (400), `profile_mismatch` (403).
///
/// Events: none.
#[utoipa::path(get, path = "/invoices", tag = "invoices", params(ListInvoicesQuery),
    responses((status = 200, body = List<Invoice>), (status = 400, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn list_invoices(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    ApiQuery(q): ApiQuery<ListInvoicesQuery>,
) -> Result<HttpResponse, ApiError> {
    let page = Page::parse::<crate::ids::InvoiceId>(&q.page_query())?;
    if let Some(k) = q.kind.as_deref().filter(|k| Kind::parse(k).is_none()) {
        return Err(ApiError::invalid_param(
            "kind",
            format!("unknown kind {k:?}"),
        ));
    }
    let shown = |s: &str| Status::parse(s).is_some_and(|s| s != Status::Deleted);
    if let Some(s) = q.status.as_deref().filter(|s| !shown(s)) {
        return Err(ApiError::invalid_param(
            "status",
            format!("unknown status {s:?}"),
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
    Ok(HttpResponse::Ok().json(list.try_map(|m| Invoice::render(&m))?))
}

/// Retrieve an invoice or a credit note.
///
/// Answers the invoice (`kind: invoice`) or credit note (`kind: credit_note`) with its lines,
/// totals and what is paid, credited and due. A deleted draft, or one of another shop,
/// merchant or mode, reads as missing. Needs a secret key.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/invoices/{invoice_id}", tag = "invoices",
    params(("invoice_id" = String, Path)),
    responses((status = 200, body = Invoice), (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn retrieve_invoice(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::InvoiceId>,
) -> Result<HttpResponse, ApiError> {
    ok(&owned(&state, &caller, &id).await?)
}

/// Edit a draft invoice.
///
/// Changes the fields sent of a `draft`: `lines` and `currency` only on a draft made from
/// lines (one made from a payment or a cycle keeps its own), `customer_id`, `buyer`, `memo`,
/// `due_date` and `metadata`. Lines are checked against the shop's catalog and priced again by
/// the tax rules. An invoice in any other status is refused with `invalid_state`. Needs a
/// secret key.
///
/// Fails: `invalid_currency` (400), `resource_missing` (404), `invalid_state` (409), `concurrent_update` (409).
///
/// Events: none.
#[utoipa::path(patch, path = "/invoices/{invoice_id}", tag = "invoices",
    params(("invoice_id" = String, Path)), request_body = UpdateInvoiceRequest,
    responses((status = 200, body = Invoice), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody), (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn update_invoice(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    invoices: web::Data<Invoices>,
    PathId(id): PathId<crate::ids::InvoiceId>,
    ApiJson(req): ApiJson<UpdateInvoiceRequest>,
) -> Result<HttpResponse, ApiError> {
    let m = owned(&state, &caller, &id).await?;
    let max = state.settings.limits.max_amount;
    let patch = create::patch(&state.db, &caller, &m, req.parse(max)?).await?;
    let done = run(&invoices, &caller, &id, Command::Update(Box::new(patch))).await?;
    ok(&done.invoice)
}

/// Delete a draft invoice.
///
/// Moves a `draft` to `deleted`: it reads as missing from then on, never took a number, and
/// frees its payment or cycle for another invoice. An invoice in any other status is refused
/// with `invalid_state` (void it instead). Needs a secret key.
///
/// Fails: `resource_missing` (404), `invalid_state` (409), `concurrent_update` (409).
///
/// Events: none.
#[utoipa::path(delete, path = "/invoices/{invoice_id}", tag = "invoices",
    params(("invoice_id" = String, Path)),
    responses((status = 200, body = Invoice), (status = 404, body = crate::error::ErrorBody),
        (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn delete_invoice(
    SecretKey(caller): SecretKey,
    invoices: web::Data<Invoices>,
    PathId(id): PathId<crate::ids::InvoiceId>,
) -> Result<HttpResponse, ApiError> {
    let done = run(&invoices, &caller, &id, Command::Delete).await?;
    ok(&done.invoice)
}

/// Finalize a draft: its number, taxes, seller and buyer are frozen.
///
/// Gives the draft the next number of the shop's series and freezes its taxes, seller, buyer,
/// due date and locale; the PDF is rendered once. The invoice becomes `paid` when made from a
/// captured payment or a paid cycle, else `open`. A draft whose payment was refunded since
/// stays a draft (`payment_refunded`), as does one whose due date is before the issue date.
/// Needs a secret key.
///
/// Fails: `due_date_passed` (400), `resource_missing` (404), `invalid_state` (409), `payment_refunded` (409), `concurrent_update` (409).
///
/// Events: `merchant_invoice_finalized`.
#[utoipa::path(post, path = "/invoices/{invoice_id}/finalize", tag = "invoices",
    params(("invoice_id" = String, Path)),
    responses((status = 200, body = Invoice), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody), (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn finalize(
    SecretKey(caller): SecretKey,
    invoices: web::Data<Invoices>,
    PathId(id): PathId<crate::ids::InvoiceId>,
) -> Result<HttpResponse, ApiError> {
    let done = run(&invoices, &caller, &id, Command::Finalize).await?;
    ok(&done.invoice)
}

/// Void an open or uncollectible invoice with nothing paid and no credit note.
///
/// Moves an `open` or `uncollectible` invoice to `void`: it keeps its number and frees its
/// payment or cycle for another invoice. One with an amount paid is refused with
/// `invoice_paid` (credit it instead), one with credit notes with `invoice_credited`; a credit
/// note cannot be voided. Needs a secret key.
///
/// Fails: `resource_missing` (404), `invalid_state` (409), `invoice_paid` (409), `invoice_credited` (409), `concurrent_update` (409).
///
/// Events: `merchant_invoice_voided`.
#[utoipa::path(post, path = "/invoices/{invoice_id}/void", tag = "invoices",
    params(("invoice_id" = String, Path)),
    responses((status = 200, body = Invoice), (status = 404, body = crate::error::ErrorBody),
        (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn void_invoice(
    SecretKey(caller): SecretKey,
    invoices: web::Data<Invoices>,
    PathId(id): PathId<crate::ids::InvoiceId>,
) -> Result<HttpResponse, ApiError> {
    let done = run(&invoices, &caller, &id, Command::Void).await?;
    ok(&done.invoice)
}

/// Record an open or uncollectible invoice as paid outside payd.
///
/// Moves an `open` or `uncollectible` invoice to `paid`, recording what was due (the total
/// less what credit notes took) as paid; no money moves. A credit note, or an invoice in
/// another status, is refused with `invalid_state`. Needs a secret key.
///
/// Fails: `resource_missing` (404), `invalid_state` (409), `concurrent_update` (409).
///
/// Events: none.
#[utoipa::path(post, path = "/invoices/{invoice_id}/mark-paid", tag = "invoices",
    params(("invoice_id" = String, Path)),
    responses((status = 200, body = Invoice), (status = 404, body = crate::error::ErrorBody),
        (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn mark_paid(
    SecretKey(caller): SecretKey,
    invoices: web::Data<Invoices>,
    PathId(id): PathId<crate::ids::InvoiceId>,
) -> Result<HttpResponse, ApiError> {
    let done = run(&invoices, &caller, &id, Command::MarkPaid).await?;
    ok(&done.invoice)
}

/// Write an open invoice off as uncollectible.
///
/// Moves an `open` invoice to `uncollectible`; it can still be marked paid or voided later. A
/// credit note, or an invoice in another status, is refused with `invalid_state`. Needs a
/// secret key.
///
/// Fails: `resource_missing` (404), `invalid_state` (409), `concurrent_update` (409).
///
/// Events: none.
#[utoipa::path(post, path = "/invoices/{invoice_id}/mark-uncollectible", tag = "invoices",
    params(("invoice_id" = String, Path)),
    responses((status = 200, body = Invoice), (status = 404, body = crate::error::ErrorBody),
        (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn mark_uncollectible(
    SecretKey(caller): SecretKey,
    invoices: web::Data<Invoices>,
    PathId(id): PathId<crate::ids::InvoiceId>,
) -> Result<HttpResponse, ApiError> {
    let done = run(&invoices, &caller, &id, Command::MarkUncollectible).await?;
    ok(&done.invoice)
}

/// Issue a credit note against an open or paid invoice.
///
/// Credits by `lines` (units or an amount each, at most what is left of the line) or by an
/// `amount` spread over the lines; in all at most what is left of the invoice's total. The
/// credit note is `issued` at once, numbered in the credit notes' own series, its PDF
/// rendered; an `open` invoice left with nothing due becomes `paid`. Answers the credit note
/// (201), whose event carries `kind: credit_note`. Needs a secret key.
///
/// Fails: `unknown_line` (400), `credit_exceeds_line` (400), `credit_exceeds_total` (400), `nothing_to_credit` (400), `resource_missing` (404), `invalid_state` (409), `concurrent_update` (409).
///
/// Events: `merchant_invoice_finalized`.
#[utoipa::path(post, path = "/invoices/{invoice_id}/credit-note", tag = "invoices",
    params(("invoice_id" = String, Path)), request_body = CreditNoteRequest,
    responses((status = 201, body = Invoice), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody), (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn credit_note(
    SecretKey(caller): SecretKey,
    invoices: web::Data<Invoices>,
    PathId(id): PathId<crate::ids::InvoiceId>,
    ApiJson(req): ApiJson<CreditNoteRequest>,
) -> Result<HttpResponse, ApiError> {
    let note = req.parse()?;
    let command = Command::CreditNote {
        ask: note.ask,
        reason: note.reason,
        memo: note.memo,
        metadata: note.metadata,
    };
    let done = run(&invoices, &caller, &id, command).await?;
    let note = done.credit_note.ok_or_else(missing)?;
    Ok(HttpResponse::Created().json(Invoice::render(&note)?))
}

/// A file name made only of `A-Z a-z 0-9 - _` (anything else becomes `_`), so a
/// `Content-Disposition` can name no path and break out of no quotes, whatever was stored.
fn safe_file_name(name: &str) -> String {
    name.chars()
        .map(
            |c| match c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                true => c,
                false => '_',
            },
        )
        .collect()
}

fn pdf_response(m: &invoice::Model, kept: &invoice_pdf::Model) -> HttpResponse {
    let name = safe_file_name(m.number.as_deref().unwrap_or(&m.id));
    HttpResponse::Ok()
        .content_type("application/pdf")
        .insert_header((
            "content-disposition",
            format!("inline; filename=\"{name}.pdf\""),
        ))
        .insert_header(("etag", format!("\"{}\"", kept.sha256)))
        .insert_header(("x-pdf-sha256", kept.sha256.clone()))
        .insert_header(("cache-control", "private, max-age=0, must-revalidate"))
        .body(kept.bytes.clone())
}

/// The kept PDF of a finalized invoice, rendering it first if a crash lost the render.
async fn kept_pdf(
    state: &AppState,
    invoices: &Invoices,
    m: &invoice::Model,
    scope: Option<crate::auth::keys::Scope>,
) -> Result<invoice_pdf::Model, ApiError> {
    if m.finalized_at.is_none() {
        return Err(ApiError::conflict(
            "invoice_draft",
            "a draft has no PDF: finalize it first",
        ));
    }
    if let Some(kept) = store::pdf(&state.db, &m.id).await? {
        return Ok(kept);
    }
    let exec = Exec {
        scope,
        command: Command::RenderPdf,
        timeline: clock::current(),
    };
    invoices
        .send(&m.id, exec)
        .await??
        .pdf
        .ok_or_else(|| ApiError::internal("the PDF was not rendered"))
}

/// Download the PDF of a finalized invoice or credit note.
///
/// Answers `application/pdf`: the bytes rendered once at finalize, the same on every download
/// (`etag` and `x-pdf-sha256` carry their SHA-256); if a crash lost the render, it is rendered
/// and kept first. A draft has no PDF (`invoice_draft`). Needs a secret key.
///
/// Fails: `resource_missing` (404), `invoice_draft` (409).
///
/// Events: none.
#[utoipa::path(get, path = "/invoices/{invoice_id}/pdf", tag = "invoices",
    params(("invoice_id" = String, Path)),
    responses((status = 200, content_type = "application/pdf", body = crate::fields::FileBytes),
        (status = 404, body = crate::error::ErrorBody), (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn download_pdf(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    invoices: web::Data<Invoices>,
    PathId(id): PathId<crate::ids::InvoiceId>,
) -> Result<HttpResponse, ApiError> {
    let m = owned(&state, &caller, &id).await?;
    let kept = kept_pdf(&state, &invoices, &m, Some(caller.scope())).await?;
    Ok(pdf_response(&m, &kept))
}

/// Create a link for the buyer: the invoice and its PDF without an API key.
///
/// Answers a `url` to a page with the invoice and its PDF that needs no key, until it expires
/// (`expires_in_days`, 1 to 365, default 30; a sandbox link on the merchant's test clock) or
/// is revoked. The URL is shown only in this answer: payd keeps a hash of its token. Drafts
/// cannot be shared (`invoice_draft`). Needs a secret key.
///
/// Fails: `resource_missing` (404), `invoice_draft` (409).
///
/// Events: none.
#[utoipa::path(post, path = "/invoices/{invoice_id}/share-link", tag = "invoices",
    params(("invoice_id" = String, Path)), request_body = ShareLinkRequest,
    responses((status = 201, body = ShareLink), (status = 400, body = crate::error::ErrorBody),
        (status = 404, body = crate::error::ErrorBody), (status = 409, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn create_share_link(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::InvoiceId>,
    ApiJson(req): ApiJson<ShareLinkRequest>,
) -> Result<HttpResponse, ApiError> {
    let days = req.expires_in_days.unwrap_or(30);
    if !(1..=365).contains(&days) {
        return Err(ApiError::invalid_param(
            "expires_in_days",
            "expires_in_days is 1 to 365",
        ));
    }
    let m = owned(&state, &caller, &id).await?;
    if m.finalized_at.is_none() {
        return Err(ApiError::conflict(
            "invoice_draft",
            "a draft cannot be shared: finalize it first",
        ));
    }
    let token = base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(rand::random::<[u8; 32]>());
    let now = state.clock.now();
    let link = invoice_share_link::Model {
        id: new_id("shl"),
        invoice_id: m.id.clone(),
        token_hash: store::token_hash(&token),
        expires_at: now + Duration::days(days),
        revoked_at: None,
        created_at: now,
    };
    store::insert_link(&state.db, &link).await?;
    let url = format!("{}/invoice-links/{token}", state.public_url);
    Ok(HttpResponse::Created().json(shown_link(&link, url, m.test_mode)))
}

fn shown_link(link: &invoice_share_link::Model, url: String, test_mode: bool) -> ShareLink {
    ShareLink {
        link_id: link.id.clone(),
        invoice_id: link.invoice_id.to_string(),
        url,
        expires_at: link.expires_at,
        revoked_at: link.revoked_at,
        test_mode,
    }
}

/// Revoke a share link: its page answers 404 from now on.
///
/// Marks the link revoked; its page and PDF answer 404 from then on. Revoking it again keeps
/// the first `revoked_at`. Answers the link without its URL. Needs a secret key.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(delete, path = "/invoices/{invoice_id}/share-link/{link_id}", tag = "invoices",
    params(("invoice_id" = String, Path), ("link_id" = String, Path)),
    responses((status = 200, body = ShareLink), (status = 404, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn revoke_share_link(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    path: web::Path<(String, String)>,
) -> Result<HttpResponse, ApiError> {
    let (id, link_id) = path.into_inner();
    let m = owned(&state, &caller, &parse_id(&id)?).await?;
    let link = store::find_link(&state.db, &m.id, &link_id)
        .await?
        .ok_or_else(|| ApiError::not_found("share link").param("link_id"))?;
    store::revoke_link(&state.db, &link, state.clock.now()).await?;
    let link = store::find_link(&state.db, &m.id, &link_id)
        .await?
        .ok_or_else(|| ApiError::not_found("share link").param("link_id"))?;
    Ok(HttpResponse::Ok().json(shown_link(&link, String::new(), m.test_mode)))
}

/// The invoice a live link shows; an unknown, expired or revoked link is 404. A sandbox
/// link expires on its merchant's test clock.
async fn shared(state: &AppState, token: &str) -> Result<invoice::Model, ApiError> {
    let gone = || ApiError::not_found("share link");
    if token.len() > 100 {
        return Err(gone());
    }
    let link = store::live_link(&state.db, token, state.clock.base())
        .await?
        .ok_or_else(gone)?;
    let id = crate::ids::InvoiceId::parse(&link.invoice_id).ok_or_else(gone)?;
    let m = store::find(&state.db, &id)
        .await?
        .filter(|m| m.status != Status::Deleted)
        .ok_or_else(gone)?;
    let timeline = crate::accounts::store::timeline_for(
        &state.db,
        &Timeline::default(),
        &m.merchant_id,
        m.test_mode,
    )
    .await;
    let now = clock::scoped(timeline, async { state.clock.now() }).await;
    match now < link.expires_at {
        true => Ok(m),
        false => Err(gone()),
    }
}

/// The buyer's page of a shared invoice.
///
/// Answers an HTML page with the invoice's parties, lines, totals and a link to its PDF, for
/// whoever holds the link; no API key. An unknown, expired or revoked link, or a deleted
/// invoice, is 404.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/invoice-links/{token}", tag = "checkout",
    params(("token" = String, Path)),
    responses((status = 200, content_type = "text/html", body = String),
        (status = 404, body = crate::error::ErrorBody)))]
pub async fn shared_page(
    state: web::Data<AppState>,
    token: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let m = shared(&state, &token).await?;
    html(&page(&m, &token)?)
}

/// The PDF of a shared invoice.
///
/// Answers the same bytes as `GET /invoices/{invoice_id}/pdf`, for whoever holds a live share
/// link; no API key. An unknown, expired or revoked link is 404.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/invoice-links/{token}/pdf", tag = "checkout",
    params(("token" = String, Path)),
    responses((status = 200, content_type = "application/pdf", body = crate::fields::FileBytes),
        (status = 404, body = crate::error::ErrorBody)))]
pub async fn shared_pdf(
    state: web::Data<AppState>,
    invoices: web::Data<Invoices>,
    token: web::Path<String>,
) -> Result<HttpResponse, ApiError> {
    let m = shared(&state, &token).await?;
    let kept = kept_pdf(&state, &invoices, &m, None).await?;
    Ok(pdf_response(&m, &kept))
}

/// The buyer's page of a shared invoice.
#[derive(askama::Template)]
#[template(path = "invoice.html", config = "src/templates/askama.toml")]
struct InvoicePage<'a> {
    chrome: Chrome,
    title: &'static str,
    number: String,
    status: String,
    due_date: Option<String>,
    /// The parties' lines: name, address, email, tax id.
    seller: Vec<String>,
    buyer: Vec<String>,
    rows: Vec<PageRow>,
    subtotal: String,
    tax: String,
    total: String,
    amount_paid: String,
    amount_due: String,
    token: &'a str,
}

/// A line of the invoice as its page shows it (amounts formatted for its locale).
struct PageRow {
    name: String,
    quantity: i64,
    unit_amount: String,
    tax_rate: String,
    amount: String,
}

fn page<'a>(m: &invoice::Model, token: &'a str) -> Result<InvoicePage<'a>, ApiError> {
    let shown = Invoice::render(m)?;
    let locale = shown.locale.clone().unwrap_or_else(|| "en".into());
    let money = |v: i64| pdf::money(v, &shown.currency, &locale);
    let party = |p: &Option<api::Party>| {
        p.as_ref().map_or_else(Vec::new, |p| {
            std::iter::once(p.name.clone())
                .chain(p.address_lines())
                .chain(p.email.clone())
                .chain(p.tax_id.as_ref().map(|t| format!("Tax ID: {t}")))
                .collect()
        })
    };
    let rows = shown
        .lines
        .iter()
        .map(|l| PageRow {
            name: l.name.clone(),
            quantity: l.quantity,
            unit_amount: money(l.unit_amount),
            tax_rate: pdf::percent(l.tax_rate_bps, &locale),
            amount: money(l.amount),
        })
        .collect();
    Ok(InvoicePage {
        chrome: Chrome::new("en", None),
        title: match m.kind {
            Kind::CreditNote => "Credit note",
            Kind::Invoice => "Invoice",
        },
        number: shown.number.clone().unwrap_or_default(),
        status: shown.status.clone(),
        due_date: shown.due_date.clone(),
        seller: party(&shown.seller),
        buyer: party(&shown.buyer),
        rows,
        subtotal: money(shown.subtotal),
        tax: money(shown.tax),
        total: money(shown.total),
        amount_paid: money(shown.amount_paid),
        amount_due: money(shown.amount_due),
        token,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn file_names_keep_no_path_and_no_quote() {
        assert_eq!(super::safe_file_name("INV-000001"), "INV-000001");
        assert_eq!(
            super::safe_file_name("../../tmp/000001"),
            "______tmp_000001"
        );
        assert_eq!(super::safe_file_name("a\"b;c.pdf"), "a_b_c_pdf");
    }
}

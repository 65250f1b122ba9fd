//! Handlers of the customer, saved-method and mandate routes.

use actix_web::{web, HttpRequest, HttpResponse};
use payd_entity::customer;

use super::{
    api::{
        check_fields, redaction, Customer, CustomerFields, ListCustomersQuery, ListMandatesQuery,
        Mandate, Redaction, SavedMethod,
    },
    store,
};
use crate::{
    auth::{Caller, SecretKey},
    commit,
    error::ApiError,
    fields::Items,
    http::{ApiJson, ApiQuery, PathId, PathIds},
    idempotency,
    pagination::{List, ListQuery, Page},
    processors::connect::Connections,
    state::AppState,
};

crate::http::routes! {
    "/customers" => { post: create_customer },
    "/customers/list" => { get: list_customers },
    "/customers/{customer_id}" => { get: retrieve_customer, post: update_customer, delete: delete_customer },
    "/customers/{customer_id}/payment-methods" => { get: list_methods },
    "/customers/{customer_id}/payment-methods/{payment_method_id}/default" => { post: set_default_method },
    "/payment-methods/{payment_method_id}" => { delete: delete_method },
    "/customers/{customer_id}/mandates" => { get: customer_mandates },
    "/mandates/list" => { get: list_mandates },
    "/mandates/{mandate_id}" => { get: retrieve_mandate },
    "/mandates/revoke/{mandate_id}" => { post: revoke_mandate },
}

async fn owned(
    state: &AppState,
    caller: &Caller,
    id: &crate::ids::CustomerId,
) -> Result<customer::Model, ApiError> {
    crate::owned::find_owned(&state.db, id, &caller.scope())
        .await?
        .ok_or_else(|| ApiError::not_found("customer"))
}

fn redacted() -> ApiError {
    ApiError::conflict(
        "customer_redacted",
        "this customer was deleted; its data is redacted",
    )
}

/// Create a customer.
///
/// A customer of the key's merchant and mode, with its name, email, phone, description,
/// address and metadata; payments name it to save and charge cards. Needs a secret key; a
/// retry with the same `Idempotency-Key` answers the same customer, never a second one.
///
/// Fails: `invalid_email` (400), `invalid_phone` (400).
///
/// Events: none.
#[utoipa::path(post, path = "/customers", tag = "customers", request_body = CustomerFields,
    responses((status = 201, body = Customer), (status = 400, body = crate::error::ErrorBody)),
    security(("api_key" = [])))]
pub async fn create_customer(
    http: HttpRequest,
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    ApiJson(f): ApiJson<CustomerFields>,
) -> Result<HttpResponse, ApiError> {
    // The retry of a create whose customer was stored but whose answer was lost: that
    // customer, not a second one.
    if let Some(id) = idempotency::resumed::<crate::ids::CustomerId>(&http) {
        if let Ok(c) = owned(&state, &caller, &id).await {
            return Ok(HttpResponse::Created().json(Customer::from(&c)));
        }
    }
    check_fields(&f)?;
    let c = store::insert(
        &state.db,
        &caller.merchant_id,
        caller.test_mode(),
        &f,
        state.clock.now(),
        idempotency::request_key(&http).as_ref(),
    )
    .await?;
    Ok(HttpResponse::Created().json(Customer::from(&c)))
}

/// List customers, newest first.
///
/// The customers of the key's merchant and mode, filtered by email and creation time. Read
/// only; needs a secret key.
///
/// Fails: `resource_missing` (400).
///
/// Events: none.
#[utoipa::path(get, path = "/customers/list", tag = "customers", params(ListCustomersQuery),
    responses((status = 200, body = List<Customer>)), security(("api_key" = [])))]
pub async fn list_customers(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    ApiQuery(q): ApiQuery<ListCustomersQuery>,
) -> Result<HttpResponse, ApiError> {
    let page = Page::parse::<crate::ids::CustomerId>(&ListQuery {
        limit: q.limit,
        starting_after: q.starting_after.clone(),
        ending_before: q.ending_before.clone(),
    })?;
    let list = store::list(
        &state.db,
        caller.merchant_id.as_str(),
        caller.test_mode(),
        &q,
        &page,
    )
    .await?;
    Ok(HttpResponse::Ok().json(list.map(|c| Customer::from(&c))))
}

/// Retrieve a customer (a deleted one reads as redacted).
///
/// A deleted customer keeps its id, with its personal data erased and `redacted_at` set. Read
/// only; needs a secret key.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/customers/{customer_id}", tag = "customers", params(("customer_id" = String, Path)),
    responses((status = 200, body = Customer), (status = 404, body = crate::error::ErrorBody)), security(("api_key" = [])))]
pub async fn retrieve_customer(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::CustomerId>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(Customer::from(&owned(&state, &caller, &id).await?)))
}

/// Update a customer.
///
/// Changes the fields sent; a deleted (redacted) customer cannot be changed. Needs a secret
/// key.
///
/// Fails: `invalid_email` (400), `invalid_phone` (400), `resource_missing` (404), `customer_redacted` (409), `concurrent_update` (409).
///
/// Events: none.
#[utoipa::path(post, path = "/customers/{customer_id}", tag = "customers", params(("customer_id" = String, Path)),
    request_body = CustomerFields,
    responses((status = 200, body = Customer), (status = 409, body = crate::error::ErrorBody)), security(("api_key" = [])))]
pub async fn update_customer(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::CustomerId>,
    ApiJson(f): ApiJson<CustomerFields>,
) -> Result<HttpResponse, ApiError> {
    check_fields(&f)?;
    let now = state.clock.now();
    let updated = change(&state, &caller, &id, |c| store::apply(c, &f, now)).await?;
    Ok(HttpResponse::Ok().json(Customer::from(&updated)))
}

/// Applies `edit` to a live (not redacted) customer under its version compare-and-set,
/// reading it again when another write got there first (three tries).
async fn change(
    state: &AppState,
    caller: &Caller,
    id: &crate::ids::CustomerId,
    edit: impl Fn(&customer::Model) -> customer::Model,
) -> Result<customer::Model, ApiError> {
    commit::retrying(3, || async {
        let c = owned(state, caller, id).await?;
        if c.redacted_at.is_some() {
            return Err(redacted());
        }
        Ok(commit::or_retry(
            store::replace(&state.db, &c, edit(&c)).await,
        )?)
    })
    .await
}

/// Delete a customer: redact its personal data and delete its saved methods.
///
/// Erases its personal data (in its stored events too), deletes its saved methods (detached as
/// well from the processor that keeps them: Stripe) and sets `redacted_at`; its id, payments
/// and refunds stay. Refused while a mandate is pending or active. Needs a secret key.
///
/// Fails: `resource_missing` (404), `customer_redacted` (409), `active_mandate` (409), `concurrent_update` (409).
///
/// Events: none.
#[utoipa::path(delete, path = "/customers/{customer_id}", tag = "customers", params(("customer_id" = String, Path)),
    responses((status = 200, body = Redaction), (status = 409, body = crate::error::ErrorBody)), security(("api_key" = [])))]
pub async fn delete_customer(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    connections: web::Data<Connections>,
    PathId(id): PathId<crate::ids::CustomerId>,
) -> Result<HttpResponse, ApiError> {
    let c = owned(&state, &caller, &id).await?;
    if c.redacted_at.is_some() {
        return Err(redacted());
    }
    let (after, erased) = redaction(&c, state.clock.now());
    let (after, deleted) = store::redact(&state.db, &c, after).await?;
    // Its cards go at the processor that keeps them (Stripe) too.
    for pm in &deleted {
        store::forget_at_processor(&state.db, &connections, pm).await;
    }
    Ok(HttpResponse::Ok().json(Redaction {
        customer: Customer::from(&after),
        erased_fields: erased,
        deleted_payment_methods: deleted.into_iter().map(|pm| pm.id.into()).collect(),
    }))
}

/// The customer's saved methods, newest first; the default is flagged.
///
/// The cards saved by its payments (`setup_future_usage`), as brand, last four digits and
/// expiry. Read only; needs a secret key.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/customers/{customer_id}/payment-methods", tag = "customers", params(("customer_id" = String, Path)),
    responses((status = 200, body = Items<SavedMethod>)), security(("api_key" = [])))]
pub async fn list_methods(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::CustomerId>,
) -> Result<HttpResponse, ApiError> {
    let c = owned(&state, &caller, &id).await?;
    let data = store::methods(&state.db, &c.id)
        .await?
        .iter()
        .map(|pm| SavedMethod::of(pm, c.default_payment_method_id.as_deref()))
        .collect();
    Ok(HttpResponse::Ok().json(Items { data }))
}

/// Make a saved method the customer's default.
///
/// The method must be this customer's; a deleted customer cannot be changed. Needs a secret
/// key.
///
/// Fails: `resource_missing` (404), `customer_redacted` (409), `concurrent_update` (409).
///
/// Events: none.
#[utoipa::path(post, path = "/customers/{customer_id}/payment-methods/{payment_method_id}/default", tag = "customers",
    params(("customer_id" = String, Path), ("payment_method_id" = String, Path)),
    responses((status = 200, body = Customer), (status = 404, body = crate::error::ErrorBody)), security(("api_key" = [])))]
pub async fn set_default_method(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathIds(customer_id, pm_id): PathIds<crate::ids::CustomerId, crate::ids::PaymentMethodId>,
) -> Result<HttpResponse, ApiError> {
    let c = owned(&state, &caller, &customer_id).await?;
    store::find_method(&state.db, &pm_id)
        .await?
        .filter(|pm| pm.customer_id == c.id)
        .ok_or_else(|| ApiError::not_found("payment method").param("payment_method_id"))?;
    let now = state.clock.now();
    let updated = change(&state, &caller, &customer_id, |c| {
        let mut after = c.clone();
        after.default_payment_method_id = Some(pm_id.clone());
        after.updated_at = now;
        after
    })
    .await?;
    Ok(HttpResponse::Ok().json(Customer::from(&updated)))
}

/// Delete a saved method (and clear it as the default).
///
/// The mandates that charge it (`pending` or `active`) are revoked in the same commit; the
/// card is also detached from the processor that keeps it (Stripe). Needs a secret key.
///
/// Fails: `resource_missing` (404), `concurrent_update` (409).
///
/// Events: `mandate_revoked`.
#[utoipa::path(delete, path = "/payment-methods/{payment_method_id}", tag = "customers", params(("payment_method_id" = String, Path)),
    responses((status = 200, body = SavedMethod), (status = 404, body = crate::error::ErrorBody)), security(("api_key" = [])))]
pub async fn delete_method(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    connections: web::Data<Connections>,
    PathId(id): PathId<crate::ids::PaymentMethodId>,
) -> Result<HttpResponse, ApiError> {
    let pm = store::find_method(&state.db, &id)
        .await?
        .filter(|pm| {
            pm.merchant_id == caller.merchant_id.as_str() && pm.test_mode == caller.test_mode()
        })
        .ok_or_else(|| ApiError::not_found("payment method"))?;
    // A card that does not decode was refused (500) when its row was read, before anything
    // is forgotten.
    let shown = SavedMethod::of(&pm, None);
    // A mandate changed meanwhile is read again: its revocation must not be lost.
    commit::retrying(3, || async {
        let deleted = store::delete_method(&state.db, &pm, state.clock.now()).await;
        Ok::<_, ApiError>(commit::or_retry(deleted)?)
    })
    .await?;
    store::forget_at_processor(&state.db, &connections, &pm).await;
    Ok(HttpResponse::Ok().json(shown))
}

fn mandate_page(q: &ListMandatesQuery) -> Result<Page, ApiError> {
    Page::parse::<crate::ids::MandateId>(&ListQuery {
        limit: q.limit,
        starting_after: q.starting_after.clone(),
        ending_before: q.ending_before.clone(),
    })
}

/// A customer's mandates, newest first.
///
/// Filtered by status like `GET /mandates/list`. Read only; needs a secret key.
///
/// Fails: `resource_missing` (400), `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/customers/{customer_id}/mandates", tag = "mandates",
    params(("customer_id" = String, Path), ListMandatesQuery),
    responses((status = 200, body = List<Mandate>)), security(("api_key" = [])))]
pub async fn customer_mandates(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::CustomerId>,
    ApiQuery(mut q): ApiQuery<ListMandatesQuery>,
) -> Result<HttpResponse, ApiError> {
    let c = owned(&state, &caller, &id).await?;
    q.customer_id = Some(c.id.into());
    let page = mandate_page(&q)?;
    let list = store::mandates(
        &state.db,
        caller.merchant_id.as_str(),
        caller.test_mode(),
        &q,
        &page,
    )
    .await?;
    Ok(HttpResponse::Ok().json(list.map(|m| Mandate::from(&m))))
}

/// List mandates, filtered by status and customer.
///
/// The mandates of the key's merchant and mode, newest first; `status` is `pending`, `active`,
/// `inactive` or `revoked`. Read only; needs a secret key.
///
/// Fails: `resource_missing` (400).
///
/// Events: none.
#[utoipa::path(get, path = "/mandates/list", tag = "mandates", params(ListMandatesQuery),
    responses((status = 200, body = List<Mandate>)), security(("api_key" = [])))]
pub async fn list_mandates(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    ApiQuery(q): ApiQuery<ListMandatesQuery>,
) -> Result<HttpResponse, ApiError> {
    if let Some(s) = &q.status {
        if !matches!(s.as_str(), "pending" | "active" | "inactive" | "revoked") {
            return Err(ApiError::invalid_param(
                "status",
                format!("unknown status {s:?}"),
            ));
        }
    }
    let page = mandate_page(&q)?;
    let list = store::mandates(
        &state.db,
        caller.merchant_id.as_str(),
        caller.test_mode(),
        &q,
        &page,
    )
    .await?;
    Ok(HttpResponse::Ok().json(list.map(|m| Mandate::from(&m))))
}

async fn owned_mandate(
    state: &AppState,
    caller: &Caller,
    id: &crate::ids::MandateId,
) -> Result<payd_entity::mandate::Model, ApiError> {
    store::find_mandate(&state.db, id)
        .await?
        .filter(|m| m.merchant_id == caller.merchant_id && m.test_mode == caller.test_mode())
        .ok_or_else(|| ApiError::not_found("mandate"))
}

/// Retrieve a mandate.
///
/// Its customer, the saved method it charges, its type, amount limit, currency, status and
/// term. Read only; needs a secret key.
///
/// Fails: `resource_missing` (404).
///
/// Events: none.
#[utoipa::path(get, path = "/mandates/{mandate_id}", tag = "mandates", params(("mandate_id" = String, Path)),
    responses((status = 200, body = Mandate), (status = 404, body = crate::error::ErrorBody)), security(("api_key" = [])))]
pub async fn retrieve_mandate(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::MandateId>,
) -> Result<HttpResponse, ApiError> {
    Ok(HttpResponse::Ok().json(Mandate::from(&owned_mandate(&state, &caller, &id).await?)))
}

/// Revoke a mandate: it can never be charged again.
///
/// Any status but `revoked` becomes `revoked`; an off-session charge under it is refused from
/// then on (409 `mandate_revoked`). Needs a secret key.
///
/// Fails: `resource_missing` (404), `invalid_state` (409), `concurrent_update` (409).
///
/// Events: `mandate_revoked`.
#[utoipa::path(post, path = "/mandates/revoke/{mandate_id}", tag = "mandates", params(("mandate_id" = String, Path)),
    responses((status = 200, body = Mandate), (status = 409, body = crate::error::ErrorBody)), security(("api_key" = [])))]
pub async fn revoke_mandate(
    SecretKey(caller): SecretKey,
    state: web::Data<AppState>,
    PathId(id): PathId<crate::ids::MandateId>,
) -> Result<HttpResponse, ApiError> {
    let m = owned_mandate(&state, &caller, &id).await?;
    if m.status == payd_model::mandates::Status::Revoked {
        return Err(ApiError::conflict(
            "invalid_state",
            "the mandate is revoked already",
        ));
    }
    let now = state.clock.now();
    let (revoked, deliveries) = store::revoke_mandate(&state.db, &m, now).await?;
    if deliveries > 0 {
        state.wake.now();
    }
    Ok(HttpResponse::Ok().json(Mandate::from(&revoked)))
}

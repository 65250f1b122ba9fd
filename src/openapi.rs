//! The OpenAPI document, generated from the handlers' annotations, and the docs page that
//! renders it from assets embedded in the binary.

use actix_web::{web, HttpResponse};
use utoipa::{
    openapi::security::{ApiKey, ApiKeyValue, SecurityScheme},
    Modify, OpenApi,
};
use utoipa_swagger_ui::SwaggerUi;

use crate::{accounts, customers, events, ops, pagination, payments, refunds, webhooks};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "payd",
        description = "A self-hostable payment service: payments, customers, refunds, disputes, subscriptions, catalog, invoices, payouts and signed webhooks.",
    ),
    paths(
        ops::live,
        ops::ready,
        ops::metrics,
        ops::version,
        accounts::routes::create_merchant,
        accounts::routes::get_account,
        accounts::routes::list_shops,
        accounts::routes::create_shop,
        accounts::routes::list_api_keys,
        accounts::routes::create_api_key,
        accounts::routes::revoke_api_key,
        payments::routes::create_payment,
        payments::routes::retrieve_payment,
        payments::routes::update_payment,
        payments::routes::confirm_payment,
        payments::routes::capture_payment,
        payments::routes::cancel_payment,
        payments::routes::list_payments,
        payments::routes::list_attempts,
        payments::routes::status_history,
        payments::routes::payment_lines,
        payments::routes::routing_decisions,
        payments::routes::list_processors,
        payments::routes::add_processor,
        payments::routes::get_routing,
        payments::routes::put_routing,
        payments::checkout::page,
        payments::checkout::status,
        payments::checkout::confirm,
        payments::checkout::challenge_page,
        payments::checkout::complete_challenge,
        refunds::routes::create_refund,
        refunds::routes::retrieve_refund,
        refunds::routes::update_refund,
        refunds::routes::list_refunds,
        customers::routes::create_customer,
        customers::routes::list_customers,
        customers::routes::retrieve_customer,
        customers::routes::update_customer,
        customers::routes::delete_customer,
        customers::routes::list_methods,
        customers::routes::set_default_method,
        customers::routes::delete_method,
        customers::routes::customer_mandates,
        customers::routes::list_mandates,
        customers::routes::retrieve_mandate,
        customers::routes::revoke_mandate,
        events::routes::list_events,
        events::routes::list_attempts,
        events::routes::retry_event,
        webhooks::routes::get_endpoint,
        webhooks::routes::put_endpoint,
        webhooks::routes::rotate_secret,
    ),
    components(schemas(crate::error::ErrorType, ErrorBody, pagination::ListQuery)),
    modifiers(&Security),
    tags(
        (name = "payments", description = "Payments: create, confirm, capture, cancel, and their attempts, history, lines and routing"),
        (name = "checkout", description = "The hosted checkout a buyer uses with the payment's client_secret"),
        (name = "refunds", description = "Refunds: full, partial and by product line"),
        (name = "customers", description = "Customers and their saved payment methods"),
        (name = "mandates", description = "Mandates to charge a saved method off-session"),
        (name = "events", description = "Events, their delivery attempts, and replays"),
        (name = "webhooks", description = "A shop's webhook endpoint and signing secret"),
        (name = "account", description = "The merchant's shops, API keys, processors and routing"),
        (name = "admin", description = "Operator routes (admin key)"),
        (name = "operations", description = "Health, metrics and version"),
    )
)]
pub struct ApiDoc;

/// The error body every non-2xx answer carries.
#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub struct ErrorBody {
    error: ErrorDetail,
}

#[derive(utoipa::ToSchema)]
#[allow(dead_code)]
pub struct ErrorDetail {
    #[schema(value_type = crate::error::ErrorType)]
    r#type: String,
    /// A stable snake_case code, e.g. `parameter_missing`, `invalid_state`.
    code: String,
    message: String,
    /// The request field or header the error is about.
    param: Option<String>,
    request_id: String,
}

struct Security;

impl Modify for Security {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        openapi.info.version = env!("CARGO_PKG_VERSION").to_owned();
        let components = openapi.components.get_or_insert_with(Default::default);
        components.add_security_scheme(
            "api_key",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "api-key",
                "A secret key (snd_… sandbox, prd_… live); publishable keys (pk_…) only on browser routes",
            ))),
        );
        components.add_security_scheme(
            "admin_key",
            SecurityScheme::ApiKey(ApiKey::Header(ApiKeyValue::with_description(
                "api-key",
                "The operator's admin key (PAYD_ADMIN_KEY)",
            ))),
        );
    }
}

pub fn configure(cfg: &mut web::ServiceConfig) {
    cfg.service(SwaggerUi::new("/docs/{_:.*}").url("/openapi.json", ApiDoc::openapi()))
        .service(web::resource("/docs").route(web::get().to(docs_redirect)));
}

async fn docs_redirect() -> HttpResponse {
    HttpResponse::PermanentRedirect()
        .insert_header(("location", "/docs/"))
        .finish()
}

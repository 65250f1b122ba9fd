//! The OpenAPI document, generated from the handlers' annotations, and the docs page that
//! renders it from assets embedded in the binary.

use actix_web::{web, HttpResponse};
use utoipa::{
    openapi::{
        header::HeaderBuilder,
        path::{Operation, Parameter, ParameterBuilder, ParameterIn, PathItem},
        schema::{AdditionalProperties, ObjectBuilder, Schema, SchemaType, Type},
        security::{ApiKey, ApiKeyValue, SecurityScheme},
        Content, Ref, RefOr, Required, ResponseBuilder,
    },
    Modify, OpenApi,
};
use utoipa_swagger_ui::SwaggerUi;

use crate::{event_types, http::Routes, pagination};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "payd",
        description = "A self-hostable payment service: payments, customers, saved payment methods, mandates, refunds, disputes with their evidence, a catalog, subscriptions, invoices and credit notes, and signed webhooks.",
    ),
    components(schemas(crate::error::ErrorType, crate::error::ErrorBody, pagination::ListQuery,
        // Event objects no route answers (the webhooks section names them).
        crate::subscriptions::api::InvoicePaid, crate::subscriptions::api::InvoiceDisputed)),
    tags(
        (name = "payments", description = "Payments: create, confirm, capture, cancel, and their attempts, history, lines and routing"),
        (name = "checkout", description = "The hosted checkout a buyer uses with the payment's client_secret"),
        (name = "refunds", description = "Refunds: full, partial and by product line"),
        (name = "disputes", description = "Disputes, their evidence files, accept and submit"),
        (name = "wallet cases", description = "A wallet processor's seller cases, imported as disputes, with their history and actions"),
        (name = "sandbox", description = "Sandbox triggers: what a buyer or a processor would do (test keys of a sandbox deployment only)"),
        (name = "products", description = "The catalog: products, immutable prices, add-on groups, bundles, categories, images, sales reports and import"),
        (name = "subscriptions", description = "Subscriptions billed every period, their cycles, pause, resume and cancel"),
        (name = "invoices", description = "Invoices and credit notes with gapless numbers and PDFs, share links, invoice settings and tax rules"),
        (name = "payouts", description = "Payouts of a shop's available balance, the balance and its ledger"),
        (name = "customers", description = "Customers and their saved payment methods"),
        (name = "mandates", description = "Mandates to charge a saved method off-session"),
        (name = "events", description = "Events, their delivery attempts, and replays"),
        (name = "webhooks", description = "A shop's webhook endpoint and signing secret"),
        (name = "account", description = "The merchant's shops, API keys, processors and routing"),
        (name = "processors", description = "What a connected processor (Stripe) tells payd: its signed events"),
        (name = "admin", description = "Operator routes (admin key)"),
        (name = "operations", description = "Health, metrics and version"),
    )
)]
struct ApiDoc;

/// The document: the service's description, the paths of every file of routes the service
/// mounts (collected where they are registered), and the shared security schemes and error
/// answers.
pub fn document<'a>(routes: impl IntoIterator<Item = &'a Routes>) -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi();
    for r in routes {
        doc.merge((r.api)());
    }
    Security.modify(&mut doc);
    CommonErrors.modify(&mut doc);
    FreeFormObjects.modify(&mut doc);
    Webhooks.modify(&mut doc);
    for (_, op) in doc.paths.paths.values_mut().flat_map(operations) {
        crate::examples::attach(op);
    }
    doc
}

/// Every operation of a path (the methods payd mounts), with whether it is a `POST`.
fn operations(item: &mut PathItem) -> impl Iterator<Item = (bool, &mut Operation)> {
    [
        (false, &mut item.get),
        (false, &mut item.put),
        (true, &mut item.post),
        (false, &mut item.patch),
        (false, &mut item.delete),
    ]
    .into_iter()
    .filter_map(|(is_post, op)| op.as_mut().map(|op| (is_post, op)))
}

/// The events payd posts to a shop's endpoint: an envelope schema per object an event carries
/// among the components, and the OpenAPI 3.1 `webhooks` section with one operation per event
/// type (both from `event_types`).
struct Webhooks;

impl Modify for Webhooks {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        for (name, schema) in event_types::envelope_schemas() {
            match serde_json::from_value::<RefOr<utoipa::openapi::Schema>>(schema) {
                Ok(schema) => {
                    components.schemas.insert(name, schema);
                }
                Err(e) => {
                    tracing::error!(name, error = %e, "an event envelope schema does not read as a schema")
                }
            }
        }
        // utoipa 5 has no field for `webhooks`; its extensions are flattened into the document's
        // top level, and the map takes a key without the `x-` its builder adds.
        openapi
            .extensions
            .get_or_insert_with(Default::default)
            .insert("webhooks".to_owned(), event_types::webhooks());
    }
}

/// A property typed only `object` (`metadata`, a delivery's headers) takes any keys: said
/// explicitly (`additionalProperties: true`), so that generators make it a map of any values
/// rather than an object that can have no fields.
struct FreeFormObjects;

impl Modify for FreeFormObjects {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let Some(components) = &mut openapi.components else {
            return;
        };
        for schema in components.schemas.values_mut() {
            let RefOr::T(Schema::Object(object)) = schema else {
                continue;
            };
            for property in object.properties.values_mut() {
                if let RefOr::T(Schema::Object(p)) = property {
                    let bare = p.schema_type == SchemaType::Type(Type::Object)
                        && p.properties.is_empty()
                        && p.additional_properties.is_none();
                    if bare {
                        p.additional_properties =
                            Some(Box::new(AdditionalProperties::FreeForm(true)));
                    }
                }
            }
        }
    }
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

/// The error answers that the layers every request passes through can give, added to each
/// operation that can get them (a handler's own description of one is kept):
///
/// - any operation: 429 (the per-key rate limit) and 503 (the request deadline, a full mailbox);
/// - with the admin key: 401; with an API key: 401, 403, and 404 for an `x-profile-id` that
///   names no shop of the caller;
/// - with parameters or a body: 400; with a path parameter: 404;
/// - with a body: 413 and 415;
/// - POST: 400 and 409 from `Idempotency-Key` (documented as a header parameter).
struct CommonErrors;

/// `(status, component name, description)` of the shared error responses.
const ERRORS: [(&str, &str, &str); 9] = [
    (
        "400",
        "BadRequest",
        "The request is invalid: `param` names the field, query parameter or header",
    ),
    (
        "401",
        "Unauthorized",
        "The key (API key or admin key) is missing, unknown or revoked",
    ),
    (
        "403",
        "Forbidden",
        "The key may not do this (a publishable key, another shop)",
    ),
    (
        "404",
        "NotFound",
        "No such object for this merchant and mode, or no such shop",
    ),
    (
        "409",
        "Conflict",
        "The object's state forbids this, or the Idempotency-Key is in use or was used otherwise",
    ),
    (
        "413",
        "PayloadTooLarge",
        "The body is larger than the configured limit",
    ),
    (
        "415",
        "UnsupportedMediaType",
        "The body is not `application/json`",
    ),
    (
        "429",
        "TooManyRequests",
        "Too many requests with this API key; retry after `Retry-After` seconds",
    ),
    (
        "503",
        "Unavailable",
        "Not now (the request deadline passed, the object is overloaded); see `Retry-After`",
    ),
];

fn error_content() -> Content {
    Content::new(Some(Ref::from_schema_name("ErrorBody")))
}

fn idempotency_key() -> Parameter {
    ParameterBuilder::new()
        .name("Idempotency-Key")
        .parameter_in(ParameterIn::Header)
        .required(Required::False)
        .description(Some(
            "Makes a retry safe: the same key with the same request answers the stored answer \
             (`idempotent-replayed: true`); with another request it is 409.",
        ))
        .schema(Some(
            ObjectBuilder::new()
                .schema_type(Type::String)
                .min_length(Some(1))
                .max_length(Some(255))
                .pattern(Some("^[!-~]+$")),
        ))
        .build()
}

fn add_errors(op: &mut Operation, is_post: bool) {
    let params = op.parameters.as_deref().unwrap_or_default();
    let has_path = params.iter().any(|p| p.parameter_in == ParameterIn::Path);
    let has_params = !params.is_empty();
    let has_body = op.request_body.is_some();
    // A requirement's schemes are private fields; its JSON names them.
    let needs = |scheme: &str| {
        op.security.iter().flatten().any(|requirement| {
            serde_json::to_value(requirement).is_ok_and(|v| v.get(scheme).is_some())
        })
    };
    let mut codes = vec!["429", "503"];
    if needs("admin_key") {
        codes.push("401");
    }
    if needs("api_key") {
        codes.extend(["401", "403", "404"]);
    }
    if has_params || has_body || is_post {
        codes.push("400");
    }
    if has_path {
        codes.push("404");
    }
    if has_body {
        codes.extend(["413", "415"]);
    }
    if is_post {
        codes.push("409");
        op.parameters
            .get_or_insert_with(Vec::new)
            .push(idempotency_key());
    }
    for (status, name, _) in ERRORS.iter().filter(|(s, _, _)| codes.contains(s)) {
        op.responses
            .responses
            .entry((*status).to_owned())
            .or_insert_with(|| RefOr::Ref(Ref::new(format!("#/components/responses/{name}"))));
    }
    // An error a handler documents itself keeps its description and gets the error body.
    for (status, response) in &mut op.responses.responses {
        let RefOr::T(response) = response else {
            continue;
        };
        if !(status.starts_with('4') || status.starts_with('5')) {
            continue;
        }
        if response.description.is_empty() {
            if let Some((_, _, description)) = ERRORS.iter().find(|(s, _, _)| s == status) {
                response.description = (*description).to_owned();
            }
        }
        if response.content.is_empty() {
            response
                .content
                .insert("application/json".to_owned(), error_content());
        }
    }
}

impl Modify for CommonErrors {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        for (status, name, description) in ERRORS {
            let mut response = ResponseBuilder::new()
                .description(description)
                .content("application/json", error_content());
            if status == "429" || status == "503" {
                response = response.header(
                    "Retry-After",
                    HeaderBuilder::new()
                        .schema(ObjectBuilder::new().schema_type(Type::Integer))
                        .description(Some("Seconds to wait before retrying"))
                        .build(),
                );
            }
            components
                .responses
                .insert(name.to_owned(), RefOr::T(response.build()));
        }
        for (is_post, op) in openapi.paths.paths.values_mut().flat_map(operations) {
            add_errors(op, is_post);
        }
    }
}

/// `/openapi.json` and the docs page that renders it.
pub fn configure(cfg: &mut web::ServiceConfig, doc: utoipa::openapi::OpenApi) {
    cfg.service(SwaggerUi::new("/docs/{_:.*}").url("/openapi.json", doc))
        .service(web::resource("/docs").route(web::get().to(docs_redirect)));
}

async fn docs_redirect() -> HttpResponse {
    HttpResponse::PermanentRedirect()
        .insert_header(("location", "/docs/"))
        .finish()
}

//! Every event type payd sends, with its `content.type` and when it is sent: the one list the
//! OpenAPI document's `webhooks` section and `docs/events.md` are made from. The outbox checks,
//! in debug builds (every test run), that each event it records is a row here.

use serde_json::{json, Map, Value};

/// What `content.object` is: the API's object, exactly as its `GET` answers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Content {
    Payment,
    Refund,
    Dispute,
    Mandate,
    Subscription,
    Invoice,
    Payout,
    ShopRisk,
    WebhookEndpoint,
}

impl Content {
    /// Every content type, in the order of the docs.
    pub const ALL: [Content; 9] = [
        Content::Payment,
        Content::Refund,
        Content::Dispute,
        Content::Mandate,
        Content::Subscription,
        Content::Invoice,
        Content::Payout,
        Content::ShopRisk,
        Content::WebhookEndpoint,
    ];

    /// `content.type`.
    pub const fn name(self) -> &'static str {
        match self {
            Content::Payment => "payment_details",
            Content::Refund => "refund_details",
            Content::Dispute => "dispute_details",
            Content::Mandate => "mandate_details",
            Content::Subscription => "subscription_details",
            Content::Invoice => "merchant_invoice_details",
            Content::Payout => "payout_details",
            Content::ShopRisk => "shop_risk_details",
            Content::WebhookEndpoint => "webhook_endpoint_details",
        }
    }

    /// The OpenAPI component `content.object` is.
    pub const fn schema(self) -> &'static str {
        match self {
            Content::Payment => "Payment",
            Content::Refund => "Refund",
            Content::Dispute => "Dispute",
            Content::Mandate => "Mandate",
            Content::Subscription => "Subscription",
            Content::Invoice => "Invoice",
            Content::Payout => "Payout",
            Content::ShopRisk => "RiskRecord",
            Content::WebhookEndpoint => "Endpoint",
        }
    }

    /// The route that reads the object now.
    pub const fn read_by(self) -> &'static str {
        match self {
            Content::Payment => "GET /payments/{payment_id}",
            Content::Refund => "GET /refunds/{refund_id}",
            Content::Dispute => "GET /disputes/{dispute_id}",
            Content::Mandate => "GET /mandates/{mandate_id}",
            Content::Subscription => "GET /subscriptions/{subscription_id}",
            Content::Invoice => "GET /invoices/{invoice_id}",
            Content::Payout => "GET /payouts/{payout_id}",
            Content::ShopRisk => "GET /account/shops/{profile_id}/risk",
            Content::WebhookEndpoint => "GET /account/shops/{profile_id}/webhook",
        }
    }
}

/// One event type.
pub struct EventType {
    pub name: &'static str,
    pub content: Content,
    /// When it is sent.
    pub when: &'static str,
    /// The OpenAPI component `content.object` is, where it is not its content type's object.
    pub object: Option<&'static str>,
}

impl EventType {
    /// The OpenAPI component `content.object` is.
    pub fn object_schema(&self) -> &'static str {
        self.object.unwrap_or(self.content.schema())
    }

    /// The OpenAPI component of the whole event: `Event_` and the object's component.
    pub fn envelope_schema(&self) -> String {
        format!("Event_{}", self.object_schema())
    }
}

const fn e(name: &'static str, content: Content, when: &'static str) -> EventType {
    EventType {
        name,
        content,
        when,
        object: None,
    }
}

/// An event type whose object is `object`, not its content type's object.
const fn with(
    name: &'static str,
    content: Content,
    object: &'static str,
    when: &'static str,
) -> EventType {
    EventType {
        name,
        content,
        when,
        object: Some(object),
    }
}

use Content::*;

/// Every event type payd sends.
pub const EVENT_TYPES: &[EventType] = &[
    e("payment_succeeded", Payment, "The payment is `succeeded` (captured in full, at once or later)."),
    e("payment_failed", Payment, "The payment is `failed` or `declined` (sent on every declined confirm)."),
    e("payment_processing", Payment, "The payment is `processing`: its outcome is not known yet and follows in another event."),
    e("payment_authorized", Payment, "The payment is `requires_capture`."),
    e("payment_partially_authorized", Payment, "The payment is `partially_authorized_and_requires_capture`."),
    e("payment_captured", Payment, "A partial capture: `partially_captured` or `partially_captured_and_capturable` (sent on each one)."),
    e("payment_cancelled", Payment, "The payment is `cancelled`."),
    e("payment_cancelled_post_capture", Payment, "The payment is `cancelled_post_capture`."),
    e("payment_expired", Payment, "The authorization lapsed uncaptured, or the buyer never paid: `expired`."),
    e("action_required", Payment, "The payment waits for someone: `requires_customer_action` (3-D Secure: send the buyer to `next_action`), `requires_merchant_action` or `conflicted`."),
    e("refund_succeeded", Refund, "A refund succeeded."),
    e("refund_failed", Refund, "A refund failed; its amount is refundable again."),
    e("dispute_opened", Dispute, "The processor reported a dispute (or a wallet case opened one); again when an open dispute moves to a later `stage`."),
    e("dispute_challenged", Dispute, "Evidence was submitted (or a wallet case went under review); again when a challenged dispute moves to a later `stage`."),
    e("dispute_accepted", Dispute, "The merchant accepted the dispute."),
    e("dispute_won", Dispute, "The processor decided a challenged dispute for the merchant."),
    e("dispute_lost", Dispute, "The processor decided a challenged dispute for the buyer."),
    e("dispute_expired", Dispute, "The response deadline passed with nothing submitted."),
    e("dispute_cancelled", Dispute, "The buyer withdrew the wallet case the dispute follows."),
    e("mandate_active", Mandate, "A mandate can be charged off-session."),
    e("mandate_revoked", Mandate, "A mandate was revoked (by the merchant, or its method was deleted)."),
    e("subscription_created", Subscription, "A subscription was created."),
    e("subscription_active", Subscription, "A subscription is `active` (its first cycle paid, or back from `past_due`)."),
    e("subscription_paused", Subscription, "A subscription was paused."),
    e("subscription_resumed", Subscription, "A paused subscription was resumed."),
    e("subscription_cancelled", Subscription, "A subscription was cancelled."),
    e("subscription_past_due", Subscription, "A cycle's charge failed; retries follow the schedule."),
    e("subscription_expired", Subscription, "A subscription reached its end (its term, or retries exhausted)."),
    with("invoice_paid", Subscription, "InvoicePaid", "A subscription cycle was paid: the subscription, with the cycle in `invoice` and its payment in `payment` (`null` when a billing processor collected it)."),
    with("invoice_payment_failed", Subscription, "InvoicePaid", "A subscription cycle's charge failed (retries may follow): the same shape as `invoice_paid`, `payment` the declined payment or `null`."),
    with("invoice_disputed", Subscription, "InvoiceDisputed", "A cycle a billing processor collected was charged back at the processor."),
    e("merchant_invoice_finalized", Invoice, "An invoice or a credit note was finalized (its number, taxes and PDF are frozen)."),
    e("merchant_invoice_voided", Invoice, "An invoice was voided."),
    e("payout_initiated", Payout, "A payout went to the processor."),
    e("payout_processing", Payout, "The processor holds the payout as pending."),
    e("payout_success", Payout, "The payout was paid."),
    e("payout_failed", Payout, "The payout failed or was ineligible; its amount is available again."),
    e("payout_cancelled", Payout, "The payout was cancelled."),
    e("payout_expired", Payout, "The payout waited too long for its details and expired."),
    e("payout_reversed", Payout, "The bank returned a paid payout."),
    e("shop_risk_band_escalated", ShopRisk, "A shop's risk band rose from one assessment to the next."),
    e("webhook_endpoint_disabled", WebhookEndpoint, "The shop's endpoint failed for `webhooks.disable_after_secs` and was disabled. Listed for the merchant (`GET /events`), never sent to that endpoint."),
];

/// Whether an event of `name` with `content.type` `content` is a row of [`EVENT_TYPES`].
pub fn listed(name: &str, content: &str) -> bool {
    EVENT_TYPES
        .iter()
        .any(|t| t.name == name && t.content.name() == content)
}

/// The event envelopes, as OpenAPI components (`Event_Payment`, `Event_InvoicePaid` …): one
/// per object an event carries, its `event_type` one of the types that carry it.
pub fn envelope_schemas() -> Vec<(String, Value)> {
    let mut envelopes: Vec<(String, Value)> = Vec::new();
    for t in EVENT_TYPES {
        let name = t.envelope_schema();
        if envelopes.iter().any(|(n, _)| *n == name) {
            continue;
        }
        let types: Vec<&str> = EVENT_TYPES
            .iter()
            .filter(|o| o.envelope_schema() == name)
            .map(|o| o.name)
            .collect();
        let schema = json!({
            "type": "object",
            "description": format!("An event whose `content.object` is a `{}`", t.object_schema()),
            "required": ["merchant_id", "event_id", "event_type", "timestamp", "content"],
            "additionalProperties": false,
            "properties": {
                "merchant_id": {"type": "string"},
                "event_id": {"type": "string", "description": "The same on every attempt: deduplicate by it (`webhook-id`)"},
                "event_type": {"type": "string", "enum": types},
                "timestamp": {"type": "string", "format": "date-time"},
                "content": {
                    "type": "object",
                    "required": ["type", "object"],
                    "additionalProperties": false,
                    "properties": {
                        "type": {"type": "string", "enum": [t.content.name()]},
                        "object": {"$ref": format!("#/components/schemas/{}", t.object_schema())},
                    },
                },
            },
        });
        envelopes.push((name, schema));
    }
    envelopes
}

/// The OpenAPI 3.1 `webhooks` section: one `POST` per event type, the body its envelope.
pub fn webhooks() -> Value {
    let mut hooks = Map::new();
    for t in EVENT_TYPES {
        let body = format!("#/components/schemas/{}", t.envelope_schema());
        let mut content = json!({"schema": {"$ref": body}});
        if let Some(event) = crate::examples::event(t.name) {
            content["examples"] =
                json!({"recorded": {"summary": "A delivered event", "value": event}});
        }
        hooks.insert(
            t.name.to_owned(),
            json!({"post": {
                "summary": t.name,
                "description": format!("{} `content.type`: `{}`.", t.when, t.content.name()),
                "tags": ["webhooks"],
                "parameters": [
                    {"name": "webhook-id", "in": "header", "required": true, "schema": {"type": "string"}},
                    {"name": "webhook-timestamp", "in": "header", "required": true, "schema": {"type": "string"}},
                    {"name": "webhook-signature", "in": "header", "required": true, "schema": {"type": "string"}, "description": "Standard Webhooks: `v1,<base64 HMAC-SHA256>` (docs/webhooks.md)"},
                ],
                "requestBody": {"required": true, "content": {"application/json": content}},
                "responses": {"2XX": {"description": "Acknowledged: any 2xx within the timeout. Anything else is retried (docs/webhooks.md)"}},
            }}),
        );
    }
    Value::Object(hooks)
}

/// The table of `docs/events.md`.
pub fn markdown() -> String {
    let mut out = String::from(
        "| event_type | content.type | when | content.object | sample |\n| --- | --- | --- | --- | --- |\n",
    );
    for t in EVENT_TYPES {
        let object = match t.object {
            None => format!(
                "`{}` (read it now: `{}`)",
                t.object_schema(),
                t.content.read_by()
            ),
            Some(schema) => format!("`{schema}`"),
        };
        out.push_str(&format!(
            "| `{}` | `{}` | {} | {object} | [{0}.json](examples/events/{0}.json) |\n",
            t.name,
            t.content.name(),
            t.when,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_event_type_is_listed_once() {
        for (i, a) in EVENT_TYPES.iter().enumerate() {
            assert!(
                EVENT_TYPES[i + 1..].iter().all(|b| b.name != a.name),
                "{} twice",
                a.name
            );
            assert!(a.when.ends_with('.'), "{}: say when", a.name);
        }
        for content in Content::ALL {
            assert!(
                EVENT_TYPES.iter().any(|t| t.content == content),
                "no event carries {content:?}"
            );
        }
    }

    /// Every event type has a sample (the webhooks section and docs/events.md show it), and
    /// every sample is of an event type payd sends.
    #[test]
    fn each_event_type_has_a_recorded_sample() {
        for t in EVENT_TYPES {
            assert!(
                crate::examples::event(t.name).is_some(),
                "{}: no sample in docs/examples/events (PAYD_RECORD_EXAMPLES=1 cargo test records \
                 one from the first test that receives it)",
                t.name
            );
        }
        for name in crate::examples::event_types() {
            assert!(
                EVENT_TYPES.iter().any(|t| t.name == name),
                "docs/examples/events/{name}.json: payd sends no such event type"
            );
        }
    }

    /// docs/events.md holds the table made from [`EVENT_TYPES`].
    #[test]
    fn the_events_page_is_the_table() {
        crate::docs_table::check(
            "docs/events.md",
            "<!-- events: made by src/event_types.rs; PAYD_UPDATE_DOCS=1 cargo test --lib event_types writes it -->\n",
            "<!-- events end -->",
            &markdown(),
        );
    }
}

//! The examples in `/openapi.json`, taken from real answers: the test suite, run with
//! `PAYD_RECORD_EXAMPLES=1`, writes the first successful answer it gets from each operation to
//! `docs/examples/operations/<operationId>.json` and the first event of each type it receives
//! to `docs/examples/events/<event_type>.json` (tests/api/common/examples.rs); `build.rs` embeds
//! them. `tests/api/ops.rs` fails on an operation without one and on an example its schema no
//! longer accepts, so an example cannot drift from the answer it shows.

use serde::Deserialize;
use serde_json::Value;
use utoipa::openapi::{
    example::{Example, ExampleBuilder},
    path::Operation,
    Content, RefOr,
};

mod embedded {
    include!(concat!(env!("OUT_DIR"), "/examples.rs"));
}

/// One recorded exchange with an operation.
#[derive(Debug, Deserialize)]
pub struct Recorded {
    pub method: String,
    /// The path as sent, with its query.
    pub path: String,
    pub status: u16,
    /// The JSON body sent, if any.
    pub request: Option<Value>,
    /// The JSON body answered, if the answer was JSON.
    pub response: Option<Value>,
}

/// The recorded exchange with the operation of this `operationId`.
pub fn operation(operation_id: &str) -> Option<Recorded> {
    let (_, text) = embedded::OPERATIONS
        .iter()
        .find(|(id, _)| *id == operation_id)?;
    serde_json::from_str(text)
        .inspect_err(
            |e| tracing::error!(operation_id, error = %e, "a recorded example does not read"),
        )
        .ok()
}

/// The recorded sample of an event type.
pub fn event(event_type: &str) -> Option<Value> {
    let (_, text) = embedded::EVENTS.iter().find(|(t, _)| *t == event_type)?;
    serde_json::from_str(text)
        .inspect_err(|e| tracing::error!(event_type, error = %e, "a recorded event does not read"))
        .ok()
}

/// The event types that have a recorded sample.
pub fn event_types() -> impl Iterator<Item = &'static str> {
    embedded::EVENTS.iter().map(|(t, _)| *t)
}

const JSON: &str = "application/json";

/// An example named `recorded` whose summary is the request line it answered.
fn recorded(summary: &str, value: Value) -> (String, RefOr<Example>) {
    let example = ExampleBuilder::new()
        .summary(summary)
        .value(Some(value))
        .build();
    ("recorded".to_owned(), RefOr::T(example))
}

fn set_example(json: Option<&mut Content>, example: (String, RefOr<Example>)) {
    if let Some(json) = json {
        json.examples.extend([example]);
    }
}

/// Puts an operation's recorded request and answer on its JSON request body and on its
/// answer of the recorded status.
pub fn attach(op: &mut Operation) {
    let Some(rec) = op.operation_id.as_deref().and_then(operation) else {
        return;
    };
    let line = format!("{} {} → {}", rec.method, rec.path, rec.status);
    if let (Some(body), Some(value)) = (&mut op.request_body, rec.request) {
        set_example(body.content.get_mut(JSON), recorded(&line, value));
    }
    if let (Some(RefOr::T(answer)), Some(value)) = (
        op.responses.responses.get_mut(&rec.status.to_string()),
        rec.response,
    ) {
        set_example(answer.content.get_mut(JSON), recorded(&line, value));
    }
}

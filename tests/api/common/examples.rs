//! With `PAYD_RECORD_EXAMPLES=1`, the suite records the examples `/openapi.json` shows
//! (src/examples.rs): the first successful answer each operation gives to a test, into
//! `docs/examples/operations/<operationId>.json`, and the first event of each type a test's
//! receiver gets or an event listing shows (its `envelope`, the body its deliveries post),
//! into `docs/examples/events/<event_type>.json`. A file that exists is kept:
//! delete it to record it again. Without the variable nothing is written.

use std::{fs, io::Write, path::PathBuf, sync::OnceLock};

use serde_json::{json, Value};

/// The operations of payd's document, to name the one a request went to.
pub static ROUTES: OnceLock<Routes> = OnceLock::new();

pub struct Routes {
    /// `(method, the path's segments, operationId)`; a `{…}` segment matches any one segment.
    operations: Vec<(String, Vec<String>, String)>,
    /// The operations that take a JSON body (a test may send `{}` to one that takes none).
    take_json: Vec<String>,
}

impl Routes {
    pub fn of(doc: &Value) -> Self {
        let mut operations = Vec::new();
        let mut take_json = Vec::new();
        for (path, item) in doc["paths"].as_object().expect("the document's paths") {
            for (method, op) in item.as_object().into_iter().flatten() {
                if let Some(id) = op["operationId"].as_str() {
                    let segments = path.split('/').map(str::to_owned).collect();
                    operations.push((method.to_uppercase(), segments, id.to_owned()));
                    if op["requestBody"]["content"]["application/json"].is_object() {
                        take_json.push(id.to_owned());
                    }
                }
            }
        }
        Self {
            operations,
            take_json,
        }
    }

    /// The operation a request to `path` (without its query) goes to: of the templates that
    /// match, the one with the most literal segments (`/refunds/list`, not
    /// `/refunds/{refund_id}`).
    fn operation(&self, method: &str, path: &str) -> Option<&str> {
        let sent: Vec<&str> = path.split('/').collect();
        self.operations
            .iter()
            .filter(|(m, segments, _)| {
                m == method
                    && segments.len() == sent.len()
                    && segments
                        .iter()
                        .zip(&sent)
                        .all(|(t, s)| t == s || (t.starts_with('{') && !s.is_empty()))
            })
            .max_by_key(|(_, segments, _)| segments.iter().filter(|t| !t.starts_with('{')).count())
            .map(|(_, _, id)| id.as_str())
    }
}

fn recording() -> bool {
    std::env::var("PAYD_RECORD_EXAMPLES").is_ok_and(|v| v == "1")
}

fn dir(kind: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("docs/examples")
        .join(kind)
}

/// Writes `value` to `<kind>/<name>.json` unless that file exists (tests run in several
/// processes at once: the first to create it wins).
fn keep_first(kind: &str, name: &str, value: &Value) {
    let dir = dir(kind);
    fs::create_dir_all(&dir).expect("create docs/examples");
    let file = fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(dir.join(format!("{name}.json")));
    if let Ok(mut file) = file {
        let mut text = serde_json::to_string_pretty(value).expect("JSON");
        text.push('\n');
        file.write_all(text.as_bytes()).expect("write an example");
    }
}

/// Records one exchange when it is a success (or the redirect an operation answers) and the
/// operation has no example yet.
pub fn answer(method: &str, path: &str, request: Option<&[u8]>, status: u16, response: &[u8]) {
    if !recording() || !(200..400).contains(&status) {
        return;
    }
    let Some(routes) = ROUTES.get() else {
        return;
    };
    let bare = path.split('?').next().unwrap_or(path);
    let Some(id) = routes.operation(method, bare) else {
        return;
    };
    let json = |bytes: &[u8]| serde_json::from_slice::<Value>(bytes).ok();
    let response = json(response);
    // An event as listed carries its `envelope`: the body its deliveries post.
    if let Some(answer) = &response {
        let listed = answer["data"].as_array().into_iter().flatten();
        for envelope in listed.chain([answer]).map(|e| &e["envelope"]) {
            if let Some(kind) = envelope["event_type"].as_str() {
                keep_first("events", kind, envelope);
            }
        }
    }
    let example = json!({
        "method": method,
        "path": path,
        "status": status,
        "request": request
            .filter(|_| routes.take_json.iter().any(|t| t == id))
            .and_then(json),
        "response": response,
    });
    keep_first("operations", id, &example);
}

/// Records an event a receiver got when its type has no sample yet.
pub fn event(body: &[u8]) {
    if !recording() {
        return;
    }
    let Ok(event) = serde_json::from_slice::<Value>(body) else {
        return;
    };
    if let Some(kind) = event["event_type"].as_str() {
        keep_first("events", kind, &event);
    }
}

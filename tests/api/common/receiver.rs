//! An in-test webhook receiver on 127.0.0.1:0 whose answers the test scripts, recording
//! every request it gets, and holding every event it gets to the contract: the envelope schema
//! of its content type in payd's OpenAPI document (checked when the receiver is dropped).

use std::{
    collections::{HashMap, VecDeque},
    sync::{
        atomic::{AtomicUsize, Ordering},
        Arc, Mutex, OnceLock,
    },
    time::{Duration, Instant},
};

use serde_json::{json, Value};

/// The event schemas of payd's OpenAPI document, read once from the first app a test starts.
pub static CONTRACT: OnceLock<Contract> = OnceLock::new();

/// A validator per event type: the envelope its `webhooks` operation takes, resolving its
/// `$ref`s in the document's components.
pub struct Contract {
    events: HashMap<String, jsonschema::Validator>,
}

impl Contract {
    pub fn of(doc: &Value) -> Self {
        let hooks = doc["webhooks"]
            .as_object()
            .expect("the document's webhooks");
        let events = hooks
            .iter()
            .map(|(event_type, hook)| {
                let body = &hook["post"]["requestBody"]["content"]["application/json"]["schema"];
                (event_type.clone(), validator(doc, body))
            })
            .collect::<HashMap<_, _>>();
        assert!(events.len() >= 40, "the document has its event types");
        Self { events }
    }

    /// What is wrong with an event body, against its content type's envelope.
    pub fn violations(&self, body: &[u8]) -> Vec<String> {
        let Ok(event) = serde_json::from_slice::<Value>(body) else {
            return vec![format!("not JSON: {}", String::from_utf8_lossy(body))];
        };
        let kind = &event["event_type"];
        let Some(validator) = kind.as_str().and_then(|k| self.events.get(k)) else {
            return vec![format!(
                "{kind}: no such event type in the webhooks section"
            )];
        };
        validator
            .iter_errors(&event)
            .take(5)
            .map(|e| format!("{kind}: {e} at {}", e.instance_path))
            .collect()
    }
}

/// A JSON Schema 2020-12 validator of `schema`, a schema of payd's OpenAPI document `doc`
/// (its `$ref`s resolved in the document's components).
pub fn validator(doc: &Value, schema: &Value) -> jsonschema::Validator {
    let root = json!({"allOf": [schema], "components": doc["components"]});
    jsonschema::draft202012::new(&root)
        .unwrap_or_else(|e| panic!("not a valid schema: {e}: {schema}"))
}

use actix_web::{dev::ServerHandle, web, App, HttpRequest, HttpResponse, HttpServer};

/// How the receiver answers one request.
#[derive(Debug, Clone, Copy)]
pub struct Reply {
    pub status: u16,
    pub retry_after: Option<u64>,
    /// Wait this long before answering (to provoke timeouts).
    pub delay: Option<Duration>,
}

impl Reply {
    pub fn status(status: u16) -> Self {
        Self {
            status,
            retry_after: None,
            delay: None,
        }
    }

    /// 200, after `delay`.
    pub fn slow(delay: Duration) -> Self {
        Self {
            delay: Some(delay),
            ..Self::status(200)
        }
    }
}

/// A request as received.
#[derive(Debug, Clone)]
pub struct Received {
    pub headers: http::HeaderMap,
    pub body: web::Bytes,
    pub at: Instant,
}

impl Received {
    pub fn header(&self, name: &str) -> &str {
        self.headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
    }
}

#[derive(Default)]
struct State {
    received: Mutex<Vec<Received>>,
    script: Mutex<VecDeque<Reply>>,
    default: Mutex<Option<Reply>>,
    /// Requests being answered now, and the most there ever were at once.
    open: AtomicUsize,
    most_open: AtomicUsize,
}

pub struct Receiver {
    pub url: String,
    state: Arc<State>,
    handle: ServerHandle,
}

async fn receive(req: HttpRequest, body: web::Bytes, state: web::Data<Arc<State>>) -> HttpResponse {
    let mut headers = http::HeaderMap::new();
    for (name, value) in req.headers() {
        if let (Ok(n), Ok(v)) = (
            http::HeaderName::from_bytes(name.as_str().as_bytes()),
            http::HeaderValue::from_bytes(value.as_bytes()),
        ) {
            headers.append(n, v);
        }
    }
    let open = state.open.fetch_add(1, Ordering::SeqCst) + 1;
    state.most_open.fetch_max(open, Ordering::SeqCst);
    super::examples::event(&body);
    state.received.lock().unwrap().push(Received {
        headers,
        body,
        at: Instant::now(),
    });
    let reply = state
        .script
        .lock()
        .unwrap()
        .pop_front()
        .or(*state.default.lock().unwrap())
        .unwrap_or(Reply::status(200));
    if let Some(d) = reply.delay {
        actix_web::rt::time::sleep(d).await;
    }
    state.open.fetch_sub(1, Ordering::SeqCst);
    let mut res = HttpResponse::build(actix_web::http::StatusCode::from_u16(reply.status).unwrap());
    if let Some(s) = reply.retry_after {
        res.insert_header(("retry-after", s.to_string()));
    }
    res.body("ok")
}

impl Receiver {
    pub async fn start() -> Self {
        Self::start_on(0).await
    }

    /// Listens on a given port of 127.0.0.1 (0 picks one).
    pub async fn start_on(port: u16) -> Self {
        let state = Arc::new(State::default());
        let data = web::Data::new(state.clone());
        let server = HttpServer::new(move || {
            App::new()
                .app_data(data.clone())
                .default_service(web::to(receive))
        })
        .workers(1)
        .bind(("127.0.0.1", port))
        .unwrap();
        let port = server.addrs()[0].port();
        let server = server.run();
        let handle = server.handle();
        actix_web::rt::spawn(server);
        Self {
            url: format!("http://127.0.0.1:{port}/hooks"),
            state,
            handle,
        }
    }

    /// Answers the next requests with these, then with the default.
    pub fn script(&self, replies: impl IntoIterator<Item = Reply>) {
        self.state.script.lock().unwrap().extend(replies);
    }

    pub fn set_default(&self, reply: Reply) {
        *self.state.default.lock().unwrap() = Some(reply);
    }

    /// The most requests that were ever being answered at once.
    pub fn most_at_once(&self) -> usize {
        self.state.most_open.load(Ordering::SeqCst)
    }

    pub fn received(&self) -> Vec<Received> {
        self.state.received.lock().unwrap().clone()
    }

    /// Waits (at most ten seconds) until `n` requests have arrived.
    pub async fn wait_for(&self, n: usize) -> Vec<Received> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let got = self.received();
            if got.len() >= n {
                return got;
            }
            assert!(
                Instant::now() < deadline,
                "only {} of {n} requests arrived",
                got.len()
            );
            actix_web::rt::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// The `event_type` of every event received so far, in order of arrival.
    pub fn event_types(&self) -> Vec<String> {
        self.received()
            .iter()
            .filter_map(|r| serde_json::from_slice::<Value>(&r.body).ok())
            .filter_map(|e| e["event_type"].as_str().map(str::to_owned))
            .collect()
    }

    /// Waits (at most ten seconds) until an event of each of these types has arrived.
    pub async fn wait_for_types(&self, types: &[&str]) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let got = self.event_types();
            let missing: Vec<&&str> = types
                .iter()
                .filter(|t| !got.iter().any(|g| g == *t))
                .collect();
            if missing.is_empty() {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "no {missing:?} arrived within 10 s; got {got:?}"
            );
            actix_web::rt::time::sleep(Duration::from_millis(10)).await;
        }
    }

    pub async fn stop(&self) {
        self.handle.stop(false).await;
    }

    /// Every event received so far that breaks the contract, with why.
    pub fn contract_violations(&self) -> Vec<String> {
        let Some(contract) = CONTRACT.get() else {
            return Vec::new();
        };
        self.received()
            .iter()
            .flat_map(|r| contract.violations(&r.body))
            .collect()
    }
}

impl Drop for Receiver {
    /// Every event a test received matched its schema (unless the test failed already).
    fn drop(&mut self) {
        if std::thread::panicking() {
            return;
        }
        let violations = self.contract_violations();
        assert!(
            violations.is_empty(),
            "events that break the OpenAPI document's webhooks contract: {violations:#?}"
        );
    }
}

//! Wiring: the application state, the HTTP server with its middleware, the scheduler and
//! the actor arbiters, built from one `Settings`.

use std::{net::TcpListener, sync::Arc, time::Duration};

use actix_web::{
    dev::{Server, ServerHandle},
    middleware::{from_fn, DefaultHeaders},
    web, App, HttpServer,
};
use chrono::Duration as ChronoDuration;
use payd_actors::{ArbiterPool, RegistryConfig};

use crate::{
    accounts,
    clock::SharedClock,
    commit::Db,
    customers, db, disputes,
    error::ApiError,
    events, files,
    http::{self, BodyLimit},
    idempotency, invoices, ledger,
    lookups::{Cache, Generation},
    mount::{Env, Mount, Mounted},
    openapi, ops, payments, payouts,
    processors::{connect::Connections, sandbox::Sandbox},
    products,
    ratelimit::{self, RateLimiter, RequestTimeout},
    refunds, risk, sales,
    scheduler::Scheduler,
    sealed::Keyring,
    settings::{DeploymentMode, Settings},
    state::AppState,
    subscriptions, test_clock,
    wake::Wake,
    wallet,
    webhooks::{self, dispatcher::Dispatcher},
};

/// The built service: bound to its port, not yet serving.
pub struct Application {
    port: u16,
    /// The port of `http.operator_listen`, when set.
    operator_port: Option<u16>,
    server: Server,
    state: web::Data<AppState>,
    dispatcher: web::Data<Dispatcher>,
    mounted: Arc<Mounted>,
}

/// How long shutdown waits for the webhook dispatcher's claim under way.
const DISPATCHER_STOP: Duration = Duration::from_secs(10);

impl Application {
    /// Connects, migrates, bootstraps and binds `settings.listen` (port 0 picks a free one).
    pub async fn build(settings: Settings, clock: SharedClock) -> anyhow::Result<Self> {
        let db = Db::connect(&settings.database).await?;
        db::migrate(&settings.database.url, db.conn()).await?;
        let keyring = keyring(&db, &settings).await?;
        let settings = Arc::new(settings);
        // Install the recorder before anything records.
        ops::prometheus();
        payd_actors::telemetry::describe_metrics();
        crate::telemetry::describe_metrics();
        crate::processors::remote::register_metrics();
        // It answered the migrations: up until a readiness check says otherwise.
        metrics::gauge!("payd_database_up").set(1.0);

        if settings.mode == DeploymentMode::Sandbox && settings.sandbox.demo_merchant {
            accounts::demo::bootstrap_demo(&db, &clock, &settings).await?;
        }

        let arbiters = ArbiterPool::try_new(match settings.actors.arbiters {
            0 => std::thread::available_parallelism().map_or(2, |n| n.get()),
            n => n,
        })?;
        let (listener, operator) = bind(&settings)?;
        let local = listener.local_addr()?;
        let port = local.port();
        let operator_port = match &operator {
            Some(l) => Some(l.local_addr()?.port()),
            None => None,
        };
        let public_url = settings
            .http
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{local}"));
        let wake = Wake::default();
        let generation =
            Generation::new(Duration::from_millis(settings.database.lookup_staleness_ms));
        let sandbox = Arc::new(Sandbox {
            async_delay: ChronoDuration::seconds(settings.sandbox.async_delay_secs as i64),
        });
        let connections = Arc::new(Connections::new(
            sandbox.clone(),
            keyring.clone(),
            settings.clone(),
        ));
        let env = Env {
            db: &db,
            clock: &clock,
            settings: &settings,
            keyring: &keyring,
            wake: &wake,
            registry_config: &RegistryConfig {
                mailbox_capacity: settings.actors.mailbox_capacity,
                idle_timeout: settings.idle_timeout(),
                release_memory: crate::alloc::release_free_memory,
            },
            arbiters: &arbiters,
            sandbox: &sandbox,
            connections: &connections,
            public_url: &public_url,
            generation: &generation,
        };
        let scheduler =
            Scheduler::new(db.conn().clone(), clock.clone(), settings.scheduler.clone());
        let mut m = Mount::new(scheduler);
        let dispatcher = web::Data::from(mount(&mut m, &env).await?);
        let (scheduler, mounted) = m.finish();
        scheduler.start_periodic().await?;
        let mounted = Arc::new(mounted);

        let state = web::Data::new(AppState {
            db,
            settings: settings.clone(),
            clock,
            scheduler: Arc::new(scheduler),
            arbiters,
            public_url: public_url.clone(),
            wake,
            keyring,
            shops: Default::default(),
            keys: Cache::new("api_key", &generation),
            generation,
        });
        let server = serve(
            listener,
            operator,
            &settings,
            state.clone(),
            mounted.clone(),
        )?;
        announce(&settings, port, operator_port, &public_url);
        Ok(Self {
            port,
            operator_port,
            server,
            state,
            dispatcher,
            mounted,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The port `/metrics` and `/admin/…` answer on, when `http.operator_listen` is set.
    pub fn operator_port(&self) -> Option<u16> {
        self.operator_port
    }

    pub fn state(&self) -> web::Data<AppState> {
        self.state.clone()
    }

    /// The webhook dispatcher (tests tick it by hand).
    pub fn dispatcher(&self) -> web::Data<Dispatcher> {
        self.dispatcher.clone()
    }

    /// On PostgreSQL, hears that another instance's commit queued deliveries and wakes this
    /// instance's dispatcher (if it sends webhooks).
    fn listen_for_wakes(&self) -> Option<db::WakeListener> {
        let settings = &self.state.settings.database;
        if !settings.notify || settings.is_sqlite() || !self.state.settings.webhooks.dispatch {
            return None;
        }
        let wake = self.state.wake.clone();
        let heard = move || wake.now();
        let url = settings.url.clone();
        match db::listen_for_wakes(url, heard) {
            Ok(listener) => Some(listener),
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for other instances' commits; polling");
                None
            }
        }
    }

    /// Stops the server (gracefully with `true`); `run_until_stopped` then returns.
    pub fn handle(&self) -> ServerHandle {
        self.server.handle()
    }

    /// Serves until SIGTERM/SIGINT or `handle().stop()`: stops accepting, drains in-flight
    /// requests, stops the scheduler, lets the webhook requests in flight finish and records
    /// them (handing back the claimed deliveries not yet sent), then stops the actors.
    pub async fn run_until_stopped(self) -> std::io::Result<()> {
        let scheduler = actix_rt::spawn(self.state.scheduler.clone().run());
        let lookups = actix_rt::spawn(self.state.generation.clone().watch(self.state.db.clone()));
        let sweepers = self.mounted.spawn_sweepers();
        // An API-only instance (`webhooks.dispatch = false`) leaves the sending to the others.
        let mut dispatcher = self
            .state
            .settings
            .webhooks
            .dispatch
            .then(|| actix_rt::spawn(self.dispatcher.clone().into_inner().run()));
        let wakes = self.listen_for_wakes();
        let signals = actix_rt::spawn(stop_on_signal(self.server.handle()));
        let result = self.server.await;
        signals.abort();
        drop(wakes);
        scheduler.abort();
        lookups.abort();
        // The claim under way completes, so its deliveries are queued (and handed back) rather
        // than left leased; a database that does not answer does not hold the exit.
        self.dispatcher.stop();
        if let Some(dispatcher) = &mut dispatcher {
            if tokio::time::timeout(DISPATCHER_STOP, &mut *dispatcher)
                .await
                .is_err()
            {
                dispatcher.abort();
            }
        }
        self.dispatcher.drain().await;
        for sweeper in sweepers {
            sweeper.abort();
        }
        self.mounted.passivate_all();
        self.state.arbiters.stop();
        tracing::info!("payd stopped");
        result
    }
}

/// The master keys, with every stored secret sealed under the current one (secrets stored
/// before sealing, or under an older master key, are sealed now); and, outside a pepper
/// rotation, the current pepper recorded on API keys made before payd recorded peppers.
async fn keyring(db: &Db, settings: &Settings) -> anyhow::Result<Arc<Keyring>> {
    let security = &settings.security;
    if crate::settings::split_list(&security.previous_key_peppers).count() == 0 {
        accounts::store::record_pepper(db.conn(), &security.key_pepper).await?;
    }
    let keyring = Arc::new(Keyring::from_settings(&settings.security)?);
    if keyring.is_sandbox_key() {
        tracing::warn!(
            "stored secrets are sealed with the built-in sandbox master key, which is public: set security.master_key (PAYD_SECURITY__MASTER_KEY) outside the sandbox"
        );
    }
    for warning in settings.production_warnings() {
        tracing::warn!("production guard off: {warning}");
    }
    let resealed = crate::sealed::reseal(db, &keyring).await?;
    if resealed > 0 {
        tracing::info!(
            resealed,
            key = keyring.current_id(),
            "stored secrets sealed with the current master key"
        );
    }
    Ok(keyring)
}

/// Every resource, once, in routing order (the first matching path wins): its routes, data,
/// actors and jobs. The webhook dispatcher comes back to be run.
async fn mount(m: &mut Mount, env: &Env<'_>) -> anyhow::Result<Arc<Dispatcher>> {
    m.routes(&[accounts::ROUTES, accounts::ADMIN_ROUTES]);
    let payments = payments::mount(m, env);
    m.routes(&[refunds::ROUTES]);
    let disputes = disputes::mount(m, env);
    payments::stripe_events::register_jobs(&mut m.scheduler, env, &payments, &disputes);
    wallet::mount(m, env, &payments, &disputes);
    m.routes(&[sales::ROUTES]);
    m.routes(&products::ROUTES);
    let tax = Arc::new(invoices::settings::CycleTaxRules { db: env.db.clone() });
    subscriptions::mount(m, env, &payments, tax);
    invoices::mount(m, env);
    m.routes(&[ledger::ROUTES]);
    payouts::mount(m, env);
    risk::mount(m, env);
    m.routes(&[test_clock::ROUTES]);
    files::mount(m, env);
    customers::mount(m, env);
    m.routes(&[events::ROUTES]);
    m.routes(&[crate::pages::ROUTES, crate::pages::embed::ROUTES]);
    m.data(web::Data::from(env.connections.clone()));
    let ttl = ChronoDuration::hours(env.settings.idempotency.ttl_hours as i64);
    idempotency::register_purge(&mut m.scheduler, env.db, ttl);
    webhooks::mount(m, env).await
}

/// The start's line (operators and tests read its port), and a sandbox's demo keys.
fn announce(settings: &Settings, port: u16, operator_port: Option<u16>, public_url: &str) {
    tracing::info!(
        port,
        operator_port,
        url = %public_url,
        docs = %format!("{public_url}/docs"),
        mode = ?settings.mode,
        "payd listening"
    );
    if settings.mode == DeploymentMode::Sandbox && settings.sandbox.demo_merchant {
        accounts::demo::show_demo_keys(&settings.sandbox.data_dir);
    }
}

/// Binds `listen` (port 0 picks a free one) and, when set, `http.operator_listen`.
fn bind(settings: &Settings) -> anyhow::Result<(TcpListener, Option<TcpListener>)> {
    let listener = TcpListener::bind(&settings.listen).map_err(|e| {
        anyhow::anyhow!(
            "cannot listen on {}: {e} (set PAYD_LISTEN to another address, e.g. 127.0.0.1:8081)",
            settings.listen
        )
    })?;
    let operator = match &settings.http.operator_listen {
        Some(addr) => Some(TcpListener::bind(addr).map_err(|e| {
            anyhow::anyhow!(
                "cannot listen on {addr}: {e} (set PAYD_HTTP__OPERATOR_LISTEN to another address)"
            )
        })?),
        None => None,
    };
    Ok((listener, operator))
}

/// The HTTP server: the middleware every request passes, the operations routes and the API
/// document outside the idempotency layer, the mounted resources' routes inside it.
fn serve(
    listener: TcpListener,
    operator: Option<TcpListener>,
    settings: &Settings,
    state: web::Data<AppState>,
    mounted: Arc<Mounted>,
) -> std::io::Result<Server> {
    let split = match &operator {
        Some(l) => Some(http::OperatorListener(l.local_addr()?)),
        None => None,
    };
    let doc = openapi::document([&ops::ROUTES].into_iter().chain(mounted.routes()));
    let limit = settings.http.max_body_bytes;
    let limiter = web::Data::from(RateLimiter::new(&settings.limits));
    let timeout = RequestTimeout(Duration::from_secs(settings.http.request_timeout_secs));
    let mut server = HttpServer::new(move || {
        let (mounted, doc) = (mounted.clone(), doc.clone());
        App::new()
            .app_data(state.clone())
            .configure(|cfg| mounted.configure_data(cfg))
            .app_data(BodyLimit(limit))
            .app_data(limiter.clone())
            .app_data(timeout)
            .app_data(http::path_config())
            .app_data(split)
            .app_data(web::PayloadConfig::new(limit))
            .wrap(from_fn(ratelimit::rate_limit))
            .wrap(from_fn(ratelimit::deadline))
            .wrap(from_fn(http::json_errors))
            .wrap(from_fn(http::operator_split))
            .wrap(from_fn(http::http_metrics))
            .wrap(from_fn(http::request_id))
            // No answer is ever to be sniffed into another type (a JSON error as HTML).
            .wrap(DefaultHeaders::new().add(("x-content-type-options", "nosniff")))
            .configure(ops::ROUTES.configure)
            .configure(|cfg| openapi::configure(cfg, doc))
            .service(
                web::scope("")
                    .wrap(from_fn(idempotency::idempotency))
                    .configure(|cfg| mounted.configure_routes(cfg)),
            )
            .default_service(web::to(not_found))
    })
    .listen(listener)?;
    if let Some(operator) = operator {
        server = server.listen(operator)?;
    }
    let mut server = server
        .shutdown_timeout(settings.http.shutdown_timeout_secs)
        // `run_until_stopped` handles SIGTERM and SIGINT: actix-server's own handling stops the
        // whole actix System 300 ms after the server, taking the actors (and the webhook
        // requests in flight) with it.
        .disable_signals();
    if settings.http.workers > 0 {
        server = server.workers(settings.http.workers);
    }
    Ok(server.run())
}

async fn not_found() -> Result<actix_web::HttpResponse, ApiError> {
    Err(ApiError::from_status(
        actix_web::http::StatusCode::NOT_FOUND,
    ))
}

/// SIGTERM or SIGINT: stop accepting and let in-flight requests finish; `run_until_stopped`
/// then winds the rest down.
async fn stop_on_signal(server: ServerHandle) {
    #[cfg(unix)]
    {
        use actix_rt::signal::unix::{signal, SignalKind};
        let (Ok(mut term), Ok(mut int)) = (
            signal(SignalKind::terminate()),
            signal(SignalKind::interrupt()),
        ) else {
            tracing::warn!("cannot listen for SIGTERM and SIGINT");
            return;
        };
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        tracing::info!(signal = name, "stopping gracefully");
    }
    #[cfg(not(unix))]
    {
        if actix_rt::signal::ctrl_c().await.is_err() {
            return;
        }
    }
    server.stop(true).await;
}

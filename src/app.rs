//! Wiring: the application state, the HTTP server with its middleware, the scheduler and
//! the actor arbiters, built from one `Settings`.

use std::{net::TcpListener, sync::Arc, time::Duration};

use actix_web::{
    dev::{Server, ServerHandle},
    middleware::{from_fn, DefaultHeaders},
    web, App, HttpServer,
};
use chrono::Duration as ChronoDuration;
use payd_actors::{ArbiterPool, Registry, RegistryConfig};
use serde::Serialize;

use crate::commit::Db;
use crate::{
    accounts::{self, store},
    auth::{KeyKind, Mode},
    clock::SharedClock,
    customers, db,
    disputes::{self, actor::DisputeDeps, Disputes},
    error::ApiError,
    events, files,
    http::{self, BodyLimit},
    idempotency,
    invoices::{self, actor::InvoiceDeps, Invoices},
    openapi, ops,
    payments::{self, actor::PaymentDeps, Payments},
    payouts::{self, actor::PayoutDeps, Payouts},
    processors::sandbox::Sandbox,
    products,
    ratelimit::{self, RateLimiter, RequestTimeout},
    refunds, risk, sales,
    scheduler::{self, Scheduler},
    settings::{DeploymentMode, Settings},
    state::AppState,
    subscriptions::{self, cycles::SubscriptionDeps, Subscriptions},
    test_clock,
    wake::Wake,
    wallet::{self, processor::SandboxWallet, WalletDeps},
    webhooks::{
        self,
        delivery::{DeliveryDeps, DeliveryPool},
        dispatcher::Dispatcher,
    },
};

/// The built service: bound to its port, not yet serving.
pub struct Application {
    port: u16,
    server: Server,
    state: web::Data<AppState>,
    dispatcher: web::Data<Dispatcher>,
    payments: web::Data<Payments>,
    disputes: web::Data<Disputes>,
    subscriptions: web::Data<Subscriptions>,
    invoices: web::Data<Invoices>,
    payouts: web::Data<Payouts>,
}

/// How long shutdown waits for the webhook dispatcher's claim under way.
const DISPATCHER_STOP: Duration = Duration::from_secs(10);

impl Application {
    /// Connects, migrates, bootstraps and binds `settings.listen` (port 0 picks a free one).
    pub async fn build(settings: Settings, clock: SharedClock) -> anyhow::Result<Self> {
        let db = Db::connect(&settings.database).await?;
        db::migrate(&settings.database.url, db.conn()).await?;
        let keyring = Arc::new(crate::sealed::Keyring::from_settings(&settings.security)?);
        if keyring.is_sandbox_key() {
            tracing::warn!(
                "stored secrets are sealed with the built-in sandbox master key, which is public: set security.master_key (PAYD_SECURITY__MASTER_KEY) outside the sandbox"
            );
        }
        for warning in settings.production_warnings() {
            tracing::warn!("production guard off: {warning}");
        }
        // Secrets stored before sealing, or under an older master key, are sealed now.
        let resealed = crate::sealed::reseal(&db, &keyring).await?;
        if resealed > 0 {
            tracing::info!(
                resealed,
                key = keyring.current_id(),
                "stored secrets sealed with the current master key"
            );
        }
        let settings = Arc::new(settings);
        // Install the recorder before anything records.
        ops::prometheus();
        payd_actors::telemetry::describe_metrics();
        crate::telemetry::describe_metrics();
        crate::processors::remote::register_metrics();
        // It answered the migrations: up until a readiness check says otherwise.
        metrics::gauge!("payd_database_up").set(1.0);

        if settings.mode == DeploymentMode::Sandbox && settings.sandbox.demo_merchant {
            bootstrap_demo(&db, &clock, &settings).await?;
        }

        let arbiters = ArbiterPool::try_new(match settings.actors.arbiters {
            0 => std::thread::available_parallelism().map_or(2, |n| n.get()),
            n => n,
        })?;
        let listener = TcpListener::bind(&settings.listen).map_err(|e| {
            anyhow::anyhow!(
                "cannot listen on {}: {e} (set PAYD_LISTEN to another address, e.g. 127.0.0.1:8081)",
                settings.listen
            )
        })?;
        let local = listener.local_addr()?;
        let port = local.port();
        let public_url = settings
            .http
            .public_url
            .clone()
            .unwrap_or_else(|| format!("http://{local}"));
        let wake = Wake::default();
        let registry_config = RegistryConfig {
            mailbox_capacity: settings.actors.mailbox_capacity,
            idle_timeout: settings.idle_timeout(),
            release_memory: crate::alloc::release_free_memory,
        };
        let env = Env {
            db: &db,
            clock: &clock,
            settings: &settings,
            keyring: &keyring,
            wake: &wake,
            registry_config: &registry_config,
            arbiters: &arbiters,
        };
        let actors = Actors::new(&env, &public_url);
        let dispatcher = dispatcher(&env).await?;
        let scheduler = Arc::new(actors.scheduler(&env));
        let now = clock.now();
        for job in [
            idempotency::PURGE_JOB,
            files::store::PURGE_JOB,
            risk::store::ASSESS_JOB,
            webhooks::retention::PURGE_JOB,
        ] {
            scheduler::schedule_if_absent(&db, now, job, "all", now).await?;
        }
        let Actors {
            payments,
            disputes,
            subscriptions,
            invoices,
            payouts,
            wallet,
            assessor,
            connections,
        } = actors;

        let state = web::Data::new(AppState {
            db,
            settings: settings.clone(),
            clock,
            scheduler,
            arbiters,
            public_url: public_url.clone(),
            wake,
            keyring,
            shops: Default::default(),
        });
        let (payments, disputes) = (web::Data::new(payments), web::Data::new(disputes));
        let subscriptions = web::Data::new(subscriptions);
        let app_subscriptions = subscriptions.clone();
        let invoices = web::Data::new(invoices);
        let app_invoices = invoices.clone();
        let payouts = web::Data::new(payouts);
        let app_payouts = payouts.clone();
        let app_assessor = web::Data::from(assessor);
        let app_connections = web::Data::from(connections);
        let dispatcher = web::Data::from(dispatcher);
        let app_dispatcher = dispatcher.clone();

        let (app_state, app_payments, app_disputes) =
            (state.clone(), payments.clone(), disputes.clone());
        let limit = settings.http.max_body_bytes;
        let limiter = web::Data::from(RateLimiter::new(&settings.limits));
        let timeout = RequestTimeout(Duration::from_secs(settings.http.request_timeout_secs));
        let mut server = HttpServer::new(move || {
            App::new()
                .app_data(app_state.clone())
                .app_data(app_payments.clone())
                .app_data(app_disputes.clone())
                .app_data(wallet.clone())
                .app_data(app_subscriptions.clone())
                .app_data(app_invoices.clone())
                .app_data(app_payouts.clone())
                .app_data(app_assessor.clone())
                .app_data(app_connections.clone())
                .app_data(app_dispatcher.clone())
                .app_data(BodyLimit(limit))
                .app_data(limiter.clone())
                .app_data(timeout)
                .app_data(http::path_config())
                .app_data(web::PayloadConfig::new(limit))
                .wrap(from_fn(ratelimit::rate_limit))
                .wrap(from_fn(ratelimit::deadline))
                .wrap(from_fn(http::json_errors))
                .wrap(from_fn(http::http_metrics))
                .wrap(from_fn(http::request_id))
                // No answer is ever to be sniffed into another type (a JSON error as HTML).
                .wrap(DefaultHeaders::new().add(("x-content-type-options", "nosniff")))
                .configure(ops::configure)
                .configure(openapi::configure)
                .service(
                    web::scope("")
                        .wrap(from_fn(idempotency::idempotency))
                        .configure(accounts::configure)
                        .configure(payments::configure)
                        .configure(payments::shop_routes::configure)
                        .configure(payments::checkout::configure)
                        .configure(payments::stripe_events::configure)
                        .configure(refunds::configure)
                        .configure(disputes::configure)
                        .configure(wallet::configure)
                        .configure(sales::configure)
                        .configure(products::configure)
                        .configure(subscriptions::configure)
                        .configure(invoices::configure)
                        .configure(crate::ledger::configure)
                        .configure(payouts::configure)
                        .configure(risk::configure)
                        .configure(test_clock::configure)
                        .configure(files::configure)
                        .configure(customers::configure)
                        .configure(events::configure)
                        .configure(webhooks::configure),
                )
                .default_service(web::to(not_found))
        })
        .listen(listener)?
        .shutdown_timeout(settings.http.shutdown_timeout_secs)
        // `run_until_stopped` handles SIGTERM and SIGINT: actix-server's own handling stops the
        // whole actix System 300 ms after the server, taking the actors (and the webhook
        // requests in flight) with it.
        .disable_signals();
        if settings.http.workers > 0 {
            server = server.workers(settings.http.workers);
        }
        tracing::info!(
            port,
            url = %public_url,
            docs = %format!("{public_url}/docs"),
            mode = ?settings.mode,
            "payd listening"
        );
        if settings.mode == DeploymentMode::Sandbox && settings.sandbox.demo_merchant {
            show_demo_keys(&settings.sandbox.data_dir);
        }
        Ok(Self {
            port,
            server: server.run(),
            state,
            dispatcher,
            payments,
            disputes,
            subscriptions,
            invoices,
            payouts,
        })
    }

    pub fn port(&self) -> u16 {
        self.port
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
        let sweeper = self.payments.spawn_sweeper();
        let dispute_sweeper = self.disputes.spawn_sweeper();
        let subscription_sweeper = self.subscriptions.spawn_sweeper();
        let invoice_sweeper = self.invoices.spawn_sweeper();
        let payout_sweeper = self.payouts.spawn_sweeper();
        let delivery_sweeper = self.dispatcher.deliveries().spawn_sweeper();
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
        sweeper.abort();
        dispute_sweeper.abort();
        subscription_sweeper.abort();
        invoice_sweeper.abort();
        payout_sweeper.abort();
        delivery_sweeper.abort();
        self.payments.passivate_all();
        self.disputes.passivate_all();
        self.subscriptions.passivate_all();
        self.invoices.passivate_all();
        self.payouts.passivate_all();
        self.dispatcher.deliveries().passivate_all();
        self.state.arbiters.stop();
        tracing::info!("payd stopped");
        result
    }
}

/// What building the service's parts takes: the database, the clock, the settings, the
/// keyring, the dispatcher's doorbell and the actors' threads.
#[derive(Clone, Copy)]
struct Env<'a> {
    db: &'a Db,
    clock: &'a SharedClock,
    settings: &'a Arc<Settings>,
    keyring: &'a Arc<crate::sealed::Keyring>,
    wake: &'a Wake,
    registry_config: &'a RegistryConfig,
    arbiters: &'a Arc<ArbiterPool>,
}

impl Env<'_> {
    /// A registry of actors of kind `A` on the service's threads.
    fn registry<A: payd_actors::KeyedActor>(&self, deps: A::Deps) -> Registry<A> {
        Registry::new(deps, self.registry_config.clone(), self.arbiters.clone())
    }
}

/// Every resource's actors (one registry per kind), and what their handlers share.
struct Actors {
    payments: Payments,
    disputes: Disputes,
    subscriptions: Subscriptions,
    invoices: Invoices,
    payouts: Payouts,
    wallet: web::Data<WalletDeps>,
    assessor: Arc<risk::Assessor>,
    connections: Arc<crate::processors::connect::Connections>,
}

impl Actors {
    fn new(env: &Env<'_>, public_url: &str) -> Self {
        let Env {
            db,
            clock,
            settings,
            keyring,
            wake,
            ..
        } = *env;
        let public_url = public_url.to_owned();
        let sandbox = Arc::new(Sandbox {
            async_delay: ChronoDuration::seconds(settings.sandbox.async_delay_secs as i64),
        });
        let connections = Arc::new(crate::processors::connect::Connections::new(
            sandbox.clone(),
            keyring.clone(),
            settings.clone(),
        ));
        let payments: Payments = env.registry(Arc::new(PaymentDeps {
            db: db.clone(),
            clock: clock.clone(),
            settings: settings.clone(),
            sandbox: sandbox.clone(),
            public_url: public_url.clone(),
            wake: wake.clone(),
            connections: connections.clone(),
            fresh: Default::default(),
            fail_outcomes: Arc::new(payments::store::FailOutcomes::new(
                &settings.sandbox.fail_outcome_commits,
            )),
        }));
        let disputes: Disputes = env.registry(Arc::new(DisputeDeps {
            db: db.clone(),
            clock: clock.clone(),
            sandbox: sandbox.clone(),
            wake: wake.clone(),
        }));
        let subscriptions: Subscriptions = env.registry(Arc::new(SubscriptionDeps {
            db: db.clone(),
            clock: clock.clone(),
            payments: payments.clone(),
            wake: wake.clone(),
            public_url: public_url.clone(),
            retry_days: settings.subscriptions.retry_schedule_days.clone(),
            confirm_within: ChronoDuration::hours(i64::from(
                settings.subscriptions.confirm_within_hours,
            )),
            billing: Arc::new(subscriptions::billing::SandboxBilling { db: db.clone() }),
            sandbox_max: settings.sandbox.max_subscriptions,
            tax: Arc::new(invoices::settings::CycleTaxRules { db: db.clone() }),
        }));
        let invoices: Invoices = env.registry(Arc::new(InvoiceDeps {
            db: db.clone(),
            clock: clock.clone(),
            wake: wake.clone(),
        }));
        let payouts: Payouts = env.registry(Arc::new(PayoutDeps {
            db: db.clone(),
            clock: clock.clone(),
            wake: wake.clone(),
            delay: sandbox.async_delay,
        }));
        let wallet = web::Data::new(WalletDeps {
            processor: SandboxWallet {
                db: db.clone(),
                clock: clock.clone(),
                timing: wallet::machine::Timing {
                    reply: sandbox.async_delay,
                    window: ChronoDuration::days(7),
                },
            },
            payments: payments.clone(),
            disputes: disputes.clone(),
        });

        let assessor = Arc::new(risk::Assessor {
            db: db.clone(),
            clock: clock.clone(),
            settings: settings.risk.clone(),
            wake: wake.clone(),
        });
        Actors {
            payments,
            disputes,
            subscriptions,
            invoices,
            payouts,
            wallet,
            assessor,
            connections,
        }
    }

    /// The scheduler with every kind of job registered: each resource's, and the deployment's
    /// periodic purges.
    fn scheduler(&self, env: &Env<'_>) -> Scheduler {
        let (db, clock, settings) = (env.db, env.clock, env.settings);
        let mut scheduler =
            Scheduler::new(db.conn().clone(), clock.clone(), settings.scheduler.clone());
        payments::jobs::register(&mut scheduler, db, &self.payments);
        disputes::jobs::register(&mut scheduler, &self.disputes);
        subscriptions::jobs::register(&mut scheduler, &self.subscriptions);
        wallet::jobs::register(&mut scheduler, &self.wallet);
        customers::jobs::register(&mut scheduler, db, clock);
        invoices::jobs::register(&mut scheduler, &self.invoices);
        payouts::jobs::register(&mut scheduler, &self.payouts);
        let ttl = ChronoDuration::hours(settings.idempotency.ttl_hours as i64);
        idempotency::register_purge(&mut scheduler, db, ttl);
        webhooks::retention::register(&mut scheduler, db, &settings.webhooks);
        files::store::register_purge(&mut scheduler, db);
        self.assessor.register(&mut scheduler);
        scheduler
    }
}

/// The webhook dispatcher and its delivery actors.
async fn dispatcher(env: &Env<'_>) -> anyhow::Result<Arc<Dispatcher>> {
    let Env {
        db,
        clock,
        settings,
        keyring,
        wake,
        registry_config,
        arbiters,
    } = *env;
    let webhook_settings = Arc::new(settings.webhooks.clone());
    // On PostgreSQL the webhook side has a pool of its own. A connection is bound to the
    // runtime that opened it, and the HTTP workers' runtimes end before shutdown drains
    // the deliveries: with one shared pool, a claim or an outcome written at that moment
    // failed ("a Tokio context … is being shutdown"), leaving its deliveries leased. The
    // dispatcher and the delivery actors run on runtimes that outlive the drain. SQLite's
    // connections are threads of their own, and its writes go through one writer.
    let webhook_db = match db.conn().get_database_backend() {
        sea_orm::DbBackend::Postgres => Db::connect(&settings.database).await?,
        _ => db.clone(),
    };
    let pool = DeliveryPool::new(
        DeliveryDeps {
            db: webhook_db.clone(),
            clock: clock.clone(),
            settings: webhook_settings.clone(),
            depth: Default::default(),
            wake: wake.clone(),
            backlogs: Default::default(),
            keyring: keyring.clone(),
            outbound: Arc::new(crate::outbound::Policy::from_settings(
                settings.webhooks.allow_private_urls,
                &settings.security,
            )),
        },
        registry_config.clone(),
        arbiters.clone(),
    );
    Ok(Arc::new(Dispatcher::new(
        webhook_db,
        clock.clone(),
        webhook_settings,
        pool,
        wake.clone(),
    )))
}

/// The keys of the demo merchant, as written to `demo-keys.json`.
#[derive(Serialize)]
struct DemoKeys<'a> {
    merchant_id: &'a str,
    profile_id: &'a str,
    /// Bound to the demo shop: shop-owned routes need no `x-profile-id` with it.
    shop_secret_key: &'a str,
    /// The merchant's unbound key: every shop, and creating shops and keys.
    secret_key: &'a str,
    publishable_key: &'a str,
}

/// Where the demo keys are, and the line that puts the shop's key in the shell: on every
/// sandbox start, so nobody needs a JSON tool to make a first request.
fn show_demo_keys(data_dir: &str) {
    let path = std::path::Path::new(data_dir).join("demo-keys.json");
    let key = std::fs::read_to_string(&path)
        .ok()
        .and_then(|text| serde_json::from_str::<serde_json::Value>(&text).ok())
        .and_then(|keys| keys["shop_secret_key"].as_str().map(str::to_owned));
    match key {
        Some(key) => println!(
            "payd: the demo shop's keys are in {}; for a first request:\n  export KEY={key}",
            path.display()
        ),
        None => println!(
            "payd: no demo keys in {} (the file is gone, or from an older release): create a \
             merchant with `payd admin create-merchant --name Demo`, or a key with \
             POST /account/api-keys",
            path.display()
        ),
    }
}

/// On the first start of a sandbox deployment, creates a demo merchant and shows its keys
/// once: on standard output and in `<data_dir>/demo-keys.json` (never in the logs).
async fn bootstrap_demo(db: &Db, clock: &SharedClock, settings: &Settings) -> anyhow::Result<()> {
    if store::any_merchant(db).await? {
        return Ok(());
    }
    let created = store::create_merchant(
        db,
        clock.now(),
        &settings.security.key_pepper,
        "Demo merchant",
        Mode::Test,
    )
    .await?;
    let (merchant_id, profile_id) = (
        crate::ids::MerchantId::parse(&created.merchant.id).unwrap_or_default(),
        crate::ids::ProfileId::parse(&created.profile.id).unwrap_or_default(),
    );
    let shop_key = store::NewKey {
        merchant_id: &merchant_id,
        kind: KeyKind::Secret,
        mode: Mode::Test,
        profile_id: Some(&profile_id),
        name: Some("Demo shop".to_owned()),
    };
    let (_, shop_secret_key) = store::insert_key(
        db,
        clock.now(),
        &settings.security.key_pepper,
        shop_key,
        None,
        None,
    )
    .await?;
    let keys = DemoKeys {
        merchant_id: &created.merchant.id,
        profile_id: &created.profile.id,
        shop_secret_key: &shop_secret_key,
        secret_key: &created.secret_key,
        publishable_key: &created.publishable_key,
    };
    let json = serde_json::to_string_pretty(&keys)?;
    let dir = std::path::Path::new(&settings.sandbox.data_dir);
    std::fs::create_dir_all(dir)?;
    let path = dir.join("demo-keys.json");
    std::fs::write(&path, format!("{json}\n"))?;
    println!(
        "payd: created a demo merchant; its keys (also in {}):\n{json}",
        path.display()
    );
    Ok(())
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

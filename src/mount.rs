//! What a resource brings to the service, gathered in one place: its files of routes (with
//! their OpenAPI paths), the data its handlers extract, its actors (swept and passivated with
//! the others) and its scheduled jobs. Each resource's `mount` adds its part; `app` lists the
//! resources once, in routing order.

use std::sync::Arc;

use actix_web::web;
use payd_actors::{ArbiterPool, KeyedActor, Registry, RegistryConfig};
use tokio::task::JoinHandle;

use crate::{
    clock::SharedClock,
    commit::Db,
    http::Routes,
    lookups::Generation,
    processors::{connect::Connections, sandbox::Sandbox},
    scheduler::Scheduler,
    sealed::Keyring,
    settings::Settings,
    wake::Wake,
};

/// What building a resource's parts takes: the database, the clock, the settings, the keyring,
/// the dispatcher's doorbell, the actors' threads, the sandbox processors and the connected
/// ones.
#[derive(Clone, Copy)]
pub struct Env<'a> {
    pub db: &'a Db,
    pub clock: &'a SharedClock,
    pub settings: &'a Arc<Settings>,
    pub keyring: &'a Arc<Keyring>,
    pub wake: &'a Wake,
    pub registry_config: &'a RegistryConfig,
    pub arbiters: &'a Arc<ArbiterPool>,
    pub sandbox: &'a Arc<Sandbox>,
    pub connections: &'a Arc<Connections>,
    /// Where buyers reach this deployment (checkout and share links).
    pub public_url: &'a str,
    /// When the cached lookups may be trusted.
    pub generation: &'a Arc<Generation>,
}

impl Env<'_> {
    /// A registry of actors of kind `A` on the service's threads.
    pub fn registry<A: KeyedActor>(&self, deps: A::Deps) -> Registry<A> {
        Registry::new(deps, self.registry_config.clone(), self.arbiters.clone())
    }
}

/// A registry of actors, as the service's start and stop see it.
trait Resident: Send + Sync {
    /// Passivates its actors idle past the timeout, until aborted.
    fn spawn_sweeper(&self) -> JoinHandle<()>;
    fn passivate_all(&self);
}

impl<A: KeyedActor> Resident for Registry<A> {
    fn spawn_sweeper(&self) -> JoinHandle<()> {
        Registry::spawn_sweeper(self)
    }

    fn passivate_all(&self) {
        Registry::passivate_all(self);
    }
}

type AddData = Box<dyn Fn(&mut web::ServiceConfig) + Send + Sync>;

/// The resources' parts, as they are mounted.
pub struct Mount {
    /// Each resource registers its kinds of job here.
    pub scheduler: Scheduler,
    mounted: Mounted,
}

/// The mounted resources: what every HTTP worker registers, and the actors to sweep and stop.
#[derive(Default)]
pub struct Mounted {
    routes: Vec<Routes>,
    data: Vec<AddData>,
    residents: Vec<Box<dyn Resident>>,
}

impl Mount {
    pub fn new(scheduler: Scheduler) -> Self {
        Self {
            scheduler,
            mounted: Mounted::default(),
        }
    }

    /// Files of routes, registered in this order (the first matching path wins).
    pub fn routes(&mut self, routes: &[Routes]) {
        self.mounted.routes.extend_from_slice(routes);
    }

    /// Data the handlers extract (`web::Data<T>`).
    pub fn data<T: Send + Sync + 'static>(&mut self, data: web::Data<T>) {
        self.mounted.data.push(Box::new(move |cfg| {
            cfg.app_data(data.clone());
        }));
    }

    /// A registry of actors: swept while the service runs, passivated when it stops. Its
    /// handlers extract it as `web::Data<Registry<A>>`.
    pub fn actors<A: KeyedActor>(&mut self, registry: Registry<A>) {
        self.sweep(registry.clone());
        self.data(web::Data::new(registry));
    }

    /// A registry of actors no handler extracts, swept and passivated with the others.
    pub fn sweep<A: KeyedActor>(&mut self, registry: Registry<A>) {
        self.mounted.residents.push(Box::new(registry));
    }

    pub fn finish(self) -> (Scheduler, Mounted) {
        (self.scheduler, self.mounted)
    }
}

impl Mounted {
    /// Every file of routes, in mounting order.
    pub fn routes(&self) -> &[Routes] {
        &self.routes
    }

    /// The handlers' data.
    pub fn configure_data(&self, cfg: &mut web::ServiceConfig) {
        for add in &self.data {
            add(cfg);
        }
    }

    /// The routes.
    pub fn configure_routes(&self, cfg: &mut web::ServiceConfig) {
        for routes in &self.routes {
            (routes.configure)(cfg);
        }
    }

    pub fn spawn_sweepers(&self) -> Vec<JoinHandle<()>> {
        self.residents.iter().map(|r| r.spawn_sweeper()).collect()
    }

    pub fn passivate_all(&self) {
        for r in &self.residents {
            r.passivate_all();
        }
    }
}

//! Wallet processor cases: the sandbox wallet processor's seller cases (inquiries that can
//! become chargebacks, with the processor's own statuses, history and actions), their routes,
//! and how each maps onto one dispute. Dependencies run `wallet → disputes, payments`, never
//! back: the dispute knows only the case id it follows.

pub mod api;
pub mod follow;
pub mod jobs;
pub mod machine;
pub mod processor;
pub mod routes;
pub mod store;

pub use follow::WalletDeps;

use crate::{
    disputes::Disputes,
    mount::{Env, Mount},
    payments::Payments,
};

/// The wallet processor's seller cases: the sandbox wallet, its jobs and routes. Its actions
/// move payments and disputes through their actors.
pub fn mount(m: &mut Mount, env: &Env<'_>, payments: &Payments, disputes: &Disputes) {
    let wallet = actix_web::web::Data::new(WalletDeps {
        processor: processor::SandboxWallet {
            db: env.db.clone(),
            clock: env.clock.clone(),
            timing: machine::Timing {
                reply: env.sandbox.async_delay,
                window: chrono::Duration::days(7),
            },
        },
        payments: payments.clone(),
        disputes: disputes.clone(),
    });
    jobs::register(&mut m.scheduler, &wallet);
    m.data(wallet);
    m.routes(&[routes::ROUTES]);
}

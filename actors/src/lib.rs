//! payd's generic actor runtime: one long-lived actix actor per entity id,
//! activated on demand, bounded, respawned after a crash and passivated when idle.
//!
//! This crate knows nothing about payments or storage. An entity kind (a
//! payment, a refund...) implements [`KeyedActor`]; a [`Registry`] of that kind
//! routes each message to the single actor owning the message's id, so all
//! state transitions for one id are serialized by that actor's mailbox while
//! different ids proceed in parallel.
//!
//! # Activation
//!
//! The registry maps each id to a slot holding a once-initialized actor
//! address. The first message for an id calls [`KeyedActor::load`] in the
//! caller's task (so `load` may use `!Send` futures, e.g. inside an actix-web
//! handler) and starts the actor on the arbiter the [`ArbiterPool`] picks by
//! hashing the id. Concurrent first messages for the same id wait for that
//! single load instead of loading again, so there is never more than one
//! actor per id. If `load` fails the caller gets [`ActorError::Load`], the
//! slot stays empty, and the next message tries again.
//!
//! # Mailbox bound
//!
//! Each slot counts its messages in flight: from acceptance (including
//! waiting for the load) to the reply, or until the caller gives up. A message
//! that would exceed [`RegistryConfig::mailbox_capacity`] is rejected at once
//! with [`ActorError::Overloaded`] rather than queued, so a hot id sheds load
//! instead of building an unbounded backlog. Other ids are unaffected.
//!
//! # Respawn
//!
//! actix does not restart an actor whose handler panicked: the arbiter
//! survives (its executor catches the panic) but the actor is gone, and its
//! pending messages fail as "mailbox closed". When a send sees that, the dead
//! slot is removed (counted in [`Registry::restarts`]), a fresh actor is
//! loaded from the store, and the message is delivered once more. If that
//! retry dies too, the caller gets [`ActorError::Died`]. A message may thus be
//! handled twice, which is why messages must be `Clone` and handlers should be
//! idempotent with respect to the stored state. Reloading from the store is the
//! point: a crashed actor's in-memory state is not trusted.
//!
//! # Passivation
//!
//! Actors with nothing in flight and no message for
//! [`RegistryConfig::idle_timeout`] are removed by [`Registry::passivate_idle`],
//! which [`Registry::spawn_sweeper`] runs periodically. Removing a slot drops
//! the last address of the actor, which makes actix stop it (its `stopped`
//! hook runs); the next message for the id loads it again. An actor with a
//! message in flight is never passivated: claiming a mailbox place and the
//! passivation check both happen under the same map-shard lock.
//! [`Registry::passivate_all`] stops every actor with nothing in flight,
//! however recently used, for graceful shutdown. Dropping every clone of a registry
//! stops all its actors the same way. After a sweep that stopped actors, the
//! sweeper waits a moment for them to be dropped and returns the freed pages to
//! the OS ([`RegistryConfig::release_memory`]: glibc's `malloc_trim` by default).
//!
//! # Metrics
//!
//! Recorded through the `metrics` facade, labelled only by `kind`
//! ([`KeyedActor::KIND`]), never by id (see [`telemetry`] for the names):
//!
//! - `payd_actors_live` (gauge): actors currently activated.
//! - `payd_actor_messages_total` (counter): calls to [`Registry::send`].
//! - `payd_actor_message_seconds` (histogram): time from send to reply, for
//!   messages that got one.
//! - `payd_actor_restarts_total` (counter): actors found dead and replaced.
//! - `payd_actor_mailbox_depth` (gauge): messages in flight across the kind.
//! - `payd_actor_overloaded_total` (counter): messages rejected as overloaded.
//! - `payd_actor_load_failures_total` (counter): failed loads.
//!
//! Gauges are moved with increments and decrements, so several registries of
//! the same kind add up instead of overwriting one another.

#![warn(missing_docs)]

mod actor;
mod error;
mod pool;
mod registry;
pub mod telemetry;

#[cfg(test)]
mod tests;

pub use actor::KeyedActor;
pub use error::ActorError;
pub use pool::{entered_runtime, ArbiterPool};
pub use registry::{Registry, RegistryConfig};

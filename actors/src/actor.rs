//! The contract an actor type fulfils to be managed by a [`Registry`](crate::Registry).

use std::future::Future;

/// An actor that owns one entity id.
///
/// The registry activates at most one actor per id at a time, so the
/// actor's handlers are the single place where that entity's state changes.
///
/// Implementors must not keep a strong [`actix::Addr`] to themselves
/// (e.g. `ctx.address()` stored in a field): passivation stops an actor by
/// dropping the registry's address, and a self-reference would keep the actor
/// alive forever after the registry has forgotten it.
pub trait KeyedActor: actix::Actor<Context = actix::Context<Self>> + Send + Sized {
    /// Metric label, e.g. "payment".
    const KIND: &'static str;

    /// What loading needs (store handle, clock...). Shared by every
    /// activation of this kind; `load` borrows it.
    type Deps: Clone + Send + Sync + 'static;

    /// Why an activation could not build the actor.
    type LoadError: std::fmt::Display + std::fmt::Debug + Send + 'static;

    /// Build the actor's state from the store.
    ///
    /// Called on the first message for an id, and again after the actor died
    /// or was passivated. It runs in the caller's task (which may be a `!Send`
    /// context such as an actix-web handler), so the future need not be `Send`.
    /// The constructed actor is then moved to its arbiter, hence `Self: Send`.
    fn load(id: &str, deps: &Self::Deps) -> impl Future<Output = Result<Self, Self::LoadError>>;

    /// Whether a load error only says that no entity has this id (a caller's wrong id): the
    /// caller gets it, but it is not counted or logged as a failed load.
    fn is_missing(_error: &Self::LoadError) -> bool {
        false
    }
}

//! The actor of one stored row — a dispute, a subscription, an invoice, a payout: it keeps
//! its row, runs each command on the owner's timeline (a sandbox merchant's test clock), and
//! keeps the row the command left as the latest. A resource says what its row is and how a
//! command runs ([`Row`]); loading, the timeline and the cache are written once, here.
//! (Payments have an actor of their own: a row cache that lapses, intents, reconciliation.)

use std::{future::Future, sync::Arc};

use actix::{Actor, ActorFutureExt, AtomicResponse, Context, Handler, Message, WrapFuture};
use payd_actors::KeyedActor;
use sea_orm::DbErr;

use crate::clock::{self, Timeline};
use crate::commit::Db;

/// One kind of row and its commands.
pub trait Row: 'static {
    /// The actors' metric label (`dispute`, `payout`, …).
    const KIND: &'static str;
    type Model: Clone + Send + Unpin + 'static;
    type Deps: Send + Sync + 'static;
    type Error: From<DbErr> + std::fmt::Display + std::fmt::Debug + Send + 'static;
    /// What a command answers.
    type Done: 'static;
    /// The command message.
    type Exec: Message<Result = Result<Self::Done, Self::Error>> + 'static;

    /// The row's id type: an actor's key of another shape names no row.
    type Id: crate::ids::Id;

    fn db(deps: &Self::Deps) -> &Db;

    fn find(db: &Db, id: &Self::Id) -> impl Future<Output = Result<Option<Self::Model>, DbErr>>;

    /// No row has the id.
    fn not_found() -> Self::Error;

    fn is_not_found(error: &Self::Error) -> bool;

    /// Whose row it is: its merchant and mode (for the merchant's test clock).
    fn owner(m: &Self::Model) -> (&crate::ids::MerchantId, bool);

    /// The timeline the command was sent on.
    fn timeline(msg: &Self::Exec) -> &Timeline;

    /// Runs a command on `current`; answers the latest row known (the actor keeps it) and the
    /// command's result.
    fn exec(
        deps: &Self::Deps,
        current: Self::Model,
        msg: Self::Exec,
    ) -> impl Future<Output = (Self::Model, Result<Self::Done, Self::Error>)>;
}

/// The actor of one row of kind `R`.
pub struct RowActor<R: Row> {
    model: R::Model,
    deps: Arc<R::Deps>,
}

impl<R: Row> Actor for RowActor<R> {
    type Context = Context<Self>;
}

impl<R: Row> KeyedActor for RowActor<R> {
    const KIND: &'static str = R::KIND;
    type Deps = Arc<R::Deps>;
    type LoadError = R::Error;

    async fn load(id: &str, deps: &Arc<R::Deps>) -> Result<Self, R::Error> {
        let id = <R::Id as crate::ids::Id>::parse(id).ok_or_else(R::not_found)?;
        let model = R::find(R::db(deps), &id).await?.ok_or_else(R::not_found)?;
        Ok(Self {
            model,
            deps: deps.clone(),
        })
    }

    fn is_missing(error: &R::Error) -> bool {
        R::is_not_found(error)
    }
}

impl<R: Row> Handler<R::Exec> for RowActor<R> {
    type Result = AtomicResponse<Self, Result<R::Done, R::Error>>;

    fn handle(&mut self, msg: R::Exec, _: &mut Context<Self>) -> Self::Result {
        let (deps, current) = (self.deps.clone(), self.model.clone());
        AtomicResponse::new(Box::pin(
            async move {
                let (merchant_id, test_mode) = R::owner(&current);
                let timeline = crate::accounts::store::timeline_for(
                    R::db(&deps),
                    R::timeline(&msg),
                    merchant_id,
                    test_mode,
                )
                .await;
                clock::scoped(timeline, R::exec(&deps, current, msg)).await
            }
            .into_actor(self)
            .map(|(latest, result), act, _| {
                act.model = latest;
                result
            }),
        ))
    }
}

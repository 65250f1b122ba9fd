//! The ways delivering a message through the registry can fail.

/// Why [`Registry::send`](crate::Registry::send) produced no reply.
///
/// `E` is the actor kind's [`KeyedActor::LoadError`](crate::KeyedActor::LoadError).
#[derive(Debug, thiserror::Error)]
pub enum ActorError<E> {
    /// The actor was not running and `load` failed. Nothing was delivered;
    /// the next message for the id tries loading again.
    #[error("loading the actor failed: {0}")]
    Load(E),

    /// The actor already had `mailbox_capacity` messages in flight. Nothing
    /// was queued, so the caller may retry later or shed the request.
    #[error("the actor's mailbox is full")]
    Overloaded,

    /// The actor died while handling the message, was respawned, and the one
    /// retry on the fresh actor died too. The message may have been partially
    /// processed by either incarnation.
    #[error("the actor died while handling the message")]
    Died,
}

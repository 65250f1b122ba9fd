//! The operation a payment sends to its processor, recorded (its intent) before the request
//! goes out: intent → effect → outcome. Refunds have their own row, committed `pending` the
//! same way (`actor::refund`).
//!
//! Invariant: a processor that keeps state never hears of an authorization, a challenge's
//! answer, a capture or a void that payd has not recorded. The intent is committed on the
//! payment row with the request's idempotency key; the outcome is committed with the intent
//! cleared. An intent whose outcome never got committed (a crash, a timeout, a failed commit)
//! keeps the payment's settle job, which reconciles it: an authorization by a sync of its
//! reference; a challenge's answer, a capture or a void by sending the same request with the
//! same key again (the processor answers its first answer without a second effect). Until
//! then every command on the payment reconciles it first.

pub use payd_model::payments::Intent;

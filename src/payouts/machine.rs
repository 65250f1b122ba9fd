//! The payout's state machine, pure, with Hyperswitch's status names.
//!
//! ```text
//! requires_confirmation ──confirm──▶ requires_fulfillment ──fulfill──▶ initiated
//!          │                 (reserved; with auto_fulfill straight on)      │
//!          │                                                                ▼
//!          └─cancel─▶ cancelled ◀─cancel─ requires_fulfillment   pending ─▶ success ─▶ reversed
//!                              ◀─cancel (through the processor)─ pending   │
//!                                                                 failed · ineligible
//! ```
//!
//! The amount is reserved out of the available balance at confirm and released when the
//! payout fails, is cancelled or is ineligible; a reversal gives a paid payout back.

pub use payd_model::payouts::Status;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the payout is {}: it cannot be {action}", .status.as_str())]
    InvalidState {
        status: Status,
        action: &'static str,
    },
}

fn need(status: Status, allowed: &[Status], action: &'static str) -> Result<(), Refusal> {
    match allowed.contains(&status) {
        true => Ok(()),
        false => Err(Refusal::InvalidState { status, action }),
    }
}

/// Update: only before it is confirmed (nothing is reserved or sent yet).
pub fn update(status: Status) -> Result<(), Refusal> {
    need(
        status,
        &[
            Status::RequiresConfirmation,
            Status::RequiresPayoutMethodData,
        ],
        "updated",
    )
}

/// Confirm: reserves the amount; on to the processor with `auto_fulfill`, else waits for
/// fulfil.
pub fn confirm(status: Status, auto_fulfill: bool) -> Result<Status, Refusal> {
    need(status, &[Status::RequiresConfirmation], "confirmed")?;
    Ok(match auto_fulfill {
        true => Status::Initiated,
        false => Status::RequiresFulfillment,
    })
}

/// A new payout's status: `confirm`ed at creation it is reserved, and goes to the processor
/// at once (`initiated`, as [`confirm`] with `auto_fulfill`) or waits in
/// `requires_fulfillment`; else it waits for confirm.
pub fn created(confirm: bool, auto_fulfill: bool) -> Status {
    match (confirm, auto_fulfill) {
        (true, true) => Status::Initiated,
        (true, false) => Status::RequiresFulfillment,
        (false, _) => Status::RequiresConfirmation,
    }
}

/// When the processor is asked again about a payout sent to it whose answer was not
/// committed (the process stopped between the two).
pub fn ask_again_at(now: chrono::DateTime<chrono::Utc>) -> chrono::DateTime<chrono::Utc> {
    now + chrono::Duration::minutes(1)
}

/// Fulfil: to the processor.
pub fn fulfill(status: Status) -> Result<Status, Refusal> {
    need(status, &[Status::RequiresFulfillment], "fulfilled")?;
    Ok(Status::Initiated)
}

/// A payout not confirmed or not fulfilled this long after its creation expires (a
/// reservation is released).
pub const EXPIRES_AFTER_HOURS: i64 = 24;

/// When a payout created at `created` expires if it never goes to the processor.
pub fn expires_at(created: chrono::DateTime<chrono::Utc>) -> chrono::DateTime<chrono::Utc> {
    created + chrono::Duration::hours(EXPIRES_AFTER_HOURS)
}

/// Expire: a payout that never went to the processor.
pub fn expire(status: Status) -> Option<Status> {
    matches!(
        status,
        Status::RequiresCreation
            | Status::RequiresConfirmation
            | Status::RequiresPayoutMethodData
            | Status::RequiresFulfillment
    )
    .then_some(Status::Expired)
}

/// How a cancel goes: here, or through the processor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cancel {
    Local,
    AtProcessor,
}

pub fn cancel(status: Status) -> Result<Cancel, Refusal> {
    match status {
        Status::RequiresCreation
        | Status::RequiresConfirmation
        | Status::RequiresPayoutMethodData
        | Status::RequiresFulfillment => Ok(Cancel::Local),
        Status::Initiated | Status::Pending => Ok(Cancel::AtProcessor),
        _ => Err(Refusal::InvalidState {
            status,
            action: "cancelled",
        }),
    }
}

/// What the processor says of a payout it has.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Pending,
    Success,
    Failed { code: String, message: String },
    Ineligible,
    Reversed,
    Cancelled,
}

/// The status a processor's answer moves a payout in `status` to; `None`: nothing changes (an
/// answer that does not apply any more, or says what is known).
pub fn follow(status: Status, outcome: &Outcome) -> Option<Status> {
    let to = match outcome {
        Outcome::Pending => Status::Pending,
        Outcome::Success => Status::Success,
        Outcome::Failed { .. } => Status::Failed,
        Outcome::Ineligible => Status::Ineligible,
        Outcome::Reversed => Status::Reversed,
        Outcome::Cancelled => Status::Cancelled,
    };
    let moves = match status {
        Status::Initiated => to != Status::Initiated && to != Status::Reversed,
        Status::Pending => !matches!(to, Status::Pending | Status::Reversed),
        Status::Success => to == Status::Reversed,
        _ => false,
    };
    moves.then_some(to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_payout_confirmed_at_creation_is_reserved_and_waits_for_fulfil_unless_auto() {
        assert_eq!(created(false, true), Status::RequiresConfirmation);
        assert_eq!(created(true, false), Status::RequiresFulfillment);
        assert_eq!(
            created(true, true),
            confirm(Status::RequiresConfirmation, true).unwrap()
        );
    }

    #[test]
    fn transitions_and_refusals() {
        assert_eq!(
            confirm(Status::RequiresConfirmation, false),
            Ok(Status::RequiresFulfillment)
        );
        assert_eq!(
            confirm(Status::RequiresConfirmation, true),
            Ok(Status::Initiated)
        );
        assert!(confirm(Status::RequiresFulfillment, false).is_err());
        assert_eq!(fulfill(Status::RequiresFulfillment), Ok(Status::Initiated));
        assert!(fulfill(Status::RequiresConfirmation).is_err());
        assert_eq!(cancel(Status::RequiresFulfillment), Ok(Cancel::Local));
        assert_eq!(cancel(Status::Pending), Ok(Cancel::AtProcessor));
        for s in Status::ALL
            .into_iter()
            .filter(|s| s.is_terminal() || *s == Status::Success)
        {
            assert!(cancel(s).is_err(), "{s:?}");
            assert!(update(s).is_err(), "{s:?}");
            assert!(confirm(s, true).is_err(), "{s:?}");
            assert!(fulfill(s).is_err(), "{s:?}");
        }
        assert_eq!(
            follow(Status::Initiated, &Outcome::Pending),
            Some(Status::Pending)
        );
        assert_eq!(
            follow(Status::Pending, &Outcome::Success),
            Some(Status::Success)
        );
        assert_eq!(
            follow(Status::Success, &Outcome::Reversed),
            Some(Status::Reversed)
        );
        assert_eq!(
            follow(
                Status::Success,
                &Outcome::Failed {
                    code: "x".into(),
                    message: "y".into()
                }
            ),
            None
        );
        assert_eq!(follow(Status::Failed, &Outcome::Success), None);
        assert_eq!(follow(Status::Pending, &Outcome::Pending), None);
    }
}

//! The dispute state machine, pure: which commands a dispute's status allows, where they lead,
//! and the event each new status announces.
//!
//! Status: `opened → challenged → won | lost`, `opened → accepted | expired | cancelled`.
//! Evidence can be attached and removed only while `opened`; accept and submit only while
//! `opened`, so a second submit is refused. Stages are ordered
//! `pre_dispute < dispute < pre_arbitration < arbitration`; the card sandbox opens at `dispute`.
//!
//! A dispute that follows a wallet processor's case (`follow`) takes its stage and status from
//! the case, not from the merchant's commands: stages only move forward, a closed dispute stays
//! closed, and a challenged one never becomes opened again.

pub use crate::processors::model::Verdict;
use chrono::{DateTime, Utc};

pub use payd_model::disputes::{Stage, Status};

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("the dispute is {}; this needs an opened dispute", .0.as_str())]
    InvalidState(Status),
    #[error("submit an explanation or attach at least one evidence file first")]
    NoEvidence,
    /// The dispute follows a wallet case: the merchant acts on the case instead.
    #[error("this dispute follows wallet case {0}; act on it with POST /disputes/wallet/cases/{0}/actions")]
    FollowsCase(String),
    /// The processor holds the dispute, and takes an explanation from payd, not files.
    #[error("this dispute is the processor's own ({0}): payd submits its explanation; attach files to it in the processor's dashboard")]
    FilesAtProcessor(String),
}

/// Who a dispute's merchant commands (accept, evidence, submit) go to, by the case it
/// follows: none, a wallet case (`case_…`), or the processor's own dispute (Stripe's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Holder<'a> {
    /// payd's own (the card sandbox's): decided here.
    Payd,
    /// A wallet case: the merchant acts on the case instead.
    WalletCase(&'a str),
    /// The processor's own dispute: accept and submit are sent to it first.
    Processor(&'a str),
}

impl<'a> Holder<'a> {
    pub fn of(case_id: Option<&'a str>) -> Self {
        match case_id {
            None => Holder::Payd,
            Some(case) if crate::ids::CaseId::parse(case).is_some() => Holder::WalletCase(case),
            Some(case) => Holder::Processor(case),
        }
    }
}

/// The merchant's own commands (accept, evidence, submit) are for disputes no wallet case
/// drives; a processor's own dispute takes no files (`files`: the command attaches or removes
/// one).
pub fn check_merchant_command(holder: Holder<'_>, files: bool) -> Result<(), Refusal> {
    match holder {
        Holder::WalletCase(case) => Err(Refusal::FollowsCase(case.to_owned())),
        Holder::Processor(case) if files => Err(Refusal::FilesAtProcessor(case.to_owned())),
        Holder::Payd | Holder::Processor(_) => Ok(()),
    }
}

/// Where a dispute following a case goes when the case maps onto `(stage, status)`: the stage
/// only moves forward, a closed dispute stays as it is, and a challenged one is not opened
/// again. `None` when nothing changes.
pub fn follow(now: (Stage, Status), to: (Stage, Status)) -> Option<(Stage, Status)> {
    let (stage, status) = now;
    if !status.is_open() {
        return None;
    }
    let next_status = match (status, to.1) {
        (Status::Challenged, Status::Opened) => Status::Challenged,
        (_, to) => to,
    };
    let next = (stage.max(to.0), next_status);
    (next != now).then_some(next)
}

fn opened(s: Status) -> Result<(), Refusal> {
    match s {
        Status::Opened => Ok(()),
        other => Err(Refusal::InvalidState(other)),
    }
}

/// Attaching or removing evidence.
pub fn check_evidence_edit(s: Status) -> Result<(), Refusal> {
    opened(s)
}

pub fn accept(s: Status) -> Result<Status, Refusal> {
    opened(s).map(|()| Status::Accepted)
}

/// Submitting the evidence: once, and not empty.
pub fn submit(s: Status, has_evidence: bool) -> Result<Status, Refusal> {
    opened(s)?;
    if !has_evidence {
        return Err(Refusal::NoEvidence);
    }
    Ok(Status::Challenged)
}

/// The processor's decision on a challenged dispute; `None` when there is nothing to decide.
pub fn resolve(s: Status, verdict: Verdict) -> Option<Status> {
    (s == Status::Challenged).then_some(match verdict {
        Verdict::Won => Status::Won,
        Verdict::Lost => Status::Lost,
    })
}

/// The response deadline: an unanswered dispute expires once it has passed.
pub fn expire(s: Status, now: DateTime<Utc>, due: DateTime<Utc>) -> Option<Status> {
    (s == Status::Opened && now >= due).then_some(Status::Expired)
}

#[cfg(test)]
mod tests {
    use chrono::Duration;
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn merchant_commands_go_to_whoever_holds_the_dispute() {
        let case = format!("case_{}", "a1".repeat(16));
        assert_eq!(Holder::of(None), Holder::Payd);
        assert_eq!(Holder::of(Some(&case)), Holder::WalletCase(&case));
        for stripe in ["du_1MtJUT2eZvKYlo2CNaw2HvEv", "dp_1MtJUT2eZvKYlo2CNaw2HvEv"] {
            assert_eq!(Holder::of(Some(stripe)), Holder::Processor(stripe));
        }
        assert_eq!(check_merchant_command(Holder::Payd, true), Ok(()));
        assert_eq!(
            check_merchant_command(Holder::WalletCase(&case), false),
            Err(Refusal::FollowsCase(case.clone()))
        );
        assert_eq!(
            check_merchant_command(Holder::Processor("du_1"), false),
            Ok(())
        );
        assert_eq!(
            check_merchant_command(Holder::Processor("du_1"), true),
            Err(Refusal::FilesAtProcessor("du_1".into()))
        );
    }

    #[derive(Debug, Clone)]
    enum Cmd {
        Accept,
        Submit(bool),
        Resolve(bool),
        Expire(i64),
        Edit,
    }

    fn cmd() -> impl Strategy<Value = Cmd> {
        prop_oneof![
            Just(Cmd::Accept),
            any::<bool>().prop_map(Cmd::Submit),
            any::<bool>().prop_map(Cmd::Resolve),
            (-2i64..3).prop_map(Cmd::Expire),
            Just(Cmd::Edit),
        ]
    }

    fn apply(s: Status, c: &Cmd, due: DateTime<Utc>) -> Status {
        match c {
            Cmd::Accept => accept(s).unwrap_or(s),
            Cmd::Submit(has) => submit(s, *has).unwrap_or(s),
            Cmd::Resolve(won) => {
                resolve(s, if *won { Verdict::Won } else { Verdict::Lost }).unwrap_or(s)
            }
            Cmd::Expire(days) => expire(s, due + Duration::days(*days), due).unwrap_or(s),
            Cmd::Edit => s,
        }
    }

    proptest! {
        /// No command leads out of a final status, edits are allowed only while opened, and
        /// evidence is submitted at most once.
        #[test]
        fn final_statuses_stay_and_submit_happens_once(cmds in prop::collection::vec(cmd(), 0..30)) {
            let due = crate::clock::wall_now();
            let mut s = Status::Opened;
            let mut submits = 0;
            for c in &cmds {
                let next = apply(s, c, due);
                if !s.is_open() {
                    prop_assert_eq!(next, s, "{:?} left final {:?}", c, s);
                }
                if matches!(c, Cmd::Edit) {
                    prop_assert_eq!(check_evidence_edit(s).is_ok(), s == Status::Opened);
                }
                if next == Status::Challenged && s != Status::Challenged {
                    submits += 1;
                }
                s = next;
            }
            prop_assert!(submits <= 1);
        }
    }

    #[test]
    fn the_deadline_expires_only_unanswered_disputes() {
        let due = crate::clock::wall_now();
        assert_eq!(expire(Status::Opened, due, due), Some(Status::Expired));
        assert_eq!(
            expire(Status::Opened, due - Duration::seconds(1), due),
            None
        );
        assert_eq!(
            expire(Status::Challenged, due + Duration::days(1), due),
            None
        );
    }

    #[test]
    fn a_second_submit_is_refused_and_empty_evidence_too() {
        assert_eq!(submit(Status::Opened, false), Err(Refusal::NoEvidence));
        assert_eq!(submit(Status::Opened, true), Ok(Status::Challenged));
        assert_eq!(
            submit(Status::Challenged, true),
            Err(Refusal::InvalidState(Status::Challenged))
        );
    }

    #[test]
    fn a_followed_dispute_moves_forward_only() {
        use Stage::*;
        use Status::*;
        assert_eq!(
            follow((PreDispute, Opened), (Dispute, Opened)),
            Some((Dispute, Opened))
        );
        assert_eq!(follow((Dispute, Opened), (PreDispute, Opened)), None);
        assert_eq!(
            follow((Dispute, Challenged), (Arbitration, Opened)),
            Some((Arbitration, Challenged))
        );
        assert_eq!(
            follow((Dispute, Challenged), (Dispute, Cancelled)),
            Some((Dispute, Cancelled))
        );
        assert_eq!(follow((Dispute, Won), (Arbitration, Lost)), None);
        assert_eq!(follow((Dispute, Opened), (Dispute, Opened)), None);
    }

    #[test]
    fn stages_parse_back() {
        for s in ["pre_dispute", "dispute", "pre_arbitration", "arbitration"] {
            assert_eq!(Stage::parse(s).map(Stage::as_str), Some(s));
        }
    }
}

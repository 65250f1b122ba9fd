//! The wallet processor's seller case, pure: its types (stages), statuses and outcomes, the
//! actions the seller may take in each status, what each action, the buyer and the passing of
//! time do to a case, and how a case maps onto a dispute.
//!
//! ```text
//!                       ┌──send_message / make_offer──▶ WAITING_FOR_BUYER_RESPONSE ──buyer replies──┐
//!   (opened) ──▶ WAITING_FOR_SELLER_RESPONSE ◀────────────────────────────────────────────────────────┘
//!                       ├──provide_evidence──▶ UNDER_REVIEW ──won──▶ RESOLVED (seller's favour)
//!                       │                          └──lost──▶ APPEALABLE ──appeal──▶ UNDER_REVIEW (next stage)
//!                       │                                         └──window passes──▶ RESOLVED (buyer's favour)
//!                       ├──accept_claim / acknowledge_return──▶ RESOLVED (accepted)
//!                       └──deadline passes──▶ RESOLVED (buyer's favour)
//!   any open status ──buyer withdraws──▶ RESOLVED (withdrawn)
//! ```
//!
//! The stage (`case_type`) only moves forward: the seller escalates an inquiry, the buyer
//! escalates a case, the seller appeals a loss. A case that left `WAITING_FOR_*` never goes
//! back to it, so the dispute it maps onto never goes from `challenged` back to `opened`.

use chrono::{DateTime, Duration, Utc};

use crate::disputes::machine::{Stage, Status as DisputeStatus};

pub use payd_model::wallet::{Action, Actor, CaseType, EntryKind, Outcome, Status};

/// What the machine needs of a case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    pub case_type: CaseType,
    pub status: Status,
    pub outcome: Option<Outcome>,
    pub amount: i64,
    pub offer_amount: Option<i64>,
    pub return_shipped: bool,
    /// The seller's last message or evidence note.
    pub note: Option<String>,
    pub due_at: Option<DateTime<Utc>>,
}

/// How long the sandbox processor takes for what it does on its own.
#[derive(Debug, Clone, Copy)]
pub struct Timing {
    /// The buyer's reply and the processor's review.
    pub reply: Duration,
    /// The seller's time to respond, and to appeal.
    pub window: Duration,
}

/// An action with what it carries (checked at the edge: a message is not blank, an offer is
/// positive, evidence names files).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request {
    AcceptClaim {
        message: Option<String>,
    },
    ProvideEvidence {
        message: Option<String>,
        file_ids: Vec<String>,
    },
    SendMessage {
        message: String,
    },
    MakeOffer {
        amount: i64,
        message: Option<String>,
    },
    Appeal {
        message: Option<String>,
    },
    Escalate {
        message: Option<String>,
    },
    AcknowledgeReturn {
        message: Option<String>,
    },
}

impl Request {
    pub fn action(&self) -> Action {
        match self {
            Request::AcceptClaim { .. } => Action::AcceptClaim,
            Request::ProvideEvidence { .. } => Action::ProvideEvidence,
            Request::SendMessage { .. } => Action::SendMessage,
            Request::MakeOffer { .. } => Action::MakeOffer,
            Request::Appeal { .. } => Action::Appeal,
            Request::Escalate { .. } => Action::Escalate,
            Request::AcknowledgeReturn { .. } => Action::AcknowledgeReturn,
        }
    }

    fn message(&self) -> Option<&str> {
        match self {
            Request::SendMessage { message } => Some(message),
            Request::AcceptClaim { message }
            | Request::ProvideEvidence { message, .. }
            | Request::MakeOffer { message, .. }
            | Request::Appeal { message }
            | Request::Escalate { message }
            | Request::AcknowledgeReturn { message } => message.as_deref(),
        }
    }
}

/// One history entry a change writes (the store numbers them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub actor: Actor,
    pub kind: EntryKind,
    pub case_type: CaseType,
    /// Set when the status changed.
    pub status: Option<(Status, Status)>,
    pub message: Option<String>,
    pub amount: Option<i64>,
    pub file_ids: Vec<String>,
}

/// A case after a change, and the entries that tell it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Changed {
    pub case: Case,
    pub entries: Vec<Entry>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    #[error("{action} is not allowed on a case that is {status} at stage {case_type}; allowed now: {allowed}",
        action = .action.as_str(), status = .status.as_str(), case_type = .case_type.as_str(),
        allowed = allowed_list(.allowed))]
    NotAllowed {
        action: Action,
        status: Status,
        case_type: CaseType,
        allowed: Vec<Action>,
    },
    #[error("the offer ({offer}) is more than the case's amount ({amount})")]
    OfferTooLarge { offer: i64, amount: i64 },
    #[error("the case is {}; the buyer can no longer {what}", .status.as_str())]
    BuyerCannot { status: Status, what: &'static str },
}

fn allowed_list(actions: &[Action]) -> String {
    if actions.is_empty() {
        return "none".to_owned();
    }
    actions
        .iter()
        .map(|a| a.as_str())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The actions the seller may take now, from the case's status and stage.
pub fn allowed(c: &Case) -> Vec<Action> {
    let inquiry = c.case_type == CaseType::Inquiry;
    let mut out = Vec::new();
    match c.status {
        Status::WaitingForSellerResponse => {
            out.extend([
                Action::AcceptClaim,
                Action::ProvideEvidence,
                Action::SendMessage,
            ]);
            if inquiry {
                out.extend([Action::MakeOffer, Action::Escalate]);
            }
            if c.return_shipped {
                out.push(Action::AcknowledgeReturn);
            }
        }
        Status::WaitingForBuyerResponse => {
            out.extend([Action::AcceptClaim, Action::SendMessage]);
            if inquiry {
                out.push(Action::Escalate);
            }
        }
        Status::Appealable => {
            out.push(Action::AcceptClaim);
            if c.case_type.next().is_some() {
                out.push(Action::Appeal);
            }
        }
        Status::UnderReview | Status::Resolved => {}
    }
    out
}

/// A case the buyer just opened.
pub fn open(
    case_type: CaseType,
    amount: i64,
    reason: &str,
    now: DateTime<Utc>,
    t: Timing,
) -> Changed {
    let case = Case {
        case_type,
        status: Status::WaitingForSellerResponse,
        outcome: None,
        amount,
        offer_amount: None,
        return_shipped: false,
        note: None,
        due_at: Some(now + t.window),
    };
    let entry = Entry {
        actor: Actor::Buyer,
        kind: EntryKind::Opened,
        case_type,
        status: None,
        message: Some(reason.to_owned()),
        amount: Some(amount),
        file_ids: Vec::new(),
    };
    Changed {
        case,
        entries: vec![entry],
    }
}

/// Moves a case to `to` (with `outcome` when it resolves), writing the entry of whoever moved it.
fn moved(c: &Case, to: Status, outcome: Option<Outcome>, due_at: Option<DateTime<Utc>>) -> Case {
    Case {
        status: to,
        outcome,
        due_at: if to == Status::Resolved { None } else { due_at },
        ..c.clone()
    }
}

fn entry(before: &Case, after: &Case, actor: Actor, kind: EntryKind) -> Entry {
    Entry {
        actor,
        kind,
        case_type: after.case_type,
        status: (before.status != after.status).then_some((before.status, after.status)),
        message: None,
        amount: None,
        file_ids: Vec::new(),
    }
}

/// The seller's action.
pub fn act(c: &Case, req: &Request, now: DateTime<Utc>, t: Timing) -> Result<Changed, Refusal> {
    let action = req.action();
    let allowed_now = allowed(c);
    if !allowed_now.contains(&action) {
        return Err(Refusal::NotAllowed {
            action,
            status: c.status,
            case_type: c.case_type,
            allowed: allowed_now,
        });
    }
    let reply = Some(now + t.reply);
    let mut after = match req {
        Request::AcceptClaim { .. } | Request::AcknowledgeReturn { .. } => {
            moved(c, Status::Resolved, Some(Outcome::Accepted), None)
        }
        Request::ProvideEvidence { .. } | Request::Appeal { .. } => {
            let mut a = moved(c, Status::UnderReview, None, reply);
            if action == Action::Appeal {
                a.case_type = c.case_type.next().unwrap_or(c.case_type);
            }
            a
        }
        Request::SendMessage { .. } => moved(c, Status::WaitingForBuyerResponse, None, reply),
        Request::MakeOffer { amount, .. } => {
            if *amount > c.amount {
                return Err(Refusal::OfferTooLarge {
                    offer: *amount,
                    amount: c.amount,
                });
            }
            let mut a = moved(c, Status::WaitingForBuyerResponse, None, reply);
            a.offer_amount = Some(*amount);
            a
        }
        Request::Escalate { .. } => {
            let mut a = moved(
                c,
                Status::WaitingForSellerResponse,
                None,
                Some(now + t.window),
            );
            a.case_type = c.case_type.next().unwrap_or(c.case_type);
            a.offer_amount = None;
            a
        }
    };
    if let Some(m) = req.message() {
        after.note = Some(m.to_owned());
    }
    let mut e = entry(c, &after, Actor::Seller, action.into());
    e.message = req.message().map(str::to_owned);
    match req {
        Request::MakeOffer { amount, .. } => e.amount = Some(*amount),
        Request::ProvideEvidence { file_ids, .. } => e.file_ids = file_ids.clone(),
        _ => {}
    }
    Ok(Changed {
        case: after,
        entries: vec![e],
    })
}

/// The buyer withdraws the case.
pub fn withdraw(c: &Case) -> Result<Changed, Refusal> {
    if c.status == Status::Resolved {
        return Err(Refusal::BuyerCannot {
            status: c.status,
            what: "withdraw it",
        });
    }
    let after = moved(c, Status::Resolved, Some(Outcome::Withdrawn), None);
    Ok(Changed {
        entries: vec![entry(c, &after, Actor::Buyer, EntryKind::Withdrawn)],
        case: after,
    })
}

/// The buyer escalates the case to the next stage: a case waiting for either side waits for
/// the seller again; one under review is reviewed at the new stage.
pub fn buyer_escalate(c: &Case, now: DateTime<Utc>, t: Timing) -> Result<Changed, Refusal> {
    let next = match (c.status, c.case_type.next()) {
        (
            Status::WaitingForSellerResponse
            | Status::WaitingForBuyerResponse
            | Status::UnderReview,
            Some(next),
        ) => next,
        _ => {
            return Err(Refusal::BuyerCannot {
                status: c.status,
                what: "escalate it",
            })
        }
    };
    let mut after = if c.status == Status::UnderReview {
        moved(c, Status::UnderReview, None, Some(now + t.reply))
    } else {
        moved(
            c,
            Status::WaitingForSellerResponse,
            None,
            Some(now + t.window),
        )
    };
    after.case_type = next;
    after.offer_amount = None;
    Ok(Changed {
        entries: vec![entry(c, &after, Actor::Buyer, EntryKind::Escalated)],
        case: after,
    })
}

/// Whether the seller's note holds this outcome word.
fn says(c: &Case, word: &str) -> bool {
    c.note.as_deref().is_some_and(|n| n.contains(word))
}

/// What the processor (or the buyer, in the sandbox) does once `due_at` has passed: the buyer
/// replies, a review is decided, a window closes. `None` when nothing is due.
pub fn due(c: &Case, now: DateTime<Utc>, t: Timing) -> Option<Changed> {
    if c.due_at.is_none_or(|d| now < d) {
        return None;
    }
    let (after, actor, kind) = match c.status {
        Status::WaitingForSellerResponse => (
            moved(c, Status::Resolved, Some(Outcome::BuyerFavour), None),
            Actor::Processor,
            EntryKind::DeadlinePassed,
        ),
        Status::WaitingForBuyerResponse => {
            let window = Some(now + t.window);
            if says(c, "buyer_withdraws") {
                (
                    moved(c, Status::Resolved, Some(Outcome::Withdrawn), None),
                    Actor::Buyer,
                    EntryKind::Withdrawn,
                )
            } else if c.offer_amount.is_some() && !says(c, "offer_declined") {
                (
                    moved(c, Status::Resolved, Some(Outcome::Accepted), None),
                    Actor::Buyer,
                    EntryKind::OfferAccepted,
                )
            } else if says(c, "item_returned") {
                let mut a = moved(c, Status::WaitingForSellerResponse, None, window);
                a.return_shipped = true;
                (a, Actor::Buyer, EntryKind::ReturnShipped)
            } else {
                let mut a = moved(c, Status::WaitingForSellerResponse, None, window);
                a.offer_amount = None;
                (a, Actor::Buyer, EntryKind::Reply)
            }
        }
        Status::UnderReview => {
            if !says(c, "losing_evidence") {
                (
                    moved(c, Status::Resolved, Some(Outcome::SellerFavour), None),
                    Actor::Processor,
                    EntryKind::Decided,
                )
            } else if c.case_type.next().is_some() {
                (
                    moved(c, Status::Appealable, None, Some(now + t.window)),
                    Actor::Processor,
                    EntryKind::Decided,
                )
            } else {
                (
                    moved(c, Status::Resolved, Some(Outcome::BuyerFavour), None),
                    Actor::Processor,
                    EntryKind::Decided,
                )
            }
        }
        Status::Appealable => (
            moved(c, Status::Resolved, Some(Outcome::BuyerFavour), None),
            Actor::Processor,
            EntryKind::DeadlinePassed,
        ),
        Status::Resolved => return None,
    };
    let mut e = entry(c, &after, actor, kind);
    if kind == EntryKind::OfferAccepted {
        e.amount = c.offer_amount;
    }
    Some(Changed {
        case: after,
        entries: vec![e],
    })
}

/// What a dispute following this case shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mapped {
    pub stage: Stage,
    pub status: DisputeStatus,
    /// What the buyer disputes (or, after an accepted offer, keeps).
    pub amount: i64,
}

/// The dispute a case maps onto: waiting for either side is `opened`, under review or
/// appealable is `challenged`, and the outcome decides a resolved case.
pub fn mapped(c: &Case) -> Mapped {
    let status = match (c.status, c.outcome) {
        (Status::WaitingForSellerResponse | Status::WaitingForBuyerResponse, _) => {
            DisputeStatus::Opened
        }
        (Status::UnderReview | Status::Appealable, _) => DisputeStatus::Challenged,
        (Status::Resolved, Some(Outcome::SellerFavour)) => DisputeStatus::Won,
        (Status::Resolved, Some(Outcome::Accepted)) => DisputeStatus::Accepted,
        (Status::Resolved, Some(Outcome::Withdrawn)) => DisputeStatus::Cancelled,
        (Status::Resolved, Some(Outcome::BuyerFavour) | None) => DisputeStatus::Lost,
    };
    let amount = match (status, c.offer_amount) {
        (DisputeStatus::Accepted, Some(offer)) => offer.min(c.amount),
        _ => c.amount,
    };
    Mapped {
        stage: c.case_type.stage(),
        status,
        amount,
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    const T: Timing = Timing {
        reply: Duration::seconds(5),
        window: Duration::days(7),
    };

    fn opened(case_type: CaseType) -> Case {
        open(
            case_type,
            1000,
            "item not received",
            crate::clock::wall_now(),
            T,
        )
        .case
    }

    fn request(action: Action, note: &str) -> Request {
        let message = Some(note.to_owned());
        match action {
            Action::AcceptClaim => Request::AcceptClaim { message },
            Action::ProvideEvidence => Request::ProvideEvidence {
                message,
                file_ids: vec!["file_1".into()],
            },
            Action::SendMessage => Request::SendMessage {
                message: note.to_owned(),
            },
            Action::MakeOffer => Request::MakeOffer {
                amount: 400,
                message,
            },
            Action::Appeal => Request::Appeal { message },
            Action::Escalate => Request::Escalate { message },
            Action::AcknowledgeReturn => Request::AcknowledgeReturn { message },
        }
    }

    #[derive(Debug, Clone)]
    enum Step {
        Act(usize, usize),
        Withdraw,
        BuyerEscalate,
        Due,
    }

    const NOTES: [&str; 5] = [
        "here is the tracking number",
        "losing_evidence",
        "buyer_withdraws",
        "offer_declined",
        "item_returned",
    ];

    fn step() -> impl Strategy<Value = Step> {
        prop_oneof![
            (0..Action::ALL.len(), 0..NOTES.len()).prop_map(|(a, n)| Step::Act(a, n)),
            Just(Step::Withdraw),
            Just(Step::BuyerEscalate),
            Just(Step::Due),
        ]
    }

    fn rank(s: DisputeStatus) -> u8 {
        match s {
            DisputeStatus::Opened => 0,
            DisputeStatus::Challenged => 1,
            _ => 2,
        }
    }

    proptest! {
        /// Whatever happens, the stage only moves forward, a resolved case stays resolved,
        /// the mapped dispute never moves back (closed stays closed, challenged never becomes
        /// opened again) and an action outside `allowed` is refused.
        #[test]
        fn cases_move_forward_only(start in 0usize..2, steps in prop::collection::vec(step(), 0..40)) {
            let mut now = crate::clock::wall_now();
            let mut c = opened(CaseType::ALL[start]);
            for s in &steps {
                let before = c.clone();
                let next = match s {
                    Step::Act(a, n) => {
                        let req = request(Action::ALL[*a], NOTES[*n]);
                        let r = act(&c, &req, now, T);
                        prop_assert_eq!(r.is_ok() || matches!(r, Err(Refusal::OfferTooLarge { .. })),
                            allowed(&c).contains(&req.action()));
                        r.ok()
                    }
                    Step::Withdraw => withdraw(&c).ok(),
                    Step::BuyerEscalate => buyer_escalate(&c, now, T).ok(),
                    Step::Due => {
                        now += Duration::days(8);
                        due(&c, now, T)
                    }
                };
                if let Some(changed) = next {
                    c = changed.case;
                }
                prop_assert!(c.case_type >= before.case_type);
                if before.status == Status::Resolved {
                    prop_assert_eq!(&c, &before);
                }
                let (was, is) = (mapped(&before), mapped(&c));
                prop_assert!(rank(is.status) >= rank(was.status));
                if rank(was.status) == 2 {
                    prop_assert_eq!(is.status, was.status);
                }
                prop_assert!(is.amount <= c.amount);
                prop_assert_eq!(c.status == Status::Resolved, c.outcome.is_some());
            }
        }
    }

    #[test]
    fn the_actions_follow_the_status_and_stage() {
        let inquiry = opened(CaseType::Inquiry);
        assert_eq!(
            allowed(&inquiry),
            vec![
                Action::AcceptClaim,
                Action::ProvideEvidence,
                Action::SendMessage,
                Action::MakeOffer,
                Action::Escalate
            ]
        );
        let chargeback = opened(CaseType::Chargeback);
        assert!(!allowed(&chargeback).contains(&Action::MakeOffer));
        let err = act(
            &chargeback,
            &request(Action::Appeal, "x"),
            crate::clock::wall_now(),
            T,
        )
        .unwrap_err();
        assert!(
            err.to_string().contains("WAITING_FOR_SELLER_RESPONSE"),
            "{err}"
        );
    }

    #[test]
    fn escalation_and_appeal_move_the_stage_forward() {
        let now = crate::clock::wall_now();
        let c = opened(CaseType::Inquiry);
        let up = act(&c, &request(Action::Escalate, "please review"), now, T).unwrap();
        assert_eq!(up.case.case_type, CaseType::Chargeback);
        assert_eq!(mapped(&up.case).stage, Stage::Dispute);

        let evidence = act(
            &up.case,
            &request(Action::ProvideEvidence, "losing_evidence"),
            now,
            T,
        )
        .unwrap()
        .case;
        let lost = due(&evidence, now + Duration::seconds(5), T).unwrap().case;
        assert_eq!(lost.status, Status::Appealable);
        assert_eq!(mapped(&lost).status, DisputeStatus::Challenged);
        let appealed = act(&lost, &request(Action::Appeal, "new proof"), now, T)
            .unwrap()
            .case;
        assert_eq!(appealed.case_type, CaseType::PreArbitration);
        let won = due(&appealed, now + Duration::seconds(10), T).unwrap().case;
        assert_eq!(mapped(&won).status, DisputeStatus::Won);
    }

    #[test]
    fn the_buyer_answers_by_the_sellers_words() {
        let now = crate::clock::wall_now();
        let later = now + Duration::seconds(5);
        let c = opened(CaseType::Inquiry);
        let offer = act(&c, &request(Action::MakeOffer, "half back"), now, T)
            .unwrap()
            .case;
        let taken = due(&offer, later, T).unwrap().case;
        assert_eq!(taken.outcome, Some(Outcome::Accepted));
        assert_eq!(mapped(&taken).amount, 400);

        let msg = act(&c, &request(Action::SendMessage, "buyer_withdraws"), now, T)
            .unwrap()
            .case;
        assert_eq!(
            mapped(&due(&msg, later, T).unwrap().case).status,
            DisputeStatus::Cancelled
        );

        let ret = act(&c, &request(Action::SendMessage, "item_returned"), now, T)
            .unwrap()
            .case;
        let shipped = due(&ret, later, T).unwrap().case;
        assert!(allowed(&shipped).contains(&Action::AcknowledgeReturn));
        assert!(
            due(&shipped, later, T).is_none(),
            "nothing is due before the window closes"
        );
    }
}

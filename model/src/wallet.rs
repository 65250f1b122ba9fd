//! A wallet processor's case: its type (stage), status and outcome, and who wrote an entry of
//! its history (PayPal's names); the machine is `payd::wallet::machine`.

use crate::disputes::Stage;

text_enum! {
    /// The case's stage at the processor.
    #[derive(PartialOrd, Ord)]
    pub enum CaseType {
        Inquiry = "INQUIRY",
        Chargeback = "CHARGEBACK",
        PreArbitration = "PRE_ARBITRATION",
        Arbitration = "ARBITRATION",
    }
}

impl CaseType {
    /// The stage after this one; none after arbitration.
    pub fn next(self) -> Option<CaseType> {
        match self {
            CaseType::Inquiry => Some(CaseType::Chargeback),
            CaseType::Chargeback => Some(CaseType::PreArbitration),
            CaseType::PreArbitration => Some(CaseType::Arbitration),
            CaseType::Arbitration => None,
        }
    }

    /// The dispute stage this case type maps onto.
    pub fn stage(self) -> Stage {
        match self {
            CaseType::Inquiry => Stage::PreDispute,
            CaseType::Chargeback => Stage::Dispute,
            CaseType::PreArbitration => Stage::PreArbitration,
            CaseType::Arbitration => Stage::Arbitration,
        }
    }
}

text_enum! {
    /// The case's status at the processor.
    pub enum Status {
        WaitingForSellerResponse = "WAITING_FOR_SELLER_RESPONSE",
        WaitingForBuyerResponse = "WAITING_FOR_BUYER_RESPONSE",
        UnderReview = "UNDER_REVIEW",
        /// Decided against the seller, who may still appeal.
        Appealable = "APPEALABLE",
        Resolved = "RESOLVED",
    }
}

text_enum! {
    /// How a resolved case ended.
    pub enum Outcome {
        SellerFavour = "RESOLVED_SELLER_FAVOUR",
        BuyerFavour = "RESOLVED_BUYER_FAVOUR",
        /// The seller accepted the claim, acknowledged a return, or the buyer took an offer.
        Accepted = "ACCEPTED",
        /// The buyer withdrew the case.
        Withdrawn = "CANCELED_BY_BUYER",
    }
}

text_enum! {
    /// Who wrote a history entry.
    pub enum Actor {
        Buyer = "buyer",
        Seller = "seller",
        Processor = "processor",
    }
}

text_enum! {
    /// What the seller can do to a case.
    pub enum Action {
        AcceptClaim = "accept_claim",
        ProvideEvidence = "provide_evidence",
        SendMessage = "send_message",
        MakeOffer = "make_offer",
        Appeal = "appeal",
        Escalate = "escalate",
        AcknowledgeReturn = "acknowledge_return",
    }
}

text_enum! {
    /// What a history entry tells: the case opened, a seller's action (by its name), or what
    /// the buyer or the processor did.
    pub enum EntryKind {
        Opened = "opened",
        AcceptClaim = "accept_claim",
        ProvideEvidence = "provide_evidence",
        SendMessage = "send_message",
        MakeOffer = "make_offer",
        Appeal = "appeal",
        Escalate = "escalate",
        AcknowledgeReturn = "acknowledge_return",
        Withdrawn = "withdrawn",
        Escalated = "escalated",
        ReturnShipped = "return_shipped",
        Reply = "reply",
        OfferAccepted = "offer_accepted",
        Decided = "decided",
        DeadlinePassed = "deadline_passed",
    }
}

impl From<Action> for EntryKind {
    fn from(a: Action) -> Self {
        match a {
            Action::AcceptClaim => EntryKind::AcceptClaim,
            Action::ProvideEvidence => EntryKind::ProvideEvidence,
            Action::SendMessage => EntryKind::SendMessage,
            Action::MakeOffer => EntryKind::MakeOffer,
            Action::Appeal => EntryKind::Appeal,
            Action::Escalate => EntryKind::Escalate,
            Action::AcknowledgeReturn => EntryKind::AcknowledgeReturn,
        }
    }
}

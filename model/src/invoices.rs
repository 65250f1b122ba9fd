//! An invoice's kind and status; its machine is `payd::invoices::machine`.

text_enum! {
    pub enum Kind {
        Invoice = "invoice",
        CreditNote = "credit_note",
    }
}

text_enum! {
    pub enum Status {
        Draft = "draft",
        Open = "open",
        Paid = "paid",
        Void = "void",
        Uncollectible = "uncollectible",
        /// A credit note, once made (it is never a draft).
        Issued = "issued",
        /// A draft deleted: never shown again.
        Deleted = "deleted",
    }
}

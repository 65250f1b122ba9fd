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

/// An invoice's line as stored and shown, with its tax and what its credit notes took.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
#[schema(as = InvoiceLine)]
pub struct Line {
    pub line_id: String,
    pub name: String,
    pub quantity: i64,
    /// Per unit: before tax under an exclusive rule, tax included under an inclusive one.
    pub unit_amount: i64,
    #[serde(default)]
    pub product_id: Option<String>,
    #[serde(default)]
    pub price_id: Option<String>,
    #[serde(default)]
    pub tax_category: Option<String>,
    /// The tax rule applied (`tax_…`), `null` when none applies or the line was copied from a
    /// payment (its tax as captured).
    #[serde(default)]
    pub tax_rule_id: Option<String>,
    pub tax_rate_bps: i64,
    #[serde(default)]
    pub tax_inclusive: bool,
    pub tax_amount: i64,
    /// Before tax.
    pub amount: i64,
    /// `amount` + `tax_amount`.
    pub total: i64,
    /// Of an invoice's line: what its credit notes took (tax included), of how many units,
    /// and how much of that was tax.
    #[serde(default)]
    pub amount_credited: i64,
    #[serde(default)]
    pub quantity_credited: i64,
    #[serde(default)]
    pub tax_credited: i64,
}

impl Line {
    /// What its credit notes have not taken yet (tax included).
    pub fn left(&self) -> i64 {
        self.total - self.amount_credited
    }
}

/// A seller or a buyer, as given and as frozen on a finalized invoice.
#[derive(
    Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema,
)]
#[schema(as = InvoiceParty)]
#[serde(deny_unknown_fields)]
pub struct Party {
    pub name: String,
    #[serde(default)]
    pub email: Option<String>,
    #[serde(default)]
    pub address: Option<crate::address::Address>,
    /// ISO 3166-1 alpha-2 (the buyer's decides its tax rules).
    #[serde(default)]
    pub country: Option<String>,
    /// A region of the country (a state, a province) for regional tax rules.
    #[serde(default)]
    pub region: Option<String>,
    #[serde(default)]
    pub tax_id: Option<String>,
}

impl Party {
    /// Address lines as printed.
    pub fn address_lines(&self) -> Vec<String> {
        let mut out = Vec::new();
        if let Some(a) = &self.address {
            out.extend(a.line1.iter().chain(a.line2.iter()).cloned());
            let city = [a.postal_code.as_deref(), a.city.as_deref()]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(" ");
            if !city.is_empty() {
                out.push(city);
            }
            out.extend(a.state.iter().cloned());
        }
        out.extend(self.country.iter().cloned());
        out
    }
}

//! A subscription's and its cycle's statuses; the machine is `payd::subscriptions::machine`.

text_enum! {
    pub enum Status {
        Created = "created",
        Active = "active",
        Paused = "paused",
        Unpaid = "unpaid",
        Cancelled = "cancelled",
        InActive = "in_active",
    }
}

impl Status {
    /// Nothing leads out of a final status.
    pub fn is_final(self) -> bool {
        matches!(self, Status::Cancelled | Status::InActive)
    }
}

text_enum! {
    /// A billing cycle: open until its attempt is paid, or void when it no longer bills.
    pub enum CycleStatus {
        Open = "open",
        Paid = "paid",
        Void = "void",
    }
}

text_enum! {
    /// A subscription at the sandbox billing processor.
    pub enum ProcessorStatus {
        Active = "active",
        Paused = "paused",
        Cancelled = "cancelled",
    }
}

text_enum! {
    /// An invoice of the sandbox billing processor: collected, or its collection failed.
    pub enum ProcessorInvoiceStatus {
        Paid = "paid",
        Failed = "failed",
    }
}

text_enum! {
    /// Who bills a subscription: payd, charging each cycle itself, or the billing processor
    /// that collects its cycles.
    pub enum Biller {
        Payd = "payd",
        BillingSandbox = "billing_sandbox",
    }
}

/// An item as stored and shown: a recurring price of the catalog (payd billing) or a plan or
/// add-on of the billing processor.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize, utoipa::ToSchema)]
pub struct Item {
    #[serde(default)]
    pub price_id: Option<String>,
    #[serde(default)]
    pub product_id: Option<String>,
    /// The billing processor's plan or add-on (`GET /subscriptions/items`).
    #[serde(default)]
    pub plan_id: Option<String>,
    pub quantity: i64,
    pub unit_amount: i64,
}

/// A line of a billing cycle: an item (or the prorations of plan changes), with the tax the
/// shop's rules put on it when the cycle was made. What it charges is [`CycleLine::total`]; a
/// cycle charges the sum of its lines.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CycleLine {
    pub line_id: String,
    pub name: String,
    pub quantity: i64,
    pub unit_amount: i64,
    #[serde(default)]
    pub product_id: Option<String>,
    #[serde(default)]
    pub price_id: Option<String>,
    /// The tax rule that applied; `None`: no tax.
    #[serde(default)]
    pub tax_rule_id: Option<String>,
    #[serde(default)]
    pub tax_rate_bps: i64,
    /// The tax is part of `quantity × unit_amount` (else it is added to it).
    #[serde(default)]
    pub tax_inclusive: bool,
    #[serde(default)]
    pub tax_amount: i64,
}

impl CycleLine {
    /// What the line charges: `quantity × unit_amount`, plus the tax when it is exclusive.
    pub fn total(&self) -> Option<i64> {
        let goods = self.quantity.checked_mul(self.unit_amount)?;
        match self.tax_inclusive {
            true => Some(goods),
            false => goods.checked_add(self.tax_amount),
        }
    }

    /// The line as the cycle's payment carries it (its total is the same: an inclusive tax
    /// stays inside the unit price). An amount past an `i64` saturates, so the lines no longer
    /// add up to the cycle's amount and the charge is refused.
    pub fn payment_line(&self) -> crate::payments::Line {
        let tax_amount = if self.tax_inclusive {
            0
        } else {
            self.tax_amount
        };
        crate::payments::Line {
            line_id: self.line_id.clone(),
            product_id: self.product_id.clone(),
            price_id: self.price_id.clone(),
            name: self.name.clone(),
            quantity: self.quantity,
            unit_amount: self.unit_amount,
            tax_amount,
            amount: self
                .quantity
                .saturating_mul(self.unit_amount)
                .saturating_add(tax_amount),
            quantity_refunded: 0,
            amount_refunded: 0,
        }
    }
}

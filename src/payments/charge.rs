//! The payments interface for other resources: a payment payd makes on a resource's behalf (a
//! subscription's cycle), asked for in plain data and answered by where it settled. No other
//! resource builds the payment routes' request, acts as a caller it is not, or reads a
//! payment's status to learn whether it was paid.

use payd_entity::payment;

use super::{
    actor::Payments,
    api::{MandateRequest, NewPayment},
    create::{self, CreateError, Maker},
    machine::{Line, Status},
    store,
};
use crate::{
    auth::keys::Scope,
    fields::Metadata,
    ids::{CustomerId, MandateId, PaymentId, PaymentMethodId, ProfileId},
    money::Money,
};
use payd_model::payments::FutureUsage;

/// A payment another resource asks for.
#[derive(Debug, Clone)]
pub struct Charge {
    /// Chosen and recorded by the asking resource before it asks (intent before effect): a
    /// charge asked again, after a crash or by another instance, carries on with this payment
    /// and never makes a second.
    pub payment_id: PaymentId,
    /// The merchant and mode it is made in.
    pub scope: Scope,
    pub shop: ProfileId,
    pub customer_id: CustomerId,
    pub pay: Pay,
    pub amount: Money,
    /// What it pays for; they add up to `amount`. Billed as agreed, whatever the catalog
    /// says of their products and prices now.
    pub lines: Vec<Line>,
    pub metadata: Metadata,
    pub description: String,
}

/// How the customer pays.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Pay {
    /// Now, without the customer: under their multi-use mandate, with its saved method or
    /// the one named.
    OffSession {
        mandate_id: MandateId,
        payment_method_id: Option<PaymentMethodId>,
    },
    /// By the buyer on the hosted checkout, saving the card for off-session charges.
    Checkout,
}

/// Where a charge stands.
#[derive(Debug, Clone)]
pub enum Settlement {
    /// Paid.
    Paid(payment::Model),
    /// Ended without being paid: declined, failed, cancelled or expired.
    Unpaid(payment::Model),
    /// On its way: the processor, the buyer, a capture or a sync settles it later.
    Pending(payment::Model),
}

impl Settlement {
    /// Where this payment stands, for the resource it was made for.
    pub fn of(payment: payment::Model) -> Settlement {
        match payment.status {
            Status::Succeeded => Settlement::Paid(payment),
            Status::Declined | Status::Failed | Status::Cancelled | Status::Expired => {
                Settlement::Unpaid(payment)
            }
            Status::RequiresPaymentMethod
            | Status::RequiresConfirmation
            | Status::RequiresCustomerAction
            | Status::RequiresMerchantAction
            | Status::Processing
            | Status::RequiresCapture
            | Status::PartiallyAuthorizedAndRequiresCapture
            | Status::PartiallyCaptured
            | Status::PartiallyCapturedAndCapturable
            | Status::CancelledPostCapture
            | Status::Conflicted => Settlement::Pending(payment),
        }
    }

    pub fn payment(&self) -> &payment::Model {
        match self {
            Settlement::Paid(p) | Settlement::Unpaid(p) | Settlement::Pending(p) => p,
        }
    }
}

/// Why a charge was not made.
#[derive(Debug, thiserror::Error)]
pub enum ChargeError {
    /// Nothing to charge, or more than the deployment's largest charge (`limits.max_amount`).
    #[error("the amount {amount} is not between 1 and the largest charge, {max}")]
    Amount { amount: i64, max: i64 },
    /// The lines do not add up to the amount.
    #[error("the lines add up to {lines}, not to the amount {amount}")]
    Lines { lines: i64, amount: i64 },
    /// Refused as the payment was made: its customer, mandate or method is gone or does not
    /// cover it.
    #[error(transparent)]
    Refused(#[from] CreateError),
}

/// Makes the charge's payment, confirmed at once off-session or left for the buyer's
/// checkout; or, when it was made already, carries it on (confirmed if it still waits for
/// that, else read as it stands, reconciled with the processor).
pub async fn charge(payments: &Payments, charge: Charge) -> Result<Settlement, ChargeError> {
    check(&charge, payments.deps().settings.limits.max_amount)?;
    let maker = Maker::Charge {
        payment_id: charge.payment_id.clone(),
    };
    let resume = Some(charge.payment_id.clone());
    let scope = charge.scope.clone();
    let payment = create::create(payments, &scope, ask(charge), None, resume, maker).await?;
    Ok(Settlement::of(payment))
}

/// What payd charges at all: between 1 and the deployment's largest charge (`max`), its
/// lines (if any) adding up to it.
fn check(charge: &Charge, max: i64) -> Result<(), ChargeError> {
    let amount = charge.amount.minor;
    if amount < 1 || amount > max {
        return Err(ChargeError::Amount { amount, max });
    }
    let lines = charge
        .lines
        .iter()
        .try_fold(0i64, |sum, l| sum.checked_add(l.amount))
        .unwrap_or(i64::MAX);
    if !charge.lines.is_empty() && lines != amount {
        return Err(ChargeError::Lines { lines, amount });
    }
    Ok(())
}

/// The charge as the payment's maker reads a new payment.
fn ask(charge: Charge) -> NewPayment {
    let checkout = charge.pay == Pay::Checkout;
    let (mandate_id, payment_method_id) = match charge.pay {
        Pay::OffSession {
            mandate_id,
            payment_method_id,
        } => (Some(mandate_id), payment_method_id),
        Pay::Checkout => (None, None),
    };
    // The checkout's card is saved under a multi-use mandate with no limit.
    let mandate_request = checkout.then(|| MandateRequest {
        single_use: false,
        amount_limit: None,
        currency: charge.amount.currency.clone(),
        ends_at: None,
    });
    NewPayment {
        shop: charge.shop,
        amount: charge.amount,
        manual_capture: false,
        confirm: !checkout,
        card: None,
        payment_method_id: payment_method_id.map(|id| id.to_string()),
        customer_id: Some(charge.customer_id.to_string()),
        future_usage: checkout.then_some(FutureUsage::OffSession),
        mandate_id: mandate_id.map(|id| id.to_string()),
        off_session: !checkout,
        mandate_request,
        enable_partial_authorization: false,
        lines: Some(charge.lines).filter(|l| !l.is_empty()),
        metadata: charge.metadata,
        description: Some(charge.description),
        return_url: None,
        hosted_checkout: checkout,
        locale: None,
    }
}

/// The payment a charge made, if it was made.
pub async fn find(
    payments: &Payments,
    id: &PaymentId,
) -> Result<Option<Settlement>, sea_orm::DbErr> {
    Ok(store::find(&payments.deps().db, id)
        .await?
        .map(Settlement::of))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::MerchantId;

    fn line(id: &str, quantity: i64, unit_amount: i64, tax_amount: i64) -> Line {
        Line {
            line_id: id.to_owned(),
            product_id: None,
            price_id: None,
            name: id.to_owned(),
            quantity,
            unit_amount,
            tax_amount,
            amount: quantity * unit_amount + tax_amount,
            quantity_refunded: 0,
            amount_refunded: 0,
        }
    }

    fn charge(amount: i64, lines: Vec<Line>) -> Charge {
        Charge {
            payment_id: PaymentId::new(),
            scope: Scope::whole(&MerchantId::new(), true),
            shop: ProfileId::new(),
            customer_id: CustomerId::new(),
            pay: Pay::Checkout,
            amount: Money::new(amount, "EUR"),
            lines,
            metadata: Metadata::new(),
            description: "a cycle".to_owned(),
        }
    }

    #[test]
    fn a_charge_is_within_the_largest_and_its_lines_add_up_to_it() {
        let lines = || vec![line("a", 3, 335, 2), line("b", 1, 100, 0)];
        assert!(check(&charge(1107, lines()), 5000).is_ok());
        assert!(
            check(&charge(1107, Vec::new()), 5000).is_ok(),
            "no lines: nothing to add up"
        );
        assert!(matches!(
            check(&charge(1108, lines()), 5000),
            Err(ChargeError::Lines {
                lines: 1107,
                amount: 1108
            })
        ));
        assert!(matches!(
            check(&charge(5001, Vec::new()), 5000),
            Err(ChargeError::Amount {
                amount: 5001,
                max: 5000
            })
        ));
        assert!(matches!(
            check(&charge(0, Vec::new()), 5000),
            Err(ChargeError::Amount { amount: 0, .. })
        ));
        let huge = vec![line("a", 1, i64::MAX, 0), line("b", 1, 1, 0)];
        assert!(
            matches!(
                check(&charge(4000, huge), 5000),
                Err(ChargeError::Lines { .. })
            ),
            "lines whose sum overflows never add up"
        );
    }

    #[test]
    fn settlement_reads_every_status() {
        use payd_model::payments::Status;
        for status in Status::ALL {
            let paid = matches!(status, Status::Succeeded);
            let unpaid = matches!(
                status,
                Status::Declined | Status::Failed | Status::Cancelled | Status::Expired
            );
            let expected = if paid {
                "paid"
            } else if unpaid {
                "unpaid"
            } else {
                "pending"
            };
            assert_eq!(kind(status), expected, "{status}");
        }
    }

    /// The settlement `Settlement::of` gives a payment in `status`.
    fn kind(status: payd_model::payments::Status) -> &'static str {
        let ids = charge(1, Vec::new());
        let at = chrono::DateTime::from_timestamp(1_800_000_000, 0).expect("a time");
        let payment = payd_entity::payment::Model {
            id: ids.payment_id,
            merchant_id: ids.scope.merchant_id,
            profile_id: ids.shop,
            test_mode: true,
            status,
            amount: 1,
            currency: "EUR".to_owned(),
            capture_method: payd_model::payments::CaptureMethod::Automatic,
            amount_authorized: 0,
            amount_captured: 0,
            amount_refunded: 0,
            confirm_attempts: 0,
            max_attempts: 3,
            enable_partial_authorization: false,
            customer_id: None,
            mandate_id: None,
            setup_future_usage: None,
            off_session: false,
            mandate_request: None,
            payment_method: None,
            processor: None,
            processor_reference: None,
            last_error: None,
            lines: None,
            metadata: Default::default(),
            description: None,
            return_url: None,
            hosted_checkout: false,
            locale: None,
            client_secret: String::new(),
            expires_at: at,
            capture_before: None,
            captured_at: None,
            conflict: None,
            pending_operation: None,
            version: 0,
            created_at: at,
            updated_at: at,
        };
        match Settlement::of(payment) {
            Settlement::Paid(_) => "paid",
            Settlement::Unpaid(_) => "unpaid",
            Settlement::Pending(_) => "pending",
        }
    }
}

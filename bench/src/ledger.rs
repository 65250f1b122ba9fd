//! The ledger phase (#61, item 4): refunds and payouts posted against one shop's balance from
//! `--concurrency` connections at once, each posting committed, then the balance checked.
//!
//! A payout is reserved only when the shop's available balance covers it (400
//! `insufficient_balance` otherwise, under the shop's lock row); a refund is never refused for
//! the balance and may take it below zero (docs/payouts.md). So the phase checks what holds
//! whatever the order: the payouts made never exceed what the shop ever had, and the balance
//! adds up to exactly what the postings moved (none lost, none twice).

use std::{cell::RefCell, rc::Rc, time::Duration};

use awc::http::Method;
use serde_json::{json, Value};

use crate::{
    cpu::Meter,
    load::{drive, metered, Api, Outcome, Stats},
};

/// Each funding payment's amount, and how many there are.
const FUNDING_AMOUNT: i64 = 500_000;
const FUNDING_PAYMENTS: u64 = 64;
/// Each refund's and each payout's amount.
const REFUND: i64 = 100;
const PAYOUT: i64 = 1_000;

/// What the ledger phase measured and found.
pub(crate) struct LedgerRun {
    /// The postings made (refunds and payouts), per posting.
    pub(crate) stats: Stats,
    pub(crate) refunds: u64,
    pub(crate) payouts: u64,
    /// Payouts refused because the balance did not cover them.
    pub(crate) refused: u64,
    /// What the shop had: its balance before the phase and the funding payments.
    pub(crate) had: i64,
    /// Available plus pending at the end.
    pub(crate) balance: i64,
}

impl LedgerRun {
    /// Payouts beyond what the shop ever had: 0, or an overdraft.
    pub(crate) fn overdrafts(&self) -> u64 {
        let paid = self.payouts as i64 * PAYOUT;
        u64::from(paid > self.had)
    }

    /// Whether the balance is what the postings made of it.
    pub(crate) fn adds_up(&self) -> bool {
        self.balance == self.had - self.refunds as i64 * REFUND - self.payouts as i64 * PAYOUT
    }
}

/// The shop's available plus pending balance in USD.
async fn balance(api: &Api) -> anyhow::Result<i64> {
    let path = format!("/account/shops/{}/balance", api.profile);
    let body = api
        .call(Method::GET, &path, None)
        .await
        .map_err(|e| anyhow::anyhow!(e))?;
    let v: Value = serde_json::from_slice(&body)?;
    let usd = |bucket: &str| -> i64 {
        v[bucket]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|b| b["currency"] == "USD")
            .filter_map(|b| b["amount"].as_i64())
            .sum()
    };
    Ok(usd("available") + usd("pending"))
}

/// Funds the shop, then posts refunds and payouts (alternately) for `secs` with `c` in flight.
pub(crate) async fn measure(
    api: &Api,
    c: usize,
    secs: Duration,
    meter: &Meter,
) -> anyhow::Result<LedgerRun> {
    let before = balance(api).await?;
    let funding = serde_json::to_vec(&json!({"amount": FUNDING_AMOUNT, "currency": "USD",
        "confirm": true, "payment_method_data": {"card": {"number": "4242424242424242",
        "exp_month": 12, "exp_year": 2035, "cvc": "123"}}}))?;
    let funded: Rc<RefCell<Vec<String>>> = Rc::default();
    let (api2, funded2) = (api.clone(), funded.clone());
    drive(c, Duration::from_secs(120), None, move |k| {
        let (api, funded, body) = (api2.clone(), funded2.clone(), funding.clone());
        async move {
            if k >= FUNDING_PAYMENTS {
                return Outcome::Exhausted;
            }
            match api.create_expect(body.into(), "succeeded").await {
                Ok(id) => {
                    funded.borrow_mut().push(id);
                    Outcome::Ok
                }
                Err(e) => Outcome::Failed(e),
            }
        }
    })
    .await;
    let ids = funded.borrow().clone();
    if ids.is_empty() {
        anyhow::bail!("no funding payment was made");
    }
    let had = before + ids.len() as i64 * FUNDING_AMOUNT;
    let counts: Rc<RefCell<(u64, u64, u64)>> = Rc::default();
    let (api2, counts2, ids) = (api.clone(), counts.clone(), Rc::new(ids));
    let payout = serde_json::to_vec(&json!({"amount": PAYOUT, "currency": "USD",
        "destination": {"bank_account": {"account_number": "000123456789",
        "holder_name": "Bench"}}, "confirm": true, "auto_fulfill": true}))?;
    let stats = metered(
        meter,
        drive(c, secs, None, move |k| {
            let (api, counts, ids, payout) =
                (api2.clone(), counts2.clone(), ids.clone(), payout.clone());
            async move {
                if k % 2 == 0 {
                    let id = &ids[(k / 2) as usize % ids.len()];
                    let body = json!({"payment_id": id, "amount": REFUND}).to_string();
                    match api.call(Method::POST, "/refunds", Some(body.into())).await {
                        Ok(_) => {
                            counts.borrow_mut().0 += 1;
                            Outcome::Ok
                        }
                        Err(e) => Outcome::Failed(e),
                    }
                } else {
                    match api
                        .call(Method::POST, "/payouts/create", Some(payout.into()))
                        .await
                    {
                        Ok(_) => {
                            counts.borrow_mut().1 += 1;
                            Outcome::Ok
                        }
                        // Refused for the balance: a check that held, not a posting.
                        Err(e) if e.contains("insufficient_balance") => {
                            counts.borrow_mut().2 += 1;
                            Outcome::Refused
                        }
                        Err(e) => Outcome::Failed(e),
                    }
                }
            }
        }),
    )
    .await;
    let (refunds, payouts, refused) = *counts.borrow();
    Ok(LedgerRun {
        stats,
        refunds,
        payouts,
        refused,
        had,
        balance: balance(api).await?,
    })
}

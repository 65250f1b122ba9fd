//! The rows a sales report reads: a product's indexed payment lines, their payments and the
//! payments' succeeded refunds.

use payd_entity::{payment, refund};
use sea_orm::{ColumnTrait, ConnectionTrait, DbErr, EntityTrait, QueryFilter, QueryOrder};

use super::tally::{Refunded, Sold};
use crate::{payments::refunds::captured_shares, products};

/// What the product's lines sold and what their refunds gave back, in `currency`.
pub async fn lines(
    db: &impl ConnectionTrait,
    product_id: &str,
    price_ids: &[String],
    currency: &str,
) -> Result<(Vec<Sold>, Vec<Refunded>), DbErr> {
    let indexed = products::store::lines_of(db, product_id, price_ids).await?;
    let mut payment_ids: Vec<String> = indexed.iter().map(|l| l.payment_id.to_string()).collect();
    payment_ids.dedup();
    let payments = payment::Entity::find()
        .filter(payment::Column::Id.is_in(payment_ids.iter().map(String::as_str)))
        .filter(payment::Column::Currency.eq(currency))
        .all(db)
        .await?;
    let refunds = refund::Entity::find()
        .filter(refund::Column::PaymentId.is_in(payment_ids.iter().map(String::as_str)))
        .filter(refund::Column::Status.eq(payd_model::refunds::Status::Succeeded))
        .order_by_asc(refund::Column::Id)
        .all(db)
        .await?;
    let (mut sold, mut refunded) = (Vec::new(), Vec::new());
    for p in &payments {
        let all = crate::payments::api::lines_of(p);
        // A capture given back by a cancel after capture sold nothing.
        let captured = if p.status == payd_model::payments::Status::CancelledPostCapture {
            0
        } else {
            p.amount_captured
        };
        let shares = captured_shares(&all, captured);
        let mine: Vec<&str> = indexed
            .iter()
            .filter(|l| l.payment_id == p.id)
            .map(|l| l.line_id.as_str())
            .collect();
        for (line, share) in all.iter().zip(shares) {
            if !mine.contains(&line.line_id.as_str()) {
                continue;
            }
            sold.push(Sold {
                price_id: line.price_id.clone(),
                quantity: line.quantity,
                amount: line.amount,
                captured: share,
                at: p.captured_at,
            });
        }
        for r in refunds.iter().filter(|r| r.payment_id == p.id) {
            for part in r
                .lines
                .iter()
                .filter(|x| mine.contains(&x.line_id.as_str()))
            {
                let line = all.iter().find(|l| l.line_id == part.line_id);
                refunded.push(Refunded {
                    price_id: line.and_then(|l| l.price_id.clone()),
                    quantity: part.quantity,
                    amount: part.amount,
                    at: r.updated_at,
                });
            }
        }
    }
    Ok((sold, refunded))
}

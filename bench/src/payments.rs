//! The payment phases against a running payd: create+confirm in a closed loop and paced at
//! half its rate, the manual-capture flow, refunds of captured payments, and the mixed
//! workload.

use std::{cell::RefCell, collections::VecDeque, rc::Rc, time::Duration};

use actix_web::web;
use awc::http::Method;

use crate::{
    cpu::Meter,
    load::{drive, metered, outcome, payment_body, Api, Outcome, Stats},
    report::Report,
    Args, Phase,
};

/// Runs the payment phases `args` asks for, as the merchant `api`, into `report`, each under
/// `meter`.
pub(crate) async fn measure(args: &Args, api: &Api, meter: &Meter, report: &mut Report) {
    let secs = Duration::from_secs(args.seconds);
    let c = args.concurrency;
    // Captured payments, for the refund phase.
    let captured: Rc<RefCell<Vec<String>>> = Rc::default();

    let auto_body = payment_body(true, false);
    let create_confirm = {
        let (api, body, captured) = (api.clone(), auto_body.clone(), captured.clone());
        move |_k: u64| {
            let (api, body, captured) = (api.clone(), body.clone(), captured.clone());
            async move {
                match api.create_expect(body, "succeeded").await {
                    Ok(id) => {
                        captured.borrow_mut().push(id);
                        Outcome::Ok
                    }
                    Err(e) => Outcome::Failed(e),
                }
            }
        }
    };

    if args.wants(Phase::Confirm) {
        eprintln!("payd-bench: create+confirm");
        let stats = metered(meter, drive(c, secs, None, create_confirm.clone())).await;
        eprintln!("payd-bench:   {}", stats.summary());
        report.confirm = Some(stats);
    }

    if args.wants(Phase::Paced) {
        let half = report.confirm.as_ref().map(|s| s.rate() / 2.0);
        if let Some(rate) = args.paced_rate.or(half).filter(|r| *r > 0.0) {
            eprintln!("payd-bench: create+confirm paced at {rate:.0}/s");
            let stats = metered(meter, drive(c, secs, Some(rate), create_confirm.clone())).await;
            eprintln!("payd-bench:   {}", stats.summary());
            report.paced = Some((rate, stats));
        }
    }

    if args.wants(Phase::Manual) {
        eprintln!("payd-bench: manual capture (create+confirm, then capture)");
        let (api2, body, captured2) = (api.clone(), payment_body(true, true), captured.clone());
        let phase = drive(c, secs, None, move |_| {
            let (api, body, captured) = (api2.clone(), body.clone(), captured2.clone());
            async move {
                let r = async {
                    let id = api.create_expect(body, "requires_capture").await?;
                    let path = format!("/payments/{id}/capture");
                    api.call(Method::POST, &path, Some(web::Bytes::from_static(b"{}")))
                        .await?;
                    captured.borrow_mut().push(id);
                    Ok::<_, String>(())
                }
                .await;
                outcome(r)
            }
        });
        let stats = metered(meter, phase).await;
        eprintln!("payd-bench:   {}", stats.summary());
        report.manual = Some(stats);
    }

    if args.wants(Phase::Refund) {
        if captured.borrow().is_empty() {
            eprintln!("payd-bench: creating payments to refund");
            let n = 2_000u64;
            drive(c, secs, None, {
                let f = create_confirm.clone();
                move |k| {
                    let fut = (k < n).then(|| f(k));
                    async move {
                        match fut {
                            Some(fut) => fut.await,
                            None => Outcome::Exhausted,
                        }
                    }
                }
            })
            .await;
        }
        eprintln!(
            "payd-bench: refunds ({} captured payments available)",
            captured.borrow().len()
        );
        let (api2, captured2) = (api.clone(), captured.clone());
        let phase = drive(c, secs, None, move |_| {
            let (api, id) = (api2.clone(), captured2.borrow_mut().pop());
            async move {
                let Some(id) = id else {
                    return Outcome::Exhausted;
                };
                let body = format!(r#"{{"payment_id":"{id}"}}"#);
                outcome(api.call(Method::POST, "/refunds", Some(body.into())).await)
            }
        });
        let stats = metered(meter, phase).await;
        eprintln!("payd-bench:   {}", stats.summary());
        report.refund = Some(stats);
    }

    if args.wants(Phase::Mixed) {
        eprintln!("payd-bench: mixed workload");
        report.mixed = Some(metered(meter, mixed(api, c, secs)).await);
        eprintln!(
            "payd-bench:   {}",
            report
                .mixed
                .as_ref()
                .map(Stats::summary)
                .unwrap_or_default()
        );
    }
}

async fn mixed(api: &Api, c: usize, secs: Duration) -> Stats {
    #[derive(Default)]
    struct Pools {
        capturable: VecDeque<String>,
        refundable: VecDeque<String>,
        recent: VecDeque<String>,
    }
    let pools: Rc<RefCell<Pools>> = Rc::default();
    let auto = payment_body(true, false);
    let manual = payment_body(true, true);
    let api = api.clone();
    drive(c, secs, None, move |k| {
        let (api, pools, auto, manual) = (api.clone(), pools.clone(), auto.clone(), manual.clone());
        async move {
            // 40 % create+confirm automatic, 20 % create+confirm manual, 20 % capture,
            // 10 % refund, 10 % read; an operation whose pool is empty creates instead.
            let kind = k % 10;
            let picked = {
                let mut p = pools.borrow_mut();
                match kind {
                    6 | 7 => p.capturable.pop_front().map(|id| (1, id)),
                    8 => p.refundable.pop_front().map(|id| (2, id)),
                    9 => p.recent.back().cloned().map(|id| (3, id)),
                    _ => None,
                }
            };
            let r: Result<(), String> = match picked {
                Some((1, id)) => {
                    let path = format!("/payments/{id}/capture");
                    let r = api
                        .call(Method::POST, &path, Some(web::Bytes::from_static(b"{}")))
                        .await;
                    if r.is_ok() {
                        pools.borrow_mut().refundable.push_back(id);
                    }
                    r.map(|_| ())
                }
                Some((2, id)) => {
                    let body = format!(r#"{{"payment_id":"{id}"}}"#);
                    api.call(Method::POST, "/refunds", Some(body.into()))
                        .await
                        .map(|_| ())
                }
                Some((_, id)) => api
                    .call(Method::GET, &format!("/payments/{id}"), None)
                    .await
                    .map(|_| ()),
                None if kind == 4 || kind == 5 || kind == 6 || kind == 7 => {
                    match api.create_expect(manual, "requires_capture").await {
                        Ok(id) => {
                            pools.borrow_mut().capturable.push_back(id);
                            Ok(())
                        }
                        Err(e) => Err(e),
                    }
                }
                None => match api.create_expect(auto, "succeeded").await {
                    Ok(id) => {
                        let mut p = pools.borrow_mut();
                        p.refundable.push_back(id.clone());
                        p.recent.push_back(id);
                        if p.recent.len() > 1000 {
                            p.recent.pop_front();
                        }
                        Ok(())
                    }
                    Err(e) => Err(e),
                },
            };
            outcome(r)
        }
    })
    .await
}

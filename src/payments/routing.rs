//! Routing: which of a shop's processor accounts handles a payment, and in which order the
//! others are tried after a retryable decline. Pure: the caller passes the rules, the
//! enabled accounts and the payment's facts.

use crate::processors::model::Brand;

/// A rule that cannot be kept: the field it is about and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleError {
    pub param: String,
    pub message: String,
}

fn rule_error(param: &str, message: impl Into<String>) -> RuleError {
    RuleError {
        param: param.to_owned(),
        message: message.into(),
    }
}

/// The implicit sandbox account: the processor of a shop's test payments when the shop has no
/// test account. Payments it served name it, so no account may take the name.
pub const DEFAULT_PROCESSOR: &str = "sandbox";

pub use payd_model::payments::{Conditions, RoutingRules, Rule, Split};

/// The facts rules look at.
pub struct Facts<'a> {
    pub payment_id: &'a str,
    pub amount: i64,
    pub currency: &'a str,
    pub brand: Brand,
}

/// Checks `rules`' names against the shop's accounts and the split percentages.
pub fn validate(rules: &RoutingRules, accounts: &[String]) -> Result<(), RuleError> {
    for (i, rule) in rules.rules.iter().enumerate() {
        let p = |f: &str| format!("rules[{i}].{f}");
        if rule.name.trim().is_empty() {
            return Err(rule_error(&p("name"), "every rule needs a name"));
        }
        if rule.processors.is_empty() {
            return Err(rule_error(&p("processors"), "name at least one processor"));
        }
        for (j, split) in rule.processors.iter().enumerate() {
            if !accounts.contains(&split.processor) {
                return Err(rule_error(
                    &format!("rules[{i}].processors[{j}].processor"),
                    format!(
                        "the shop has no processor account named {:?} in this mode",
                        split.processor
                    ),
                ));
            }
        }
        if rule.processors.len() > 1 {
            let total: u32 = rule
                .processors
                .iter()
                .map(|s| u32::from(s.percent.unwrap_or(0)))
                .sum();
            if total != 100 {
                return Err(rule_error(
                    &p("processors"),
                    "split percentages must add up to 100",
                ));
            }
        }
        if let (Some(lo), Some(hi)) = (rule.conditions.min_amount, rule.conditions.max_amount) {
            if lo > hi {
                return Err(rule_error(
                    &p("conditions.min_amount"),
                    "min_amount exceeds max_amount",
                ));
            }
        }
    }
    Ok(())
}

/// The rule's conditions hold for these facts.
fn hold(c: &Conditions, f: &Facts) -> bool {
    c.currencies
        .as_ref()
        .is_none_or(|cs| cs.iter().any(|x| x.eq_ignore_ascii_case(f.currency)))
        && c.min_amount.is_none_or(|m| f.amount >= m)
        && c.max_amount.is_none_or(|m| f.amount <= m)
        && c.card_brands
            .as_ref()
            .is_none_or(|bs| bs.contains(&f.brand))
}

/// A stable bucket 0..100 for a payment, so a retried confirm routes the same way.
fn bucket(payment_id: &str) -> u32 {
    let mut h: u32 = 0x811c_9dc5;
    for b in payment_id.bytes() {
        h ^= u32::from(b);
        h = h.wrapping_mul(0x0100_0193);
    }
    h % 100
}

/// Decides the order in which `accounts` (enabled, in creation order) are tried.
pub fn decide(rules: &RoutingRules, accounts: &[String], facts: &Facts) -> RoutingDecision {
    let accounts: Vec<String> = if accounts.is_empty() {
        vec![DEFAULT_PROCESSOR.to_owned()]
    } else {
        accounts.to_vec()
    };
    let with_fallbacks = |first: Vec<String>| {
        let mut order = first;
        for a in &accounts {
            if !order.contains(a) {
                order.push(a.clone());
            }
        }
        order
    };
    for rule in &rules.rules {
        if !hold(&rule.conditions, facts) {
            continue;
        }
        let usable: Vec<&Split> = rule
            .processors
            .iter()
            .filter(|s| accounts.contains(&s.processor))
            .collect();
        if usable.is_empty() {
            continue;
        }
        if rule.processors.len() == 1 {
            let chosen = usable[0].processor.clone();
            return RoutingDecision {
                algorithm: "rule".into(),
                rule: Some(rule.name.clone()),
                candidates: with_fallbacks(vec![chosen.clone()]),
                reason: format!("rule {:?} matched and routes to {chosen}", rule.name),
                chosen,
            };
        }
        let b = bucket(facts.payment_id);
        let mut acc = 0u32;
        let mut chosen = usable[0].processor.clone();
        for s in &usable {
            acc += u32::from(s.percent.unwrap_or(0));
            if b < acc {
                chosen = s.processor.clone();
                break;
            }
        }
        let mut first = vec![chosen.clone()];
        first.extend(
            usable
                .iter()
                .map(|s| s.processor.clone())
                .filter(|p| *p != chosen),
        );
        return RoutingDecision {
            algorithm: "volume_split".into(),
            rule: Some(rule.name.clone()),
            candidates: with_fallbacks(first),
            reason: format!(
                "rule {:?} splits volume; bucket {b} falls to {chosen}",
                rule.name
            ),
            chosen,
        };
    }
    let chosen = accounts[0].clone();
    RoutingDecision {
        algorithm: "default".into(),
        rule: None,
        candidates: with_fallbacks(vec![chosen.clone()]),
        reason: format!("no rule matched; {chosen} is the shop's first processor"),
        chosen,
    }
}

/// The decision recorded for a fallback attempt after `previous` declined.
pub fn fallback(decision: &RoutingDecision, previous: &str, next: &str) -> RoutingDecision {
    RoutingDecision {
        algorithm: "fallback".into(),
        rule: decision.rule.clone(),
        candidates: decision.candidates.clone(),
        chosen: next.to_owned(),
        reason: format!("{previous} declined with a retryable error; falling back to {next}"),
    }
}

pub use payd_model::payments::RoutingDecision;

#[cfg(test)]
mod tests {
    use super::*;

    fn facts<'a>(id: &'a str, amount: i64, currency: &'a str) -> Facts<'a> {
        Facts {
            payment_id: id,
            amount,
            currency,
            brand: Brand::Visa,
        }
    }

    #[test]
    fn rules_conditions_splits_and_fallbacks() {
        let accounts = vec!["a".to_string(), "b".into(), "c".into()];
        let rules = RoutingRules {
            rules: vec![
                Rule {
                    name: "eur".into(),
                    conditions: Conditions {
                        currencies: Some(vec!["EUR".into()]),
                        ..Default::default()
                    },
                    processors: vec![Split {
                        processor: "c".into(),
                        percent: None,
                    }],
                },
                Rule {
                    name: "split".into(),
                    conditions: Conditions {
                        min_amount: Some(1000),
                        ..Default::default()
                    },
                    processors: vec![
                        Split {
                            processor: "a".into(),
                            percent: Some(50),
                        },
                        Split {
                            processor: "b".into(),
                            percent: Some(50),
                        },
                    ],
                },
            ],
        };
        validate(&rules, &accounts).unwrap();
        let d = decide(&rules, &accounts, &facts("pay_1", 10, "eur"));
        assert_eq!((d.algorithm.as_str(), d.chosen.as_str()), ("rule", "c"));
        assert_eq!(d.candidates, vec!["c", "a", "b"]);
        let d = decide(&rules, &accounts, &facts("pay_1", 10, "USD"));
        assert_eq!((d.algorithm.as_str(), d.chosen.as_str()), ("default", "a"));
        let mut seen = std::collections::HashSet::new();
        for i in 0..200 {
            let id = format!("pay_{i}");
            let d = decide(&rules, &accounts, &facts(&id, 5000, "USD"));
            assert_eq!(d.algorithm, "volume_split");
            assert_eq!(
                d,
                decide(&rules, &accounts, &facts(&id, 5000, "USD")),
                "stable"
            );
            seen.insert(d.chosen);
        }
        assert_eq!(seen.len(), 2, "both sides of the split are used");
        assert_eq!(
            decide(&RoutingRules::default(), &[], &facts("p", 1, "USD")).chosen,
            DEFAULT_PROCESSOR
        );
    }

    #[test]
    fn validation_names_the_field() {
        let bad = RoutingRules {
            rules: vec![Rule {
                name: "r".into(),
                conditions: Conditions::default(),
                processors: vec![Split {
                    processor: "zz".into(),
                    percent: None,
                }],
            }],
        };
        assert_eq!(
            validate(&bad, &["a".into()]).unwrap_err().param,
            "rules[0].processors[0].processor"
        );
    }
}

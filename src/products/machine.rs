//! The catalog's rules, pure: recurrence bounds, what may happen to a default or archived
//! price, add-on group bounds, and bundles without cycles.
//!
//! A price's amount, currency and recurrence never change: no request type carries them on an
//! update, so there is nothing here to refuse them with. An archived product or price cannot be
//! sold, made the default, or become a member or component; the default price cannot be
//! archived until another price is the default; a product named on a payment line is never
//! deleted (archive it): the store's delete checks it inside its commit. A product or price
//! that a bundle or an add-on group holds is neither archived nor deleted (`InUse`), so what a
//! bundle or group offers stays on sale: take it out of them first.

use std::collections::{BTreeMap, BTreeSet};

pub use payd_model::catalog::Interval;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// 400 about one field.
    #[error("{message}")]
    Invalid { param: String, message: String },
    #[error("{what} {id} is archived and cannot be {use_}")]
    Archived {
        what: &'static str,
        id: String,
        use_: &'static str,
        param: String,
    },
    #[error("the default price cannot be archived: make another price the default first")]
    DefaultPrice,
    #[error("the product is on payment lines: archive it instead of deleting it")]
    HasSales,
    #[error("a bundle cannot contain itself: {}", .0.join(" → "))]
    BundleCycle(Vec<String>),
    /// Taking a product or price off sale (archive, delete) while bundles or add-on groups
    /// hold it: they would go on offering it.
    #[error(
        "{what} {id} is held by {}: take it out of them before archiving or deleting it",
        .holders.join(", ")
    )]
    InUse {
        what: &'static str,
        id: String,
        /// `bundle prod_…`, `add-on group grp_… of prod_…`.
        holders: Vec<String>,
    },
}

fn invalid(param: impl Into<String>, message: impl Into<String>) -> Refusal {
    Refusal::Invalid {
        param: param.into(),
        message: message.into(),
    }
}

/// A recurrence: a known interval, and 1 to a year's worth of them.
pub fn check_recurring(param: &str, interval: &str, count: i64) -> Result<Interval, Refusal> {
    let i = Interval::parse(interval).ok_or_else(|| {
        invalid(
            format!("{param}.interval"),
            format!("unknown interval {interval:?}; day, week, month or year"),
        )
    })?;
    if !(1..=i.max_count()).contains(&count) {
        return Err(invalid(
            format!("{param}.interval_count"),
            format!(
                "interval_count must be 1 to {} for {interval}: at most a year in all",
                i.max_count()
            ),
        ));
    }
    Ok(i)
}

/// Archiving a price: never the default one.
pub fn archive_price(is_default: bool) -> Result<(), Refusal> {
    if is_default {
        return Err(Refusal::DefaultPrice);
    }
    Ok(())
}

/// An add-on group's bounds: `0 ≤ min ≤ max`, `1 ≤ max ≤ members`, 1 to 50 distinct members.
pub fn check_addon_group(
    name: &str,
    min: i64,
    max: i64,
    products: &[String],
    prices: &[String],
) -> Result<(), Refusal> {
    let name_len = name.trim().chars().count();
    if name_len == 0 || name.chars().count() > 100 {
        return Err(invalid("name", "name must be 1 to 100 characters"));
    }
    let members = products.len() + prices.len();
    if members == 0 || members > 50 {
        return Err(invalid(
            "products",
            "an add-on group has 1 to 50 members (products and prices)",
        ));
    }
    let distinct: BTreeSet<&String> = products.iter().chain(prices).collect();
    if distinct.len() != members {
        return Err(invalid("products", "a member is listed twice"));
    }
    if min < 0 || min > max {
        return Err(invalid(
            "min_selections",
            "min_selections must be 0 to max_selections",
        ));
    }
    if max < 1 || max > members as i64 {
        return Err(invalid(
            "max_selections",
            format!("max_selections must be 1 to the number of members ({members})"),
        ));
    }
    Ok(())
}

/// The first cycle through `root` in the bundle graph once `root`'s components are
/// `components` (products, a price counted as its product), as the path `root → … → root`;
/// `None` when there is none. `bundles` holds the other bundles' component products.
pub fn find_cycle(
    root: &str,
    components: &[String],
    bundles: &BTreeMap<String, Vec<String>>,
) -> Option<Vec<String>> {
    // Depth-first from each component, over products not visited yet: the graph is finite,
    // so the walk ends.
    let mut visited = BTreeSet::new();
    let mut stack: Vec<Vec<String>> = components
        .iter()
        .map(|c| vec![root.to_owned(), c.clone()])
        .collect();
    while let Some(path) = stack.pop() {
        let last = path.last().expect("a path is never empty").clone();
        if last == root {
            return Some(path);
        }
        if !visited.insert(last.clone()) {
            continue;
        }
        for next in bundles.get(&last).into_iter().flatten() {
            let mut longer = path.clone();
            longer.push(next.clone());
            stack.push(longer);
        }
    }
    None
}

pub use payd_model::catalog::{RemotePrice, RemoteProduct, Step};

/// An imported product as the shop holds it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalProduct {
    pub product_id: String,
    pub external_id: String,
    pub name: String,
    pub description: Option<String>,
    pub active: bool,
    /// `(price_id, external_id, active)` of its imported prices.
    pub prices: Vec<(String, String, bool)>,
}

/// What importing `remote` into a shop holding `local` does: products are matched by external
/// id; nothing that already matches is touched, so the plan of a catalog just imported is
/// empty.
pub fn plan(local: &[LocalProduct], remote: &[RemoteProduct]) -> Vec<Step> {
    let mut steps = Vec::new();
    for r in remote {
        match local.iter().find(|l| l.external_id == r.external_id) {
            None if r.active => steps.push(Step::Create { product: r.clone() }),
            None => {}
            Some(l) if !r.active && l.active => steps.push(Step::Archive {
                product_id: l.product_id.clone(),
                external_id: r.external_id.clone(),
            }),
            Some(_) if !r.active => {}
            Some(l) => {
                let add_prices: Vec<RemotePrice> = r
                    .prices
                    .iter()
                    .filter(|p| !l.prices.iter().any(|(_, e, _)| e == &p.external_id))
                    .cloned()
                    .collect();
                let archive_prices: Vec<String> = l
                    .prices
                    .iter()
                    .filter(|(_, e, active)| {
                        *active && !r.prices.iter().any(|p| &p.external_id == e)
                    })
                    .map(|(id, _, _)| id.clone())
                    .collect();
                let fields_differ = l.name != r.name || l.description != r.description || !l.active;
                if fields_differ || !add_prices.is_empty() || !archive_prices.is_empty() {
                    steps.push(Step::Update {
                        product_id: l.product_id.clone(),
                        product: r.clone(),
                        add_prices,
                        archive_prices,
                    });
                }
            }
        }
    }
    for l in local {
        if l.active && !remote.iter().any(|r| r.external_id == l.external_id) {
            steps.push(Step::Archive {
                product_id: l.product_id.clone(),
                external_id: l.external_id.clone(),
            });
        }
    }
    steps
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn graph(edges: &[(&str, &[&str])]) -> BTreeMap<String, Vec<String>> {
        edges
            .iter()
            .map(|(k, v)| (k.to_string(), v.iter().map(|s| s.to_string()).collect()))
            .collect()
    }

    fn strings(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn a_bundle_cannot_contain_itself_directly_or_through_another() {
        let none = graph(&[]);
        assert_eq!(
            find_cycle("a", &strings(&["a"]), &none),
            Some(strings(&["a", "a"]))
        );
        let through = graph(&[("b", &["c"]), ("c", &["a"])]);
        assert_eq!(
            find_cycle("a", &strings(&["b"]), &through),
            Some(strings(&["a", "b", "c", "a"]))
        );
        let fine = graph(&[("b", &["c"]), ("c", &["d"])]);
        assert_eq!(find_cycle("a", &strings(&["b", "c"]), &fine), None);
    }

    #[test]
    fn recurrences_are_bounded_by_a_year() {
        assert!(check_recurring("recurring", "month", 12).is_ok());
        assert!(check_recurring("recurring", "month", 13).is_err());
        assert!(check_recurring("recurring", "year", 2).is_err());
        let err = check_recurring("prices[0].recurring", "fortnight", 1).unwrap_err();
        assert!(
            matches!(err, Refusal::Invalid { param, .. } if param == "prices[0].recurring.interval")
        );
    }

    #[test]
    fn addon_bounds() {
        let one = strings(&["prod_x"]);
        assert!(check_addon_group("Sauces", 0, 1, &one, &[]).is_ok());
        assert!(check_addon_group("Sauces", 2, 1, &one, &[]).is_err());
        assert!(check_addon_group("Sauces", 0, 2, &one, &[]).is_err());
        assert!(check_addon_group("Sauces", 0, 1, &[], &[]).is_err());
        assert!(check_addon_group(" ", 0, 1, &one, &[]).is_err());
    }

    fn remote(id: &str, name: &str, prices: &[&str], active: bool) -> RemoteProduct {
        RemoteProduct {
            external_id: id.into(),
            name: name.into(),
            description: None,
            active,
            prices: prices
                .iter()
                .map(|p| RemotePrice {
                    external_id: p.to_string(),
                    unit_amount: 100,
                    currency: "EUR".into(),
                    recurring: None,
                })
                .collect(),
        }
    }

    fn local(id: &str, ext: &str, name: &str, prices: &[(&str, &str, bool)]) -> LocalProduct {
        LocalProduct {
            product_id: id.into(),
            external_id: ext.into(),
            name: name.into(),
            description: None,
            active: true,
            prices: prices
                .iter()
                .map(|(a, b, c)| (a.to_string(), b.to_string(), *c))
                .collect(),
        }
    }

    #[test]
    fn an_import_creates_updates_and_archives_by_external_id() {
        let remote = vec![
            remote("e1", "Coffee", &["p1"], true),
            remote("e2", "Mug", &["p2", "p3"], true),
            remote("e3", "Teapot", &["p4"], false),
            remote("e5", "Gone", &["p6"], false),
        ];
        let local = vec![
            local(
                "prod_2",
                "e2",
                "Old mug",
                &[("price_2", "p2", true), ("price_x", "px", true)],
            ),
            local("prod_3", "e3", "Teapot", &[("price_4", "p4", true)]),
            local("prod_4", "e4", "Lamp", &[]),
        ];
        let steps = plan(&local, &remote);
        assert!(matches!(&steps[0], Step::Create { product } if product.external_id == "e1"));
        assert!(
            matches!(&steps[1], Step::Update { product_id, add_prices, archive_prices, .. }
            if product_id == "prod_2" && add_prices.len() == 1 && archive_prices == &["price_x".to_owned()])
        );
        assert!(matches!(&steps[2], Step::Archive { product_id, .. } if product_id == "prod_3"));
        assert!(matches!(&steps[3], Step::Archive { product_id, .. } if product_id == "prod_4"));
        assert_eq!(steps.len(), 4, "{steps:?}");
    }

    #[test]
    fn a_catalog_just_imported_plans_nothing() {
        let remote = vec![remote("e1", "Coffee", &["p1"], true)];
        let local = vec![local("prod_1", "e1", "Coffee", &[("price_1", "p1", true)])];
        assert!(plan(&local, &remote).is_empty());
    }

    proptest! {
        /// Whatever the graph, a reported cycle starts and ends at the root and follows edges;
        /// and one is reported whenever the root is reachable from its components.
        #[test]
        fn cycles_are_real_and_found(
            edges in prop::collection::btree_map(0u8..8, prop::collection::vec(0u8..8, 0..3), 0..8),
            comps in prop::collection::vec(0u8..8, 1..3),
        ) {
            let name = |n: u8| format!("p{n}");
            let g: BTreeMap<String, Vec<String>> = edges
                .iter()
                .filter(|(k, _)| **k != 0)
                .map(|(k, v)| (name(*k), v.iter().map(|n| name(*n)).collect()))
                .collect();
            let comps: Vec<String> = comps.iter().map(|n| name(*n)).collect();
            let found = find_cycle("p0", &comps, &g);
            // Reachability by a plain search.
            let mut seen = BTreeSet::new();
            let mut todo = comps.clone();
            let mut reachable = false;
            while let Some(n) = todo.pop() {
                if n == "p0" { reachable = true; break; }
                if seen.insert(n.clone()) {
                    todo.extend(g.get(&n).cloned().unwrap_or_default());
                }
            }
            prop_assert_eq!(found.is_some(), reachable);
            if let Some(path) = found {
                prop_assert_eq!(path.first().map(String::as_str), Some("p0"));
                prop_assert_eq!(path.last().map(String::as_str), Some("p0"));
                prop_assert!(comps.contains(&path[1]));
                for w in path[1..].windows(2) {
                    prop_assert!(g.get(&w[0]).is_some_and(|n| n.contains(&w[1])));
                }
            }
        }
    }
}

//! The architecture test: reads the imports of `src/` as text and holds them to the layers
//! that ARCHITECTURE.md states ("Layers"). It fails, naming the file and line, when
//!
//! - a module has no layer (neither its name nor its file's name places it);
//! - a module imports one of a higher layer;
//! - two resource folders import each other;
//! - modules import each other in a circle, or top-level modules (a folder counting as one)
//!   do;
//! - a pure module reaches actix, actix-web, awc, SeaORM or the entities, directly or through
//!   the modules it imports;
//! - the `actors/` crate depends on anything of payd's or SeaORM, or the `model/` crate on
//!   anything of payd's.
//!
//! An import is a `use crate::…` / `use super::…` / `use child::…` tree or a `crate::…` path
//! in the code (also inside attributes), resolved to the deepest module file it names; a name
//! brought in by a `use` of a module (`use crate::customers;` then `customers::store::find`)
//! is followed.

use std::{
    collections::{BTreeMap, BTreeSet, HashMap},
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
};

/// The layers, bottom first. A module may import its own layer and those below it.
const LAYERS: [&str; 8] = [
    "primitives", // the clock, ids, settings: what every layer uses
    "domain",     // pure: state machines and decisions; no framework, no database
    "types",      // shapes at the edge: errors, shared fields and money, request/response types
    "store",      // the database and the processors: stores, the commit path, outbox, jobs
    "runtime",    // actors and webhook delivery
    "edge",       // what every handler needs: AppState, extractors, auth, middleware
    "routes",     // handlers
    "app",        // wiring
];

/// Modules whose layer is not told by their file name.
const NAMED: &[(&str, &str)] = &[
    ("alloc", "primitives"),
    ("clock", "primitives"),
    ("ids", "primitives"),
    ("settings", "primitives"),
    ("settings::validate", "primitives"),
    ("settings::tests", "primitives"),
    ("docs_table", "primitives"),
    ("examples", "primitives"),
    ("telemetry", "primitives"),
    ("wake", "primitives"),
    ("money", "domain"),
    ("conflict", "domain"),
    ("payments::refunds", "domain"),
    ("payments::intent", "domain"),
    ("payments::routing", "domain"),
    ("processors::model", "domain"),
    ("processors::card", "types"),
    ("webhooks::policy", "domain"),
    ("webhooks::signer", "domain"),
    ("mount", "edge"),
    ("error", "types"),
    ("error::codes", "types"),
    ("event_types", "domain"),
    ("fields", "types"),
    ("pagination", "types"),
    ("stored", "types"),
    ("auth::keys", "types"),
    ("db", "store"),
    ("schema", "store"),
    ("lookups", "store"),
    ("owned", "store"),
    ("accounts::demo", "store"),
    ("failover", "store"),
    ("scheduler", "store"),
    ("commit", "store"),
    ("commit::change", "store"),
    ("commit::direct", "store"),
    ("commit::group", "store"),
    ("commit::later", "store"),
    ("outbox", "store"),
    ("webhooks::health", "store"),
    ("webhooks::retention", "store"),
    ("processors", "store"),
    ("outbound", "store"),
    ("sealed", "store"),
    ("recovery", "store"),
    ("processors::sandbox", "store"),
    ("processors::remote", "store"),
    ("processors::sim", "store"),
    ("processors::stripe", "store"),
    ("processors::stripe::client", "store"),
    ("processors::stripe::signature", "store"),
    ("processors::stripe::units", "domain"),
    ("processors::stripe::recovery", "store"),
    ("processors::stripe::answers", "store"),
    ("processors::connect", "store"),
    ("wallet::processor", "store"),
    ("sales::tally", "domain"),
    ("payments::processor_accounts", "store"),
    ("payments::create", "runtime"),
    ("payments::charge", "runtime"),
    ("payments::methods", "types"),
    ("subscriptions::estimate", "runtime"),
    ("wallet::follow", "runtime"),
    ("products::catalog", "runtime"),
    ("subscriptions::create", "runtime"),
    ("subscriptions::cycles", "runtime"),
    ("subscriptions::adopt", "runtime"),
    ("subscriptions::billing", "store"),
    ("subscriptions::plans", "domain"),
    ("invoices::tax", "domain"),
    ("invoices::pdf", "domain"),
    ("invoices::pdf::fonts", "domain"),
    ("invoices::pdf::layout", "domain"),
    ("invoices::settings", "store"),
    ("invoices::create", "runtime"),
    ("payouts::processor", "domain"),
    ("risk::assess", "runtime"),
    ("row_actor", "runtime"),
    ("products::import", "runtime"),
    ("test_clock::advance", "runtime"),
    ("webhooks::attempt", "runtime"),
    ("webhooks::delivery", "runtime"),
    ("webhooks::record", "runtime"),
    ("webhooks::dispatcher", "runtime"),
    ("state", "edge"),
    ("http", "edge"),
    ("auth", "edge"),
    ("ratelimit", "edge"),
    ("idempotency", "edge"),
    ("ops", "routes"),
    ("accounts::admin", "routes"),
    ("payments::checkout", "routes"),
    ("pages", "routes"),
    ("pages::embed", "routes"),
    ("pages::text", "types"),
    ("payments::stripe_events", "routes"),
    ("payments::commands", "runtime"),
    ("payments::actor", "runtime"),
    ("payments::actor::authorize", "runtime"),
    ("payments::actor::capture", "runtime"),
    ("payments::actor::refunding", "runtime"),
    ("payments::actor::sync", "runtime"),
    ("payments::rows", "runtime"),
    ("app", "app"),
    ("listen", "app"),
    ("openapi", "app"),
    ("", "app"),
];

/// Folders that hold a resource: two of them never import each other.
const RESOURCES: &[&str] = &[
    "accounts",
    "customers",
    "disputes",
    "events",
    "files",
    "invoices",
    "ledger",
    "payments",
    "payouts",
    "processors",
    "products",
    "refunds",
    "sales",
    "subscriptions",
    "wallet",
    "webhooks",
];

/// Pure modules besides every `machine.rs`.
const PURE: &[&str] = &[
    "invoices::pdf",
    "invoices::pdf::fonts",
    "invoices::pdf::layout",
    "payouts::processor",
    "invoices::tax",
    "money",
    "conflict",
    "payments::refunds",
    "payments::routing",
    "payments::intent",
    "sales::tally",
    "subscriptions::plans",
    "webhooks::policy",
];

/// What a pure module must not reach.
const IMPURE_CRATES: &[&str] = &[
    "actix",
    "actix_web",
    "actix_rt",
    "awc",
    "sea_orm",
    "payd_entity",
];

struct Module {
    file: PathBuf,
    /// Source with comments and string literals blanked out (lines kept).
    code: String,
}

#[derive(Clone, Debug)]
struct Edge {
    to: String,
    line: usize,
    path: String,
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `src/payments/actor.rs` → `payments::actor`; `src/payments/mod.rs` → `payments`.
fn module_name(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    if rel.starts_with("bin") || rel == Path::new("main.rs") {
        return None; // binaries use `payd::`, not `crate::`
    }
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned())
        .collect();
    if matches!(parts.last().map(String::as_str), Some("mod" | "lib")) {
        parts.pop();
    }
    Some(parts.join("::"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = entries.flatten().map(|e| e.path()).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// Blanks comments, string and char literals, keeping line breaks, so that paths in prose are
/// not read as imports. Raw strings are blanked too.
fn strip(src: &str) -> String {
    let b: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let blank = |c: char, out: &mut String| out.push(if c == '\n' { '\n' } else { ' ' });
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(b[i], &mut out);
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && !ident_char(b.get(i.wrapping_sub(1)).copied())
        {
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            for _ in i..=j {
                out.push(' ');
            }
            i = j + 1;
            while i < b.len() {
                if b[i] == '"' && (0..hashes).all(|k| b.get(i + 1 + k) == Some(&'#')) {
                    for _ in 0..=hashes {
                        out.push(' ');
                    }
                    i += 1 + hashes;
                    break;
                }
                blank(b[i], &mut out);
                i += 1;
            }
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    blank(b[i], &mut out);
                    i += 1;
                }
                if i < b.len() {
                    blank(b[i], &mut out);
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' && is_char_literal(&b, i) {
            out.push(' ');
            i += 1;
            while i < b.len() && b[i] != '\'' {
                if b[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                out.push(' ');
                i += 1;
            }
            out.push(' ');
            i += 1;
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_char(c: Option<char>) -> bool {
    c.is_some_and(|c| c.is_alphanumeric() || c == '_')
}

/// `'a'`, `'\n'` are literals; `'a` (a lifetime) is not.
fn is_char_literal(b: &[char], i: usize) -> bool {
    matches!(
        (b.get(i + 1), b.get(i + 2)),
        (Some('\\'), _) | (Some(_), Some('\''))
    )
}

/// The paths of a `use` tree: `a::{b, c::{d, e as f}}` → `a::b`, `a::c::d`, `a::c::e` (with
/// the name each is known by).
fn expand_tree(tree: &str, prefix: &str, out: &mut Vec<(String, String)>) {
    let tree = tree.trim();
    if tree.is_empty() {
        return;
    }
    if let Some(open) = tree.find('{') {
        let head = tree[..open].trim().trim_end_matches("::");
        let inner = &tree[open + 1..tree.rfind('}').unwrap_or(tree.len())];
        let base = join(prefix, head);
        for part in split_top(inner) {
            expand_tree(&part, &base, out);
        }
        return;
    }
    let (path, alias) = match tree.split_once(" as ") {
        Some((p, a)) => (p.trim(), Some(a.trim())),
        None => (tree, None),
    };
    let full = join(prefix, path);
    let last = full.rsplit("::").next().unwrap_or_default().to_owned();
    let name = match alias {
        Some(a) => a.to_owned(),
        None if last == "self" => full
            .trim_end_matches("::self")
            .rsplit("::")
            .next()
            .unwrap_or_default()
            .to_owned(),
        None => last,
    };
    out.push((full.trim_end_matches("::self").to_owned(), name));
}

fn join(a: &str, b: &str) -> String {
    match (a.is_empty(), b.is_empty()) {
        (true, _) => b.to_owned(),
        (_, true) => a.to_owned(),
        _ => format!("{a}::{b}"),
    }
}

/// Splits on commas that are not inside braces.
fn split_top(s: &str) -> Vec<String> {
    let (mut parts, mut depth, mut cur) = (Vec::new(), 0, String::new());
    for c in s.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    parts.push(cur);
    parts
}

/// `crate::x`, `self::x` or `super::x` written in module `module`, as a path from the crate
/// root (`super` of `payments::actor` and of `payments` alike is one step up).
fn absolute(path: &str, module: &str) -> Option<String> {
    if let Some(r) = path.strip_prefix("crate::") {
        return Some(r.to_owned());
    }
    if !(path.starts_with("self::") || path.starts_with("super::")) {
        return None;
    }
    let mut base: Vec<&str> = module.split("::").filter(|s| !s.is_empty()).collect();
    let mut rest = path.strip_prefix("self::").unwrap_or(path);
    while let Some(r) = rest.strip_prefix("super::") {
        base.pop()?;
        rest = r;
    }
    Some(join(&base.join("::"), rest))
}

/// The deepest module that `path` names (or lies in).
fn resolve(path: &str, modules: &BTreeMap<String, Module>) -> Option<String> {
    let parts: Vec<&str> = path.split("::").collect();
    (1..=parts.len())
        .rev()
        .map(|n| parts[..n].join("::"))
        .find(|m| modules.contains_key(m))
}

fn edges_of(name: &str, m: &Module, modules: &BTreeMap<String, Module>) -> Vec<Edge> {
    let code = &m.code;
    let line_of = |pos: usize| code[..pos].matches('\n').count() + 1;
    let mut found: Vec<(usize, String)> = Vec::new();
    // `use` trees, which may span lines.
    let mut aliases: HashMap<String, String> = HashMap::new();
    let mut at = 0;
    while let Some(i) = code[at..].find("use ") {
        let start = at + i;
        at = start + 4;
        if ident_char(code[..start].chars().last()) {
            continue;
        }
        let Some(end) = code[start..].find(';') else {
            break;
        };
        let tree: String = code[start + 4..start + end]
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        let tree = tree.replace(":: ", "::").replace(" ::", "::");
        // A path from a child module (`use change::Change;` beside `mod change;`) is `self::`.
        let head = tree.split("::").next().unwrap_or_default();
        let tree = if modules.contains_key(&join(name, head)) {
            format!("self::{tree}")
        } else {
            tree
        };
        if !(tree.starts_with("crate::")
            || tree.starts_with("super::")
            || tree.starts_with("self::"))
        {
            continue;
        }
        let mut paths = Vec::new();
        expand_tree(&tree, "", &mut paths);
        for (path, alias) in paths {
            if let Some(abs) = absolute(&path, name) {
                // `use crate::customers;` only names a folder; what is used through it counts.
                let folder = modules
                    .get(&abs)
                    .is_some_and(|m| m.file.ends_with("mod.rs"));
                if modules.contains_key(&abs) {
                    aliases.insert(alias, abs.clone());
                }
                if !folder {
                    found.push((line_of(start), abs));
                }
            }
        }
    }
    // Paths in the code: `crate::a::b`, `super::a`, and `alias::b` for an imported module.
    let bytes: Vec<char> = code.chars().collect();
    let mut byte_pos = Vec::with_capacity(bytes.len() + 1);
    let mut p = 0;
    for c in &bytes {
        byte_pos.push(p);
        p += c.len_utf8();
    }
    byte_pos.push(p);
    let mut i = 0;
    while i < bytes.len() {
        if !(bytes[i].is_alphabetic() || bytes[i] == '_')
            || (i > 0 && (ident_char(Some(bytes[i - 1])) || bytes[i - 1] == ':'))
        {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < bytes.len()
            && (ident_char(Some(bytes[j])) || (bytes[j] == ':' && bytes.get(j + 1) == Some(&':')))
        {
            j += if bytes[j] == ':' { 2 } else { 1 };
        }
        let path: String = bytes[i..j].iter().collect();
        let path = path.trim_end_matches("::").to_owned();
        let head = path.split("::").next().unwrap_or_default();
        let abs = if head == "crate" || head == "super" || head == "self" {
            absolute(&path, name)
        } else if path.contains("::") && modules.contains_key(&join(name, head)) {
            Some(join(name, &path))
        } else if path.contains("::") {
            aliases
                .get(head)
                .map(|m| join(m, path.split_once("::").map(|x| x.1).unwrap_or_default()))
        } else {
            None
        };
        if let Some(abs) = abs {
            found.push((line_of(byte_pos[i]), abs));
        }
        i = j.max(i + 1);
    }
    let mut edges: Vec<Edge> = found
        .into_iter()
        .filter_map(|(line, path)| {
            let to = resolve(&path, modules)?;
            (to != name && !name.starts_with(&format!("{to}::")) && !to.is_empty())
                .then_some(Edge { to, line, path })
        })
        .collect();
    // The first line that reaches each module.
    edges.sort_by(|a, b| (&a.to, a.line).cmp(&(&b.to, b.line)));
    edges.dedup_by(|a, b| a.to == b.to);
    edges.sort_by_key(|e| e.line);
    edges
}

/// The layer a module is placed in: by its name in [`NAMED`], else by its file's name; none
/// for a module neither tells.
fn placed(name: &str, file: &Path) -> Option<&'static str> {
    let named = NAMED.iter().find(|(m, _)| *m == name).map(|(_, l)| *l);
    let by_file = || match file.file_name().and_then(|f| f.to_str()) {
        Some("machine.rs") => Some("domain"),
        Some("api.rs") => Some("types"),
        Some("store.rs") => Some("store"),
        Some("actor.rs" | "jobs.rs") => Some("runtime"),
        Some("mod.rs") => Some("routes"),
        Some(f) if f.ends_with("routes.rs") => Some("routes"),
        _ => None,
    };
    named.or_else(by_file)
}

/// The layer's rank; an unplaced module (reported apart) counts as the top.
fn layer_of(name: &str, file: &Path) -> usize {
    placed(name, file)
        .and_then(|layer| LAYERS.iter().position(|l| *l == layer))
        .unwrap_or(LAYERS.len() - 1)
}

fn folder(name: &str) -> &str {
    name.split("::").next().unwrap_or_default()
}

fn is_pure(name: &str) -> bool {
    name.ends_with("::machine") || PURE.contains(&name)
}

fn load() -> BTreeMap<String, Module> {
    let src = root().join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files
        .into_iter()
        .filter_map(|file| {
            let name = module_name(&src, &file)?;
            let code = strip(&fs::read_to_string(&file).ok()?);
            Some((name, Module { file, code }))
        })
        .collect()
}

fn rel(p: &Path) -> String {
    p.strip_prefix(root()).unwrap_or(p).display().to_string()
}

/// Every finding, one line each.
fn check(modules: &BTreeMap<String, Module>) -> Vec<String> {
    let graph: BTreeMap<&str, Vec<Edge>> = modules
        .iter()
        .map(|(n, m)| (n.as_str(), edges_of(n, m, modules)))
        .collect();
    let mut problems = Vec::new();
    // 0. Every module has a layer: one the checker cannot place could import anything.
    for (name, m) in modules {
        if placed(name, &m.file).is_none() {
            problems.push(format!(
                "{}: `{name}` has no layer: name it in the architecture test's NAMED table",
                rel(&m.file)
            ));
        }
    }
    // 1. No import of a higher layer.
    for (name, edges) in &graph {
        let m = &modules[*name];
        let from = layer_of(name, &m.file);
        for e in edges {
            let to = layer_of(&e.to, &modules[&e.to].file);
            if to > from {
                problems.push(format!(
                    "{}:{}: `{name}` ({}) imports `crate::{}` ({}), a higher layer",
                    rel(&m.file),
                    e.line,
                    LAYERS[from],
                    e.path,
                    LAYERS[to]
                ));
            }
        }
    }
    // 2. No two resource folders import each other.
    let mut between: BTreeMap<(&str, &str), (String, usize)> = BTreeMap::new();
    for (name, edges) in &graph {
        for e in edges {
            let (a, b) = (folder(name), folder(&e.to));
            if a != b && RESOURCES.contains(&a) && RESOURCES.contains(&b) {
                between
                    .entry((a, b))
                    .or_insert_with(|| (rel(&modules[*name].file), e.line));
            }
        }
    }
    for ((a, b), (file, line)) in &between {
        if a < b {
            if let Some((back, back_line)) = between.get(&(*b, *a)) {
                problems.push(format!(
                    "{file}:{line}: `{a}` imports `{b}`, and {back}:{back_line}: `{b}` imports `{a}`: one side must own what both use"
                ));
            }
        }
    }
    // 3. Pure modules reach no framework, database or store, even through other modules.
    for name in graph.keys().filter(|n| is_pure(n)) {
        let mut seen = BTreeSet::new();
        let mut stack = vec![(name.to_string(), vec![name.to_string()])];
        while let Some((cur, chain)) = stack.pop() {
            if !seen.insert(cur.clone()) {
                continue;
            }
            let m = &modules[&cur];
            let layer = layer_of(&cur, &m.file);
            if layer > layer_of(name, &modules[*name].file) && cur != *name {
                // Reported by rule 1 already when direct; name the chain when not.
                if chain.len() > 2 {
                    problems.push(format!(
                        "{}: pure `{name}` reaches `{cur}` ({}) through {}",
                        rel(&modules[*name].file),
                        LAYERS[layer],
                        chain.join(" → ")
                    ));
                }
                continue;
            }
            for (i, line) in m.code.lines().enumerate() {
                for krate in IMPURE_CRATES {
                    let used = line.match_indices(&format!("{krate}::")).any(|(at, _)| {
                        !ident_char(line[..at].chars().last()) && !line[..at].ends_with("::")
                    });
                    if used {
                        let via = if chain.len() > 1 {
                            format!(" (reached through {})", chain.join(" → "))
                        } else {
                            String::new()
                        };
                        problems.push(format!(
                            "{}:{}: pure `{name}` uses `{krate}`{via}",
                            rel(&m.file),
                            i + 1
                        ));
                    }
                }
            }
            for e in &graph[cur.as_str()] {
                let mut next = chain.clone();
                next.push(e.to.clone());
                stack.push((e.to.clone(), next));
            }
        }
    }
    // 4. No import cycles at all, inside a folder too.
    for cycle in cycles(&graph) {
        let first = &graph[cycle[0].as_str()]
            .iter()
            .find(|e| e.to == cycle[1 % cycle.len()])
            .map(|e| e.line)
            .unwrap_or_default();
        problems.push(format!(
            "{}:{first}: import cycle {} → {}",
            rel(&modules[&cycle[0]].file),
            cycle.join(" → "),
            cycle[0]
        ));
    }
    // 4b. No cycle between top-level modules either (a folder and what is in it count as
    //     one): files may be acyclic while their folders import each other in a knot.
    let mut folders: BTreeMap<&str, Vec<Edge>> = BTreeMap::new();
    for (name, edges) in &graph {
        let from = folders.entry(folder(name)).or_default();
        for e in edges.iter().filter(|e| folder(&e.to) != folder(name)) {
            from.push(Edge {
                to: folder(&e.to).to_owned(),
                line: e.line,
                path: format!(
                    "{}:{}: {name} → {}",
                    rel(&modules[*name].file),
                    e.line,
                    e.path
                ),
            });
        }
    }
    for knot in knots(&folders) {
        let ties: Vec<&str> = knot
            .iter()
            .flat_map(|f| &folders[f.as_str()])
            .filter(|e| knot.contains(&e.to))
            .map(|e| e.path.as_str())
            .collect();
        problems.push(format!(
            "folders that import each other in a circle: {} (cut one of: {})",
            knot.iter().cloned().collect::<Vec<_>>().join(", "),
            ties.join("; ")
        ));
    }
    // 5. The system clock is read in clock.rs only: domain code asks its `Clock` (so tests and
    //    sandbox time travel move it), and what other systems read uses `clock::wall_now`.
    // 6. Every outgoing HTTP client is built in outbound.rs, where its connector holds the
    //    guard on the addresses merchants' URLs may reach.
    for (name, m) in modules {
        for (i, line) in m.code.lines().enumerate() {
            if name != "clock" && line.contains("Utc::now(") {
                problems.push(format!(
                    "{}:{}: `{name}` reads the system clock; ask the app's `Clock`, or \
                     `clock::wall_now` for a time other systems read",
                    rel(&m.file),
                    i + 1
                ));
            }
            let builds_client = [
                "Client::builder(",
                "Client::new(",
                "Client::default(",
                "Connector::new(",
            ]
            .iter()
            .any(|c| line.contains(c));
            if name != "outbound" && builds_client {
                problems.push(format!(
                    "{}:{}: `{name}` builds an HTTP client; build it with `outbound::client`, \
                     whose connector guards the addresses it reaches",
                    rel(&m.file),
                    i + 1
                ));
            }
        }
    }
    problems
}

/// The import cycles, each once: every strongly connected set of more than one module, as a
/// path through it.
fn cycles(graph: &BTreeMap<&str, Vec<Edge>>) -> Vec<Vec<String>> {
    let reaches = |from: &str, to: &str| {
        let (mut seen, mut stack) = (BTreeSet::new(), vec![from.to_owned()]);
        while let Some(cur) = stack.pop() {
            for e in graph.get(cur.as_str()).into_iter().flatten() {
                if e.to == to {
                    return true;
                }
                if seen.insert(e.to.clone()) {
                    stack.push(e.to.clone());
                }
            }
        }
        false
    };
    let mut done = BTreeSet::new();
    let mut out = Vec::new();
    for start in graph.keys() {
        if done.contains(*start) || !reaches(start, start) {
            continue;
        }
        // Walk from `start` along edges that lead back to it, until it closes.
        let mut path = vec![start.to_string()];
        let mut cur = start.to_string();
        for _ in 0..graph.len() {
            let Some(next) = graph[cur.as_str()]
                .iter()
                .find(|e| e.to == *start || (!path.contains(&e.to) && reaches(&e.to, start)))
            else {
                break;
            };
            if next.to == *start {
                break;
            }
            path.push(next.to.clone());
            cur = next.to.clone();
        }
        for m in graph
            .keys()
            .filter(|m| reaches(start, m) && reaches(m, start))
        {
            done.insert(m.to_string());
        }
        out.push(path);
    }
    out
}

/// The sets of more than one module that all reach each other (strongly connected).
fn knots(graph: &BTreeMap<&str, Vec<Edge>>) -> Vec<BTreeSet<String>> {
    let reach = |from: &str| {
        let (mut seen, mut stack) = (BTreeSet::new(), vec![from.to_owned()]);
        while let Some(cur) = stack.pop() {
            for e in graph.get(cur.as_str()).into_iter().flatten() {
                if seen.insert(e.to.clone()) {
                    stack.push(e.to.clone());
                }
            }
        }
        seen
    };
    let reached: BTreeMap<&str, BTreeSet<String>> = graph.keys().map(|m| (*m, reach(m))).collect();
    let mut out: Vec<BTreeSet<String>> = Vec::new();
    for m in graph.keys() {
        let knot: BTreeSet<String> = reached[m]
            .iter()
            .filter(|o| reached.get(o.as_str()).is_some_and(|r| r.contains(*m)))
            .cloned()
            .collect();
        if knot.len() > 1 && !out.contains(&knot) {
            out.push(knot);
        }
    }
    out
}

/// `actors/` is the generic runtime: it depends on nothing of payd's.
/// A crate below payd: its folder, its package, the dependencies it may not have (by prefix)
/// and the paths its code may not use.
struct Lower {
    folder: &'static str,
    package: &'static str,
    deps: &'static [&'static str],
    paths: &'static [&'static str],
}

const PAYD_PATHS: [&str; 5] = [
    "payd::",
    "payd_entity::",
    "payd_migration::",
    "payd_actors::",
    "payd_model::",
];

/// `actors/`, the actor runtime, knows nothing of payd's and no SeaORM; `model/`, the stored
/// values, knows SeaORM but nothing of payd's.
const LOWER: [Lower; 2] = [
    Lower {
        folder: "actors",
        package: "payd-actors",
        deps: &["payd", "sea-orm"],
        paths: &[
            "payd::",
            "payd_entity::",
            "payd_migration::",
            "payd_model::",
            "sea_orm::",
        ],
    },
    Lower {
        folder: "model",
        package: "payd-model",
        deps: &["payd"],
        paths: &PAYD_PATHS,
    },
];

fn check_lower_crates() -> Vec<String> {
    let mut problems = Vec::new();
    for lower in &LOWER {
        let dir = root().join(lower.folder);
        let manifest = fs::read_to_string(dir.join("Cargo.toml")).unwrap_or_default();
        for (i, line) in manifest.lines().enumerate() {
            let dep = line.split(['=', '.']).next().unwrap_or_default().trim();
            if dep != lower.package && lower.deps.iter().any(|d| dep.starts_with(d)) {
                problems.push(format!(
                    "{}/Cargo.toml:{}: {} depends on `{dep}`",
                    lower.folder,
                    i + 1,
                    lower.package
                ));
            }
        }
        let mut files = Vec::new();
        rust_files(&dir.join("src"), &mut files);
        for file in files {
            let code = strip(&fs::read_to_string(&file).unwrap_or_default());
            for (i, line) in code.lines().enumerate() {
                for path in lower.paths {
                    if line
                        .match_indices(path)
                        .any(|(at, _)| !ident_char(line[..at].chars().last()))
                    {
                        problems.push(format!(
                            "{}:{}: {} uses `{path}`",
                            rel(&file),
                            i + 1,
                            lower.package
                        ));
                    }
                }
            }
        }
    }
    problems
}

fn report(problems: &[String]) -> String {
    let mut out = format!(
        "{} architecture problem(s); the layers are in ARCHITECTURE.md:\n",
        problems.len()
    );
    for p in problems {
        let _ = writeln!(out, "  {p}");
    }
    out
}

#[test]
fn modules_import_only_their_layer_and_below_and_resources_do_not_import_each_other() {
    let modules = load();
    assert!(
        modules.len() > 20,
        "read only {} modules of src/",
        modules.len()
    );
    let mut problems = check(&modules);
    problems.extend(check_lower_crates());
    assert!(problems.is_empty(), "{}", report(&problems));
}

/// The checker itself: a back-import, a cycle between resources (through a folder's name) and
/// a pure module reaching SeaORM through another module are each found; prose is not code.
#[test]
fn the_checker_finds_what_it_is_for() {
    let module = |file: &str, code: &str| Module {
        file: PathBuf::from(file),
        code: strip(code),
    };
    let modules: BTreeMap<String, Module> = [
        (
            "clock",
            "src/clock.rs",
            "use crate::payments::routes::x; // crate::app::y\nfn now() { sea_orm::x(); }",
        ),
        ("payments", "src/payments/mod.rs", ""),
        (
            "payments::routes",
            "src/payments/routes.rs",
            "use crate::{clock, customers};\nfn h() { customers::store::find(); }",
        ),
        (
            "payments::machine",
            "src/payments/machine.rs",
            "use super::refunds::Plan;\nfn f() { let s = \"sea_orm::x\"; }",
        ),
        (
            "payments::refunds",
            "src/payments/refunds.rs",
            "use crate::clock::now;",
        ),
        (
            "payments::api",
            "src/payments/api.rs",
            "fn render() { crate::customers::store::x(); }\nfn at() { Utc::now() }\nfn c() { awc::Client::new() }",
        ),
        ("customers", "src/customers/mod.rs", ""),
        (
            "customers::store",
            "src/customers/store.rs",
            "use crate::payments::api::Line;",
        ),
        ("app", "src/app.rs", ""),
        ("db", "src/db/mod.rs", "mod pool;\npub use pool::Pool;"),
        ("db::pool", "src/db/pool.rs", ""),
    ]
    .into_iter()
    .map(|(name, file, code)| (name.to_owned(), module(file, code)))
    .collect();
    let problems = check(&modules).join("\n");
    assert!(problems.contains("src/clock.rs:1: `clock` (primitives) imports `crate::payments::routes::x` (routes), a higher layer"), "{problems}");
    assert!(
        !problems.contains("crate::app::y"),
        "a comment is not an import:\n{problems}"
    );
    assert!(problems.contains("src/customers/store.rs:1: `customers` imports `payments`, and src/payments/api.rs:1: `payments` imports `customers`"), "{problems}");
    assert!(problems.contains("src/clock.rs:2: pure `payments::machine` uses `sea_orm` (reached through payments::machine → payments::refunds → clock)"), "{problems}");
    assert!(
        !problems.contains("src/payments/machine.rs:2"),
        "a string is not code:\n{problems}"
    );
    assert!(
        problems.contains("import cycle customers::store → payments::api"),
        "{problems}"
    );
    assert!(
        problems.contains("src/payments/api.rs:2: `payments::api` reads the system clock"),
        "{problems}"
    );
    assert!(
        problems.contains("src/payments/api.rs:3: `payments::api` builds an HTTP client"),
        "{problems}"
    );
    // A child module named from its parent without `self::` is an import too, and a module
    // the table does not place is reported (and counted as the top layer).
    assert!(
        problems.contains("src/db/pool.rs: `db::pool` has no layer"),
        "{problems}"
    );
    assert!(
        problems.contains(
            "src/db/mod.rs:2: `db` (store) imports `crate::db::pool::Pool` (app), a higher layer"
        ),
        "{problems}"
    );
    // The clock's file imports no file that imports it back, yet its folder and the payments
    // folder (tied to customers) import each other.
    assert!(
        problems.contains("folders that import each other in a circle: clock, customers, payments"),
        "{problems}"
    );
}

/// The most lines a function, an HTTP handler and a file of `src/` may have (a function from
/// its `fn` line to its closing brace); beyond these, split it (ARCHITECTURE.md, "Size").
const MAX_FN_LINES: usize = 100;
const MAX_HANDLER_LINES: usize = 40;
const MAX_FILE_LINES: usize = 1000;

/// A function of a file: its name, the line of its `fn` (1-based), its length in lines, and
/// whether it is an HTTP handler (`#[utoipa::path]` on it).
struct Function {
    name: String,
    line: usize,
    lines: usize,
    handler: bool,
}

/// Every function with a body in `code` (comments and strings already blanked).
fn functions(code: &str) -> Vec<Function> {
    let bytes = code.as_bytes();
    let lines: Vec<&str> = code.lines().collect();
    let mut line_start = 0;
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let here = line_start;
        line_start += line.len() + 1;
        let Some(at) = fn_keyword(line) else {
            continue;
        };
        let name: String = line[at + 3..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        // The body: the first `{` outside the signature's brackets, unless a `;` ends a
        // declaration first.
        let mut depth = 0i32;
        let mut open = None;
        for k in here + at..bytes.len() {
            match bytes[k] {
                b'(' | b'[' | b'<' => depth += 1,
                b')' | b']' => depth -= 1,
                b'>' if !matches!(bytes[k - 1], b'-' | b'=') => depth -= 1,
                b';' if depth <= 0 => break,
                b'{' if depth <= 0 => {
                    open = Some(k);
                    break;
                }
                _ => {}
            }
        }
        let (Some(open), false) = (open, name.is_empty()) else {
            continue;
        };
        let mut braces = 0;
        let end = (open..bytes.len())
            .find(|&k| {
                match bytes[k] {
                    b'{' => braces += 1,
                    b'}' => braces -= 1,
                    _ => {}
                }
                braces == 0
            })
            .unwrap_or(bytes.len());
        let last = bytes[..end].iter().filter(|b| **b == b'\n').count();
        // Its attributes: the lines above it, back to the end of the item before.
        let handler = lines[..i]
            .iter()
            .rev()
            .take_while(|l| !matches!(l.trim_end().chars().last(), Some('}' | ';')))
            .any(|l| l.contains("utoipa::path"));
        out.push(Function {
            name,
            line: i + 1,
            lines: last - i + 1,
            handler,
        });
    }
    out
}

/// Where the keyword `fn` starts an item on this line (not `Fn(`, not inside a word).
fn fn_keyword(line: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(found) = line[from..].find("fn ") {
        let at = from + found;
        let before = line[..at].chars().next_back();
        if !ident_char(before) {
            return Some(at);
        }
        from = at + 3;
    }
    None
}

/// What is longer than its bound, one line each.
fn oversized(modules: &BTreeMap<String, Module>) -> Vec<String> {
    let mut problems = Vec::new();
    for m in modules.values() {
        let file = rel(&m.file);
        let total = m.code.lines().count();
        if total > MAX_FILE_LINES {
            problems.push(format!(
                "{file}: {total} lines (at most {MAX_FILE_LINES}): split it"
            ));
        }
        for f in functions(&m.code) {
            let (bound, what) = if f.handler {
                (MAX_HANDLER_LINES, "handler")
            } else {
                (MAX_FN_LINES, "function")
            };
            if f.lines > bound {
                problems.push(format!(
                    "{file}:{}: {what} `{}` has {} lines (at most {bound}): move its work into \
                     named functions",
                    f.line, f.name, f.lines
                ));
            }
        }
    }
    problems
}

#[test]
fn no_file_function_or_handler_is_longer_than_its_bound() {
    let problems = oversized(&load());
    assert!(problems.is_empty(), "{}", report(&problems));
}

/// The size check itself: a long function and a long handler are found, a short one and a
/// declaration without a body are not, and a brace in a string does not end a body.
#[test]
fn the_size_check_finds_long_functions_and_handlers() {
    let body = |n: usize| "    let x = 1;\n".repeat(n);
    let code = format!(
        "trait T {{ fn declared(&self) -> Result<(), ()>; }}\n\
         fn short() {{\n    let s = \"}}\";\n}}\n\
         fn long<T: Into<String>>(t: T) -> Vec<T> where T: Clone {{\n{}}}\n\
         #[utoipa::path(get, path = \"/x\")]\n\
         pub async fn handler(\n    a: A,\n) -> Result<(), E> {{\n{}}}\n",
        body(99),
        body(38)
    );
    let found: Vec<(String, usize, bool)> = functions(&strip(&code))
        .into_iter()
        .map(|f| (f.name, f.lines, f.handler))
        .collect();
    assert_eq!(
        found,
        [
            ("short".to_owned(), 3, false),
            ("long".to_owned(), 101, false),
            ("handler".to_owned(), 42, true),
        ]
    );
}

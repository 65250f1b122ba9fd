//! Embeds the examples the test suite recorded (`docs/examples/`, see `src/examples.rs`): a
//! list per kind of `(name, JSON text)`, each file included at compile time so the binary's
//! `/openapi.json` carries them.

use std::{env, fs, path::Path};

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/examples");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut out = String::new();
    for (kind, constant) in [("operations", "OPERATIONS"), ("events", "EVENTS")] {
        let dir = root.join(kind);
        let mut names: Vec<String> = fs::read_dir(&dir)
            .map(|entries| {
                entries
                    .filter_map(|e| e.ok())
                    .filter_map(|e| e.file_name().into_string().ok())
                    .filter_map(|n| n.strip_suffix(".json").map(str::to_owned))
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        out.push_str(&format!("pub const {constant}: &[(&str, &str)] = &[\n"));
        for name in names {
            let path = dir.join(format!("{name}.json"));
            out.push_str(&format!(
                "    ({name:?}, include_str!({:?})),\n",
                path.display().to_string()
            ));
        }
        out.push_str("];\n");
    }
    let target = Path::new(&env::var("OUT_DIR").expect("OUT_DIR")).join("examples.rs");
    fs::write(target, out).expect("write examples.rs");
}

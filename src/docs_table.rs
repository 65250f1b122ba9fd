//! Tests' check of a table a page under `docs/` holds between two markers, made from a list in
//! the code (the error codes, the event types): the page must hold exactly that table, and
//! `PAYD_UPDATE_DOCS=1` rewrites it.

/// Fails unless `page` (a path under the crate) holds `table` between `begin` and `end`.
pub fn check(page: &str, begin: &str, end: &str, table: &str) {
    let path = format!("{}/{page}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{page}: {e}"));
    let (head, rest) = text
        .split_once(begin)
        .unwrap_or_else(|| panic!("{page} lacks its begin marker"));
    let (_, tail) = rest
        .split_once(end)
        .unwrap_or_else(|| panic!("{page} lacks its end marker"));
    let expected = format!("{head}{begin}{table}{end}{tail}");
    if std::env::var_os("PAYD_UPDATE_DOCS").is_some() {
        std::fs::write(&path, &expected).unwrap_or_else(|e| panic!("{page}: {e}"));
        return;
    }
    assert!(
        text == expected,
        "{page}'s table is not the code's: run PAYD_UPDATE_DOCS=1 cargo test --lib"
    );
}

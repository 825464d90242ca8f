//! For the workspace's tests: tables in `docs/` that a test generates (issue 20
//! point 8), so documented numbers cannot drift from the code.
//!
//! A page holds the table between `<!-- NAME:begin -->` and `<!-- NAME:end -->`. The
//! test that runs the experiments renders the table and calls [`check_generated`]:
//! it fails when the page's table differs from what the runs give now, naming the
//! command that rewrites it (`TIERKIT_BLESS_DOCS=1 cargo test … <test>`).

use std::path::PathBuf;

/// Compare the block `name` of `docs/<page>` (e.g. `policies/memtis.md`) with
/// `table`, or write `table` there when `TIERKIT_BLESS_DOCS` is set. `test` is the
/// test's name, for the message.
pub fn check_generated(page: &str, name: &str, table: &str, test: &str) {
    // Tests run as threads of one process: one page edit at a time.
    static EDITING: std::sync::Mutex<()> = std::sync::Mutex::new(());
    let _one_at_a_time = EDITING.lock().unwrap_or_else(|e| e.into_inner());
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../docs")
        .join(page);
    let text = std::fs::read_to_string(&path).unwrap();
    let (begin, end) = (
        format!("<!-- {name}:begin -->\n"),
        format!("<!-- {name}:end -->"),
    );
    let start = text
        .find(&begin)
        .unwrap_or_else(|| panic!("{page} has no `{}` marker", begin.trim()))
        + begin.len();
    let stop = start
        + text[start..]
            .find(&end)
            .unwrap_or_else(|| panic!("{page} has no `{end}` marker"));
    if std::env::var_os("TIERKIT_BLESS_DOCS").is_some() {
        let new = format!("{}{table}{}", &text[..start], &text[stop..]);
        std::fs::write(&path, new).unwrap();
        return;
    }
    assert_eq!(
        &text[start..stop],
        table,
        "docs/{page}'s `{name}` table differs from what the runs give now; \
         rewrite it with TIERKIT_BLESS_DOCS=1 cargo test {test}"
    );
}

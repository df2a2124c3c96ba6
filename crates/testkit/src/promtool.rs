//! `promtool check metrics` on a `/metrics` text: the exposition must parse and pass the
//! lint, apart from complaints a test names as known (e.g. an original metric name the
//! compatibility contract forbids renaming).

use std::io::Write;

/// Runs `promtool check metrics` on `text`; panics with promtool's complaints (or naming the
/// package when promtool is missing) unless every complaint is one of `known`.
pub fn check_metrics(text: &str, known: &[&str]) {
    let child = std::process::Command::new("promtool")
        .args(["check", "metrics"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) => panic!(
            "promtool is not installed ({e}): install the Debian package `prometheus` \
             (scripts/services does it)"
        ),
    };
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(text.as_bytes())
            .unwrap_or_else(|e| panic!("writing to promtool: {e}"));
    }
    let out = child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("promtool did not finish: {e}"));
    let complaints =
        String::from_utf8_lossy(&out.stderr).to_string() + &String::from_utf8_lossy(&out.stdout);
    let unexpected: Vec<&str> = complaints
        .lines()
        .filter(|l| !l.trim().is_empty() && !known.contains(&l.trim()))
        .collect();
    // Exit 3 = lint problems only (the known ones); 1 = the text did not parse.
    assert!(
        matches!(out.status.code(), Some(0 | 3)) && unexpected.is_empty(),
        "promtool check metrics failed ({:?}): {complaints}\n--- metrics ---\n{text}",
        out.status.code()
    );
}

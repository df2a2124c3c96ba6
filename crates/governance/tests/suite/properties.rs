//! Property tests: the classifier, the output guard and the pattern matcher accept any
//! input without panicking, and redaction stays bounded.

use proptest::prelude::*;
use turnstone_governance::fnmatch::fnmatch;
use turnstone_governance::{GatedCall, Workspace, assess_output, classify, redact_secrets};

/// Text that looks like shell: words, quotes, operators, substitutions, paths.
fn shellish() -> impl Strategy<Value = String> {
    let atoms = prop::sample::select(vec![
        "rm",
        "-rf",
        "/",
        "~",
        "$HOME",
        "sudo",
        "curl",
        "|",
        "||",
        "&&",
        ";",
        "&",
        ">",
        ">>",
        "<",
        "<<",
        "EOF",
        "\n",
        "$(",
        ")",
        "`",
        "'",
        "\"",
        "\\",
        "bash",
        "-c",
        "sh",
        "<(",
        "find",
        "-exec",
        "{}",
        "\\;",
        "dd",
        "of=/dev/sda",
        "git",
        "push",
        "--force",
        "chmod",
        "777",
        "python",
        "-c",
        "os.system('rm -rf /')",
        "{",
        "}",
        "(",
        "*",
        ".",
        "..",
        "/etc/passwd",
        "~/.ssh/id_rsa",
        "#",
        "$((",
        "))",
        "=",
        "A=1",
        "xargs",
        "env",
        "-u",
        "2>&1",
        ">&",
    ]);
    prop::collection::vec(atoms, 0..40).prop_map(|parts| parts.join(" "))
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn classifier_never_panics_on_arbitrary_arguments(func in "[a-z_]{0,12}", label in "[a-z_]{0,16}", arguments in any::<String>()) {
        let ws = Workspace::new("/work/project", Some("/home/dev".into()));
        let call = GatedCall { call_id: "c", func_name: &func, approval_label: &label, arguments: &arguments };
        let verdict = classify(&call, &ws);
        prop_assert!((0.0..=1.0).contains(&verdict.confidence));
        prop_assert!(!verdict.evidence.is_empty());
    }

    #[test]
    fn classifier_never_panics_on_shell_like_commands(command in shellish(), raw in any::<String>()) {
        let ws = Workspace::new("/work/project", None);
        for text in [command.clone(), format!("{command}{raw}"), raw] {
            let arguments = serde_json::json!({ "command": text }).to_string();
            for func in ["bash", "watch"] {
                let call = GatedCall { call_id: "c", func_name: func, approval_label: func, arguments: &arguments };
                let _ = classify(&call, &ws);
            }
            let bare = GatedCall { call_id: "c", func_name: "bash", approval_label: "bash", arguments: &text };
            let _ = classify(&bare, &ws);
        }
    }

    #[test]
    fn classifier_never_panics_on_arbitrary_paths(path in any::<String>(), tool in prop::sample::select(vec!["write_file", "edit_file", "read_file", "search", "web_fetch", "diff_file"])) {
        let ws = Workspace::new("/", Some("/".into()));
        let arguments = serde_json::json!({ "path": path, "url": path, "path_a": path }).to_string();
        let call = GatedCall { call_id: "c", func_name: tool, approval_label: tool, arguments: &arguments };
        let _ = classify(&call, &ws);
    }

    #[test]
    fn redaction_never_panics_and_stays_bounded(text in any::<String>()) {
        let redacted = redact_secrets(&text);
        prop_assert!(redacted.chars().count() <= text.chars().count() * 4 + 32);
        let assessment = assess_output(&text, true);
        prop_assert_eq!(assessment.output_length, text.chars().count() as u64);
        if let Some(r) = &assessment.redacted_text {
            prop_assert_eq!(r, &redacted);
        }
    }

    #[test]
    fn redaction_of_secret_shaped_text_stays_bounded(parts in prop::collection::vec(prop::sample::select(vec![
        "a://u:p@", "PASSWORD=x1234", "Bearer ", "abcdefghijklmnopqrstuvwxyz", "sk-", "AKIA", "ghp_", "-----BEGIN PRIVATE KEY-----",
        "-----END PRIVATE KEY-----", "\"api_key\": \"", "\"", "=", "?token=", "&", "\n", " ", "0123456789ABCDEF", "[REDACTED:secret]",
    ]), 0..200)) {
        let text = parts.concat();
        let redacted = redact_secrets(&text);
        prop_assert!(redacted.chars().count() <= text.chars().count() * 4 + 32, "{} -> {}", text.len(), redacted.len());
        // Redacting the redacted text stays bounded too (markers are never secrets).
        let again = redact_secrets(&redacted);
        prop_assert!(again.chars().count() <= redacted.chars().count() * 4 + 32);
    }

    #[test]
    fn fnmatch_never_panics_and_star_matches_everything(name in any::<String>(), pattern in any::<String>()) {
        let _ = fnmatch(&name, &pattern);
        prop_assert!(fnmatch(&name, "*"));
        prop_assert!(fnmatch(&name, "**"));
    }

    #[test]
    fn fnmatch_literal_patterns_match_only_themselves(name in "[a-z_]{0,12}", other in "[a-z_]{0,12}") {
        prop_assert!(fnmatch(&name, &name));
        prop_assert_eq!(fnmatch(&other, &name), other == name);
    }
}

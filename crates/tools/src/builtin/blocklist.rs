//! Commands `bash` refuses outright, whatever the approval: the few patterns that wreck a
//! machine (wiping the root or home directory, formatting or overwriting disks, fork bombs,
//! opening up permissions of the whole tree). This is a seat belt, not a sandbox.

use std::sync::LazyLock;

use regex::Regex;

/// Characters that end a shell word in the patterns below.
const END: &str = r"(?:[\s;&|)`]|$)";

struct Rule {
    pattern: Regex,
    /// Extra check on the match (e.g. "the flags include -r").
    also: Check,
    what: &'static str,
}

fn always(_: &regex::Captures<'_>) -> bool {
    true
}

/// An extra check on a rule's match.
type Check = fn(&regex::Captures<'_>) -> bool;

/// `rm` flags that make the delete recursive.
fn recursive_rm(caps: &regex::Captures<'_>) -> bool {
    let flags = caps.name("flags").map_or("", |m| m.as_str());
    flags.split_whitespace().any(|f| {
        f == "--recursive" || (f.starts_with('-') && !f.starts_with("--") && f.contains(['r', 'R']))
    })
}

static RULES: LazyLock<Vec<Rule>> = LazyLock::new(|| {
    let specs: [(String, Check, &'static str); 8] = [
        (
            format!(
                r#"(?:^|[\s;&|(`])rm\s+(?P<flags>(?:-[\w-]+\s+)+)(?:--\s+)?["']?(?:/|/\*|~|~/|~/\*|\$HOME|\$\{{HOME\}}|\$HOME/|\$HOME/\*)["']?{END}"#
            ),
            recursive_rm,
            "recursive delete of the root or home directory",
        ),
        (
            r"--no-preserve-root".to_owned(),
            always,
            "rm --no-preserve-root",
        ),
        (
            r"(?:^|[\s;&|(`])mkfs(?:\.\w+)?\b".to_owned(),
            always,
            "formatting a filesystem (mkfs)",
        ),
        (
            r":\s*\(\s*\)\s*\{\s*:\s*\|\s*:\s*&\s*\}\s*;\s*:".to_owned(),
            always,
            "fork bomb",
        ),
        (
            r"\bdd\b[^;&|\n]*\bof=/dev/(?:sd|hd|nvme|xvd|vd|mmcblk|disk)".to_owned(),
            always,
            "dd onto a disk device",
        ),
        (
            r">\s*/dev/(?:sd[a-z]|hd[a-z]|nvme\d|xvd[a-z]|vd[a-z]|mmcblk\d)".to_owned(),
            always,
            "writing onto a disk device",
        ),
        (
            format!(
                r"\bchmod\s+(?:-\S+\s+)*(?:-[a-zA-Z]*R[a-zA-Z]*|--recursive)\s+(?:-\S+\s+)*0?777\s+/{END}"
            ),
            always,
            "chmod -R 777 on the root directory",
        ),
        (
            format!(r"\bchmod\s+0?777\s+(?:-[a-zA-Z]*R[a-zA-Z]*|--recursive)\s+/{END}"),
            always,
            "chmod -R 777 on the root directory",
        ),
    ];
    specs
        .into_iter()
        .filter_map(|(src, also, what)| {
            let pattern = Regex::new(&src);
            if let Err(e) = &pattern {
                tracing::error!(pattern = %src, error = %e, "invalid bash blocklist pattern");
            }
            pattern.ok().map(|pattern| Rule {
                pattern,
                also,
                what,
            })
        })
        .collect()
});

/// `Err` with a message for the model when the command matches a destructive pattern.
pub(crate) fn check(command: &str) -> Result<(), String> {
    for rule in RULES.iter() {
        for caps in rule.pattern.captures_iter(command) {
            if (rule.also)(&caps) {
                return Err(format!(
                    "Error: command blocked for safety ({}). This pattern is never run; \
                     use a narrower command.",
                    rule.what
                ));
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_rules_compile() {
        assert_eq!(RULES.len(), 8);
    }

    #[test]
    fn destructive_commands_are_blocked() {
        for cmd in [
            "rm -rf /",
            "rm -rf / ",
            "sudo rm -rf /*",
            "cd x && rm -fr ~",
            "rm -r -f $HOME",
            "rm --recursive --force /",
            "rm -rf --no-preserve-root /",
            "echo; rm -Rf '/'",
            "mkfs.ext4 /dev/sda1",
            "sudo mkfs /dev/sdb",
            ":(){ :|:& };:",
            ": ( ) { : | : & } ; :",
            "dd if=/dev/zero of=/dev/sda bs=1M",
            "dd if=x.img of=/dev/nvme0n1",
            "cat junk > /dev/sda",
            "chmod -R 777 /",
            "chmod 777 -R /",
            "sudo chmod --recursive 0777 /",
        ] {
            let err = check(cmd).expect_err(cmd);
            assert!(err.contains("blocked"), "{cmd}: {err}");
        }
    }

    #[test]
    fn ordinary_commands_pass() {
        for cmd in [
            "rm -rf ./target",
            "rm -rf /tmp/build",
            "rm -f /",
            "rm -rf ~/cache",
            "ls -la /",
            "echo mkfsfoo",
            "dd if=/dev/zero of=./disk.img bs=1M count=1",
            "chmod 777 ./script.sh",
            "chmod -R 755 /srv/www",
            "grep -r 'rm -rf' docs",
            "echo hi > /dev/null",
        ] {
            assert_eq!(check(cmd), Ok(()), "{cmd}");
        }
    }
}

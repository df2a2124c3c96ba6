//! The one environment every child process of a node starts with — `bash` commands, watch
//! polls and MCP stdio servers: an allow-list, never the node's whole environment.
//!
//! A node's environment holds its secrets (`TURNSTONE_DB_URL` with its password, the JWT
//! secret, provider API keys); a child could read them, print them into the conversation,
//! or pass them on. So only the names a shell needs to behave are passed ([`BASE_NAMES`],
//! `LC_*`), plus what the operator names in `[tools] env_passthrough`. `TURNSTONE_*`
//! variables are never passed, even when named.
//!
//! ```
//! use turnstone_tools::child_env::ChildEnv;
//! let env = ChildEnv::new(["GOPATH".to_string()]);
//! assert!(env.allows("PATH") && env.allows("LC_ALL") && env.allows("GOPATH"));
//! assert!(!env.allows("OPENAI_API_KEY") && !env.allows("TURNSTONE_DB_URL"));
//! ```

use std::ffi::{OsStr, OsString};

/// Variables every child gets when the node has them.
pub const BASE_NAMES: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TERM",
    "COLORTERM",
    "TZ",
    "TMPDIR",
    "NO_COLOR",
];
/// Name prefixes every child gets (locale categories).
pub const BASE_PREFIXES: &[&str] = &["LC_"];
/// Names that are never passed, even when configured.
const NEVER_PREFIX: &str = "TURNSTONE_";

/// The allow-list: [`BASE_NAMES`], `LC_*` and the configured extras.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChildEnv {
    passthrough: Vec<String>,
}

impl ChildEnv {
    /// The base allow-list plus `passthrough` (exact names, or a prefix ending in `*`, e.g.
    /// `GIT_*`). Entries naming `TURNSTONE_*` are dropped.
    pub fn new(passthrough: impl IntoIterator<Item = String>) -> Self {
        Self {
            passthrough: passthrough
                .into_iter()
                .map(|n| n.trim().to_string())
                .filter(|n| !n.is_empty() && !n.to_ascii_uppercase().starts_with(NEVER_PREFIX))
                .collect(),
        }
    }

    /// Whether a variable of this name reaches children.
    pub fn allows(&self, name: &str) -> bool {
        if name.to_ascii_uppercase().starts_with(NEVER_PREFIX) {
            return false;
        }
        BASE_NAMES.contains(&name)
            || BASE_PREFIXES.iter().any(|p| name.starts_with(p))
            || self
                .passthrough
                .iter()
                .any(|entry| match entry.strip_suffix('*') {
                    Some(prefix) => name.starts_with(prefix),
                    None => entry == name,
                })
    }

    /// The allowed subset of `vars`, in their order.
    pub fn filter<K: AsRef<OsStr>, V>(
        &self,
        vars: impl IntoIterator<Item = (K, V)>,
    ) -> Vec<(K, V)> {
        vars.into_iter()
            .filter(|(k, _)| k.as_ref().to_str().is_some_and(|k| self.allows(k)))
            .collect()
    }

    /// The allowed subset of this process's environment.
    pub fn from_process(&self) -> Vec<(OsString, OsString)> {
        self.filter(std::env::vars_os())
    }

    /// [`ChildEnv::from_process`] as UTF-8 strings (non-UTF-8 values are left out).
    pub fn from_process_utf8(&self) -> Vec<(String, String)> {
        self.from_process()
            .into_iter()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_allowed_names_pass() {
        let env = ChildEnv::new(["GIT_*".to_string(), "TURNSTONE_DB_URL".to_string()]);
        let vars = [
            ("PATH", "/usr/bin"),
            ("HOME", "/root"),
            ("LC_ALL", "C"),
            ("GIT_AUTHOR_NAME", "a"),
            ("TURNSTONE_DB_URL", "postgres://u:pw@h/db"),
            ("TURNSTONE_JWT_SECRET", "s"),
            ("OPENAI_API_KEY", "sk"),
            ("DATABASE_URL", "postgres://u:pw@h/db"),
            ("AWS_PROFILE", "x"),
        ];
        let kept: Vec<&str> = env.filter(vars).into_iter().map(|(k, _)| k).collect();
        assert_eq!(kept, ["PATH", "HOME", "LC_ALL", "GIT_AUTHOR_NAME"]);
    }
}

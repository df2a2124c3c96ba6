//! Where a path points, decided lexically: `~` and `$HOME` expanded, relative paths joined
//! to the workspace, `.` and `..` folded. The file system is never touched — the classifier
//! must be pure and fast — so a symlink is judged by its name; the tools' own prepare step
//! resolves symlinks and labels reads outside the workspace `<tool>_outside`, which the
//! classifier also honours.

use std::path::{Component, Path, PathBuf};

use super::Rule;
use crate::risk::RiskLevel;

/// Top-level directories of the operating system (Linux and macOS). A write or removal
/// there is critical unless the workspace itself lives below it.
const SYSTEM_DIRS: &[&str] = &[
    "etc",
    "usr",
    "bin",
    "sbin",
    "lib",
    "lib32",
    "lib64",
    "libx32",
    "boot",
    "sys",
    "proc",
    "dev",
    "root",
    "var",
    "opt",
    "srv",
    "snap",
    "home",
    "System",
    "Library",
    "Applications",
    "private",
];

/// Directory names whose contents are credentials (any depth, usually below `~`).
const CREDENTIAL_DIRS: &[&str] = &[
    ".ssh",
    ".gnupg",
    ".aws",
    ".kube",
    ".azure",
    ".password-store",
    "gcloud",
    ".docker",
    "keyrings",
];

/// File names that hold credentials wherever they are.
const CREDENTIAL_FILES: &[&str] = &[
    ".netrc",
    "_netrc",
    ".git-credentials",
    ".pgpass",
    ".npmrc",
    ".pypirc",
    ".vault-token",
    ".my.cnf",
    "id_rsa",
    "id_dsa",
    "id_ecdsa",
    "id_ed25519",
    "credentials",
    "credentials.json",
    "application_default_credentials.json",
    "shadow",
    "gshadow",
    "sudoers",
    "master.passwd",
    "Login Data",
    "Cookies",
    "key4.db",
    "logins.json",
    "terraform.tfstate",
];

/// File extensions of key material.
const KEY_EXTENSIONS: &[&str] = &["pem", "key", "p12", "pfx", "jks", "keystore", "kdbx", "ppk"];

/// Files run at login or by a scheduler: writing them persists beyond the session.
const PERSISTENCE_FILES: &[&str] = &[
    ".bashrc",
    ".bash_profile",
    ".bash_login",
    ".bash_logout",
    ".profile",
    ".zshrc",
    ".zprofile",
    ".zshenv",
    ".zlogin",
    ".cshrc",
    ".tcshrc",
    "config.fish",
    "authorized_keys",
    "authorized_keys2",
    "crontab",
    "rc.local",
];

/// Directories whose files are run by the system (autostart, services, cron).
const PERSISTENCE_DIRS: &[&str] = &[
    "autostart",
    "LaunchAgents",
    "LaunchDaemons",
    "systemd",
    "cron.d",
    "cron.daily",
    "cron.hourly",
    "profile.d",
    "init.d",
];

/// What one path argument is, as far as the classifier cares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PathFacts {
    /// The lexically resolved absolute path (or the raw text when it could not be resolved).
    pub resolved: String,
    /// It names a shell variable or substitution the classifier cannot expand.
    pub unresolved: bool,
    pub inside_workspace: bool,
    /// The workspace directory itself (or everything in it: `*`).
    pub is_workspace_root: bool,
    /// `/` (or `/*`).
    pub is_root: bool,
    /// The home directory itself (or everything in it).
    pub is_home: bool,
    /// Below an operating-system directory (and not inside the workspace).
    pub system: bool,
    /// A block device or raw memory (`/dev/sda`, `/dev/nvme0n1`, `/dev/mem`).
    pub block_device: bool,
    /// `/dev/null`, `/dev/stdout`, `/dev/stderr`, `/dev/fd/*`, `/dev/tty`: harmless sinks.
    pub harmless_device: bool,
    /// `/dev/tcp/…` or `/dev/udp/…`: bash's network redirection.
    pub network_device: bool,
    /// SSH material (`~/.ssh/*`, `authorized_keys`).
    pub ssh: bool,
    /// Key material or a credential store.
    pub credential: bool,
    /// A `.env`-style secrets file (not `.env.example`).
    pub secret_file: bool,
    /// A login, autostart or scheduler file.
    pub persistence: bool,
    /// `/proc/<pid>/environ`: another process's environment (its secrets).
    pub proc_environ: bool,
    /// `/etc/passwd`-style account databases (reconnaissance even when only read).
    pub account_database: bool,
}

/// The fixed places a call is judged against.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Workspace {
    root: PathBuf,
    home: Option<PathBuf>,
}

impl Workspace {
    /// `root` is the workstream's working directory; `home` the node user's home (used to
    /// expand `~` and `$HOME`; without it `~` is treated as outside the workspace).
    pub fn new(root: impl Into<PathBuf>, home: Option<PathBuf>) -> Self {
        Self {
            root: normalize(&root.into()),
            home: home.map(|h| normalize(&h)),
        }
    }

    /// The (normalised) workspace root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Classifies one path argument as written by the model.
    pub(crate) fn facts(&self, raw: &str) -> PathFacts {
        let raw = raw.trim();
        let (path, unresolved) = self.expand(raw);
        let resolved = path.to_string_lossy().into_owned();
        let parent_of_glob = if raw.ends_with('*') {
            path.parent().map(Path::to_path_buf)
        } else {
            None
        };
        let effective = parent_of_glob.as_deref().unwrap_or(&path);
        let inside_workspace = !unresolved && effective.starts_with(&self.root);
        let is_workspace_root = inside_workspace && effective == self.root;
        let is_root = !unresolved && effective == Path::new("/");
        let is_home = !unresolved
            && self.home.as_deref().is_some_and(|h| effective == h)
            && !inside_workspace;
        let names: Vec<String> = path
            .components()
            .filter_map(|c| match c {
                Component::Normal(n) => Some(n.to_string_lossy().into_owned()),
                _ => None,
            })
            .collect();
        let first = names.first().map(String::as_str).unwrap_or("");
        let file_name = names.last().map(String::as_str).unwrap_or("");
        let extension = file_name.rsplit_once('.').map(|(_, ext)| ext).unwrap_or("");
        let in_dev = first == "dev" && path.is_absolute();
        let harmless_device = in_dev
            && (matches!(
                file_name,
                "null" | "zero" | "stdout" | "stderr" | "stdin" | "tty" | "random" | "urandom"
            ) || names.get(1).is_some_and(|n| n == "fd" || n == "pts"));
        let network_device = in_dev && names.get(1).is_some_and(|n| n == "tcp" || n == "udp");
        let block_device = in_dev && !harmless_device && !network_device;
        let system = !inside_workspace
            && path.is_absolute()
            && !unresolved
            && SYSTEM_DIRS.contains(&first)
            && !self
                .home
                .as_deref()
                .is_some_and(|h| path.starts_with(h) && path != h);
        let ssh = names.iter().any(|n| n == ".ssh") || file_name.starts_with("authorized_keys");
        let credential = ssh
            || names[..names.len().saturating_sub(1)]
                .iter()
                .any(|n| CREDENTIAL_DIRS.contains(&n.as_str()))
            || CREDENTIAL_FILES.contains(&file_name)
            || file_name.starts_with("id_rsa")
            || file_name.starts_with("id_ed25519")
            || KEY_EXTENSIONS.contains(&extension);
        let secret_file = is_secret_env_file(file_name)
            || file_name.ends_with(".tfvars")
            || file_name.starts_with("secrets.")
            || file_name.ends_with(".secret");
        let persistence = PERSISTENCE_FILES.contains(&file_name)
            || names[..names.len().saturating_sub(1)]
                .iter()
                .any(|n| PERSISTENCE_DIRS.contains(&n.as_str()))
            || (first == "etc"
                && names.get(1).is_some_and(|n| {
                    n.starts_with("cron") || n == "profile" || n == "bash.bashrc"
                }))
            || (first == "var"
                && names.get(1).is_some_and(|n| n == "spool")
                && names.iter().any(|n| n == "cron"));
        let proc_environ = first == "proc" && file_name == "environ";
        let account_database = first == "etc"
            && names.len() == 2
            && matches!(
                file_name,
                "passwd" | "shadow" | "gshadow" | "master.passwd" | "sudoers"
            );
        PathFacts {
            resolved,
            unresolved,
            inside_workspace,
            is_workspace_root,
            is_root,
            is_home,
            system,
            block_device,
            harmless_device,
            network_device,
            ssh,
            credential,
            secret_file,
            persistence,
            proc_environ,
            account_database,
        }
    }

    /// Expands `~`, `$HOME` and `${HOME}`, joins relative paths to the workspace and folds
    /// `.`/`..`. The flag says the path holds something else that cannot be expanded
    /// (another variable, a command substitution).
    fn expand(&self, raw: &str) -> (PathBuf, bool) {
        let home = self.home.as_deref();
        let mut text = raw.to_owned();
        let mut unresolved = false;
        for prefix in ["~", "$HOME", "${HOME}"] {
            if text == prefix || text.starts_with(&format!("{prefix}/")) {
                match home {
                    Some(h) => {
                        text = format!("{}{}", h.display(), &text[prefix.len()..]);
                    }
                    None => unresolved = true,
                }
                break;
            }
        }
        if text.contains('$') || text.contains('`') || (text.starts_with('~') && !unresolved) {
            unresolved = true;
        }
        let path = Path::new(&text);
        let joined = if path.is_absolute() {
            path.to_path_buf()
        } else {
            self.root.join(path)
        };
        (normalize(&joined), unresolved)
    }
}

/// `.env`, `.env.local`, `prod.env` — but not the committed templates.
fn is_secret_env_file(name: &str) -> bool {
    let template = [".example", ".sample", ".template", ".dist", ".defaults"]
        .iter()
        .any(|suffix| name.ends_with(suffix));
    !template && (name == ".env" || name.starts_with(".env.") || name.ends_with(".env"))
}

/// Folds `.` and `..` without touching the file system (`..` above `/` stays at `/`).
fn normalize(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::RootDir | Component::Prefix(_) => out.push(component.as_os_str()),
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(name) => out.push(name),
        }
    }
    if out.as_os_str().is_empty() {
        out.push(".");
    }
    out
}

/// The risk of writing (creating, truncating, appending, moving onto) `facts`.
pub(crate) fn write_risk(facts: &PathFacts) -> Option<Rule> {
    if facts.harmless_device {
        return None;
    }
    Some(if facts.network_device {
        Rule::new(
            "network-redirect",
            RiskLevel::Critical,
            "Redirect to a network socket",
            "Redirects data to a raw network socket (/dev/tcp), the shape of a reverse shell or exfiltration.",
        )
    } else if facts.block_device {
        Rule::new(
            "device-write",
            RiskLevel::Critical,
            "Write to a block device",
            "Writes straight to a block device, destroying the file system on it.",
        )
    } else if facts.is_root || facts.system {
        Rule::new(
            "system-path-write",
            RiskLevel::Critical,
            "Write to a system path",
            "Writes to an operating-system directory outside the workspace.",
        )
    } else if facts.ssh {
        Rule::new(
            "ssh-write",
            RiskLevel::Critical,
            "Write to SSH keys",
            "Writes SSH keys or authorized_keys: grants remote access.",
        )
    } else if facts.persistence {
        Rule::new(
            "persistence-write",
            RiskLevel::High,
            "Write to a login or autostart file",
            "Writes a login, autostart or scheduler file: the change runs again outside this session.",
        )
    } else if facts.credential || facts.secret_file {
        Rule::new(
            "secret-file-write",
            RiskLevel::High,
            "Write to a secrets file",
            "Writes a file that holds credentials or secrets.",
        )
    } else if facts.unresolved {
        Rule::new(
            "unresolved-write",
            RiskLevel::Medium,
            "Write to an unresolved path",
            "Writes to a path built from a variable or substitution the classifier cannot resolve.",
        )
    } else if !facts.inside_workspace {
        Rule::new(
            "outside-workspace-write",
            RiskLevel::Medium,
            "Write outside the workspace",
            "Writes outside the workspace.",
        )
    } else {
        Rule::new(
            "workspace-write",
            RiskLevel::Low,
            "Write inside the workspace",
            "Writes a file inside the workspace.",
        )
    })
}

/// The risk of reading `facts` (printing it into the conversation).
pub(crate) fn read_risk(facts: &PathFacts) -> Rule {
    if facts.proc_environ {
        Rule::new(
            "proc-environ-read",
            RiskLevel::Critical,
            "Process environment exfiltration",
            "Reads a process's environment (/proc/*/environ), which holds its secrets.",
        )
    } else if facts.credential || facts.account_database {
        Rule::new(
            "credential-read",
            RiskLevel::High,
            "Reads credentials",
            "Reads key material, a credential store or the account database.",
        )
    } else if facts.block_device {
        Rule::new(
            "device-read",
            RiskLevel::High,
            "Reads a raw device",
            "Reads a raw device.",
        )
    } else if facts.secret_file {
        Rule::new(
            "secret-file-read",
            RiskLevel::Medium,
            "Reads a secrets file",
            "Reads a .env-style secrets file into the conversation.",
        )
    } else if facts.unresolved || !facts.inside_workspace && !facts.harmless_device {
        Rule::new(
            "outside-workspace-read",
            RiskLevel::Medium,
            "Read outside the workspace",
            "Reads outside the workspace.",
        )
    } else {
        Rule::new(
            "workspace-read",
            RiskLevel::Low,
            "Read inside the workspace",
            "Reads inside the workspace.",
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ws() -> Workspace {
        Workspace::new("/work/project", Some(PathBuf::from("/home/dev")))
    }

    #[test]
    fn resolves_lexically() {
        let w = ws();
        assert!(w.facts("src/main.rs").inside_workspace);
        assert!(!w.facts("../other/x").inside_workspace);
        assert!(w.facts("/etc/passwd").system);
        assert!(w.facts("/etc/passwd").account_database);
        assert!(w.facts("~/.ssh/id_ed25519").ssh);
        assert!(w.facts("$HOME/.aws/credentials").credential);
        assert!(w.facts("~").is_home);
        assert!(w.facts("/").is_root);
        assert!(w.facts("/*").is_root);
        assert!(w.facts(".").is_workspace_root);
        assert!(w.facts("*").is_workspace_root);
        assert!(w.facts("$TARGET/x").unresolved);
        assert!(w.facts("/dev/sda").block_device);
        assert!(w.facts("/dev/null").harmless_device);
        assert!(w.facts("/dev/tcp/10.0.0.1/4444").network_device);
        assert!(w.facts(".env").secret_file);
        assert!(!w.facts(".env.example").secret_file);
        assert!(w.facts("~/.bashrc").persistence);
        assert!(
            !w.facts("~/.bashrc").system,
            "home is not a system directory"
        );
        assert!(w.facts("/proc/self/environ").proc_environ);
    }

    #[test]
    fn a_workspace_below_a_system_directory_is_still_the_workspace() {
        let w = Workspace::new("/opt/app", None);
        let facts = w.facts("build/out.txt");
        assert!(facts.inside_workspace);
        assert!(!facts.system);
        assert!(w.facts("/opt/other").system);
    }
}

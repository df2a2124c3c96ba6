//! Risk of a shell command line (the `bash` tool, a watch's command): every simple command
//! the reader finds — including those inside pipes, lists, substitutions, `sh -c` strings
//! and inline interpreter code — is judged by its program and arguments, its redirections
//! by where they write, and each pipeline by what flows into a shell.

use std::sync::LazyLock;

use regex::Regex;

use super::paths::{PathFacts, Workspace, read_risk, write_risk};
use super::shell::{MAX_NESTING, Pipeline, Script, SimpleCommand, parse, parse_nested};
use super::{Finding, Rule};
use crate::risk::RiskLevel::{Critical, High, Low, Medium};

// --- rules --------------------------------------------------------------------------------

const TRUNCATED: Rule = Rule::new(
    "unanalysed-remainder",
    Medium,
    "Command too long or too deeply nested to analyse fully",
    "Part of the command line was not analysed (length or nesting limit).",
);
const UNKNOWN: Rule = Rule::new(
    "unrecognised-command",
    Medium,
    "Unrecognised command",
    "No rule knows this program; it may do anything the node user can.",
);
const READ_ONLY: Rule = Rule::new(
    "read-only-command",
    Low,
    "Read-only shell command",
    "The command only reads and prints.",
);
const BENIGN: Rule = Rule::new(
    "benign-command",
    Low,
    "Shell bookkeeping",
    "The command changes only the shell's own state or creates entries inside the workspace.",
);
const RM_SYSTEM: Rule = Rule::new(
    "rm-system-path",
    Critical,
    "Destructive removal of the root, home or system paths",
    "Removes files from the root, the home directory, a device or an operating-system directory.",
);
const NO_PRESERVE_ROOT: Rule = Rule::new(
    "rm-no-preserve-root",
    Critical,
    "Removal with --no-preserve-root",
    "Explicitly disables the guard against deleting /.",
);
const RM_CREDENTIALS: Rule = Rule::new(
    "rm-credentials",
    High,
    "Removal of key material",
    "Deletes SSH keys or credential files.",
);
const RM_RECURSIVE_OUTSIDE: Rule = Rule::new(
    "rm-recursive-outside-workspace",
    High,
    "Recursive removal outside the workspace",
    "Recursively deletes a directory outside the workspace (or one whose path cannot be resolved).",
);
const RM_WORKSPACE_ROOT: Rule = Rule::new(
    "rm-workspace-root",
    High,
    "Recursive removal of the whole workspace",
    "Recursively deletes the workspace itself or everything in it.",
);
const RM_OUTSIDE: Rule = Rule::new(
    "rm-outside-workspace",
    Medium,
    "Removal outside the workspace",
    "Deletes files outside the workspace.",
);
const RM_WORKSPACE: Rule = Rule::new(
    "rm-in-workspace",
    Medium,
    "Removal inside the workspace",
    "Deletes files inside the workspace; not reversible without version control.",
);
const DISK_FORMAT: Rule = Rule::new(
    "disk-format",
    Critical,
    "Formats or wipes a file system",
    "mkfs/wipefs destroy the data of the target device.",
);
const PARTITION: Rule = Rule::new(
    "disk-partition",
    High,
    "Changes a partition table",
    "Partition editors can make disks unreadable.",
);
const DEVICE_WRITE: Rule = Rule::new(
    "dd-device-write",
    Critical,
    "Raw write to a device",
    "dd writes straight to a block device, destroying its file system.",
);
const DEVICE_READ: Rule = Rule::new(
    "dd-device-read",
    High,
    "Raw read of a device",
    "Copies a whole disk, which holds every secret on it.",
);
const DD: Rule = Rule::new(
    "dd-copy",
    Medium,
    "Low-level copy with dd",
    "dd overwrites its output without asking.",
);
const FORK_BOMB: Rule = Rule::new(
    "fork-bomb",
    Critical,
    "Fork bomb",
    "The function calls itself twice in the background until the machine runs out of processes.",
);
const PROC_ENVIRON: Rule = Rule::new(
    "proc-environ-read",
    Critical,
    "Process environment exfiltration",
    "Reading /proc/*/environ exposes another process's environment, including its secrets.",
);
const PIPE_TO_SHELL: Rule = Rule::new(
    "pipe-to-shell",
    Critical,
    "Remote code execution via pipe to shell",
    "Content downloaded from the network is piped straight into a shell.",
);
const DECODE_TO_SHELL: Rule = Rule::new(
    "decode-to-shell",
    Critical,
    "Obfuscated code piped into a shell",
    "Decoded or decompressed data is piped into a shell, hiding what runs.",
);
const PIPE_INTO_SHELL: Rule = Rule::new(
    "pipe-into-shell",
    High,
    "Generated text piped into a shell",
    "Output of another command is executed as shell code.",
);
const DOWNLOAD_EXEC: Rule = Rule::new(
    "download-then-execute",
    Critical,
    "Download-then-execute chain",
    "A file fetched from the network is executed in the same command line.",
);
const DOWNLOAD_SUBSTITUTION: Rule = Rule::new(
    "download-substitution-exec",
    Critical,
    "Remote code execution via substitution",
    "A shell runs the output of a download (`bash <(curl …)`, `sh -c \"$(curl …)\"`).",
);
const DOWNLOAD_INTO_INTERPRETER: Rule = Rule::new(
    "download-into-interpreter",
    High,
    "Downloaded code piped into an interpreter",
    "Remote content is executed by an interpreter.",
);
const CHMOD_DOWNLOADED: Rule = Rule::new(
    "chmod-downloaded",
    High,
    "Makes a downloaded file executable",
    "Prepares a file fetched from the network for execution.",
);
const HTTP_MUTATION: Rule = Rule::new(
    "http-mutation",
    High,
    "HTTP request that sends data",
    "Sends a non-GET request or uploads data, which may change remote state or exfiltrate data.",
);
const EXFIL_CREDENTIAL: Rule = Rule::new(
    "credential-exfiltration",
    Critical,
    "Credential upload",
    "Sends key material or a credential file to another host.",
);
const METADATA: Rule = Rule::new(
    "cloud-metadata-access",
    High,
    "Cloud metadata endpoint access",
    "The instance metadata service hands out the machine's cloud credentials.",
);
const NETWORK_FETCH: Rule = Rule::new(
    "network-fetch",
    Medium,
    "Fetches remote content",
    "Downloads from the network; the content may carry prompt injection or malware.",
);
const REMOTE_ACCESS: Rule = Rule::new(
    "remote-access",
    High,
    "Remote access or transfer",
    "Opens a connection to another host (ssh, scp, rsync to a remote, netcat).",
);
const REVERSE_SHELL: Rule = Rule::new(
    "reverse-shell",
    Critical,
    "Shell bound to a network socket",
    "netcat/socat executing a program over the network is a reverse or bind shell.",
);
const PRIVILEGE: Rule = Rule::new(
    "privilege-escalation",
    High,
    "Elevated privilege command",
    "Runs with sudo/su/doas: every safeguard of the node user is bypassed.",
);
const KILL_FORCE: Rule = Rule::new(
    "kill-force",
    High,
    "Force-kills processes",
    "SIGKILL, killall and pkill can take down services and lose data.",
);
const KILL: Rule = Rule::new(
    "kill",
    Medium,
    "Signals a process",
    "Stops or signals a running process.",
);
const POWER: Rule = Rule::new(
    "power-state",
    High,
    "Shuts down or reboots the machine",
    "Stops everything running on the host.",
);
const SERVICE_CHANGE: Rule = Rule::new(
    "service-change",
    High,
    "Persistent system change",
    "Starts, stops or installs services or scheduled jobs; the change outlives the session.",
);
const SYSTEM_CONFIG: Rule = Rule::new(
    "system-configuration",
    High,
    "Changes system configuration",
    "Firewall, mounts, kernel modules, users and passwords are host-wide.",
);
const CHMOD_SYSTEM: Rule = Rule::new(
    "chmod-system-path",
    Critical,
    "Permission change on system paths",
    "Recursive or world-writable permissions on operating-system paths break the host's security.",
);
const CHMOD_PERMISSIVE: Rule = Rule::new(
    "chmod-permissive",
    High,
    "World-writable or setuid permissions",
    "777/o+w or setuid bits let any user change or escalate through the file.",
);
const CHOWN_SYSTEM: Rule = Rule::new(
    "chown-system-path",
    Critical,
    "Ownership change on system paths",
    "Changing the owner of operating-system files breaks the host.",
);
const PERMISSION: Rule = Rule::new(
    "permission-change",
    Medium,
    "Permission or ownership change",
    "Changes who may read, write or run files.",
);
const MOVE_SYSTEM: Rule = Rule::new(
    "move-system-path",
    Critical,
    "Moves operating-system files",
    "Moving files out of an operating-system directory breaks the host.",
);
const COPY_CREDENTIALS: Rule = Rule::new(
    "copy-credentials",
    High,
    "Copies key material",
    "Copies SSH keys or credential files to a new place.",
);
const GIT_DESTRUCTIVE: Rule = Rule::new(
    "destructive-git",
    High,
    "Destructive git operation",
    "Force-pushes, hard resets, cleans or deletes history that may not be recoverable.",
);
const GIT_CHANGE: Rule = Rule::new(
    "git-change",
    Medium,
    "Git operation that changes the repository or a remote",
    "Pushes, pulls, rebases or rewrites refs.",
);
const GIT_LOCAL: Rule = Rule::new(
    "git-local",
    Low,
    "Local git bookkeeping",
    "Stages, commits or inspects the repository; reversible.",
);
const SQL_DESTRUCTIVE: Rule = Rule::new(
    "sql-destructive",
    High,
    "Destructive SQL statement",
    "DROP/TRUNCATE/unconditional DELETE or FLUSHALL permanently delete data.",
);
const DATABASE: Rule = Rule::new(
    "database-client",
    Medium,
    "Database client session",
    "Runs statements against a database.",
);
const CONTAINER_ESCAPE: Rule = Rule::new(
    "container-host-access",
    High,
    "Container with host access",
    "A privileged container, the host's root or the Docker socket mounted gives root on the host.",
);
const CONTAINER_DATA_LOSS: Rule = Rule::new(
    "container-data-loss",
    High,
    "Deletes container volumes or images",
    "Pruning or removing volumes deletes their data.",
);
const CONTAINER: Rule = Rule::new(
    "container-operation",
    Medium,
    "Container operation",
    "Starts, stops or changes containers.",
);
const CLUSTER_DELETE: Rule = Rule::new(
    "cluster-delete",
    High,
    "Deletes cluster or cloud resources",
    "Removes infrastructure; often not recoverable.",
);
const CLOUD_CREDENTIALS: Rule = Rule::new(
    "cloud-credential-access",
    High,
    "Reads cloud or cluster secrets",
    "Prints access tokens, secret values or new access keys into the conversation.",
);
const INFRA_CHANGE: Rule = Rule::new(
    "infrastructure-change",
    Medium,
    "Infrastructure mutation",
    "Creates or changes cloud or cluster resources.",
);
const UNTRUSTED_INSTALL: Rule = Rule::new(
    "untrusted-install",
    High,
    "Package install from an unvetted source",
    "Installing from a URL, a git repository or another index bypasses the registry.",
);
const PUBLISH: Rule = Rule::new(
    "package-publish",
    High,
    "Publishes a package",
    "Uploads code to a public registry under the node's credentials.",
);
const PACKAGE_INSTALL: Rule = Rule::new(
    "package-install",
    Medium,
    "Package installation",
    "Installs software, which runs install scripts and changes the environment.",
);
const RUNS_PROJECT: Rule = Rule::new(
    "runs-project-code",
    Medium,
    "Builds or runs project code",
    "Build scripts, tests and package scripts execute code from the workspace.",
);
const RUNS_SCRIPT: Rule = Rule::new(
    "runs-script",
    Medium,
    "Script execution",
    "Runs a script or program whose content was not inspected.",
);
const INLINE_CODE: Rule = Rule::new(
    "inline-code",
    Medium,
    "Inline interpreter code",
    "Runs code given on the command line.",
);
const INLINE_CODE_DANGEROUS: Rule = Rule::new(
    "inline-code-side-effects",
    High,
    "Inline code with system access",
    "Inline code deletes files, spawns processes or opens network connections.",
);
const EVAL: Rule = Rule::new(
    "eval",
    Medium,
    "Evaluates a constructed command",
    "eval runs text as shell code.",
);
const ENV_DUMP: Rule = Rule::new(
    "environment-dump",
    Medium,
    "Prints the environment",
    "The environment may hold secrets.",
);
const ARCHIVE: Rule = Rule::new(
    "archive",
    Medium,
    "Archive operation",
    "Extracting or compressing may overwrite files.",
);
const OPENS: Rule = Rule::new(
    "opens-application",
    Medium,
    "Opens an application",
    "Launches a desktop application or URL handler.",
);
const KEY_MANAGEMENT: Rule = Rule::new(
    "key-management",
    Medium,
    "Key management",
    "Creates or loads keys.",
);
const SECRET_EXPORT: Rule = Rule::new(
    "secret-export",
    High,
    "Exports secret keys",
    "Prints private keys or keychain passwords.",
);

// --- program families ---------------------------------------------------------------------

const SHELLS: &[&str] = &[
    "sh", "bash", "zsh", "dash", "ksh", "mksh", "fish", "csh", "tcsh", "ash",
];
const INTERPRETERS: &[&str] = &[
    "python",
    "perl",
    "ruby",
    "node",
    "nodejs",
    "php",
    "lua",
    "luajit",
    "rscript",
    "pwsh",
    "powershell",
    "osascript",
    "tclsh",
    "deno",
    "bun",
];
const DOWNLOADERS: &[&str] = &[
    "curl",
    "wget",
    "fetch",
    "http",
    "https",
    "xh",
    "aria2c",
    "lwp-download",
    "nc",
    "ncat",
];
const LISTING: &[&str] = &[
    "ls", "ll", "dir", "vdir", "tree", "du", "df", "stat", "file", "exa", "eza", "lsd",
];
/// Read-only programs whose positional arguments are files read into the conversation.
const READERS: &[&str] = &[
    "cat",
    "tac",
    "nl",
    "head",
    "tail",
    "less",
    "more",
    "bat",
    "batcat",
    "wc",
    "strings",
    "xxd",
    "hexdump",
    "od",
    "sha1sum",
    "sha224sum",
    "sha256sum",
    "sha384sum",
    "sha512sum",
    "md5sum",
    "b2sum",
    "cksum",
    "sum",
    "diff",
    "cmp",
    "sort",
    "uniq",
    "cut",
    "paste",
    "join",
    "comm",
    "fold",
    "fmt",
    "expand",
    "unexpand",
    "rev",
    "column",
    "readlink",
    "realpath",
    "iconv",
    "base64",
    "base32",
    "colordiff",
    "zcat",
    "zless",
];
/// Read-only programs whose first positional argument is a pattern or program, not a file.
const PATTERN_READERS: &[&str] = &[
    "grep", "egrep", "fgrep", "rg", "ag", "ack", "awk", "gawk", "mawk", "jq", "yq", "sed", "zgrep",
];
/// Read-only programs whose arguments are not files.
const PRINTERS: &[&str] = &[
    "echo",
    "printf",
    "pwd",
    "whoami",
    "id",
    "groups",
    "date",
    "cal",
    "which",
    "whereis",
    "type",
    "man",
    "info",
    "help",
    "uname",
    "hostname",
    "uptime",
    "free",
    "nproc",
    "lscpu",
    "lsblk",
    "ps",
    "pgrep",
    "pstree",
    "seq",
    "sleep",
    "true",
    "false",
    "test",
    "[",
    "[[",
    "basename",
    "dirname",
    "tput",
    "clear",
    "locale",
    "getconf",
    "arch",
    "tty",
    "logname",
    "users",
    "who",
    "w",
    "last",
    "jobs",
    "fc",
    "history",
    "yes",
    "numfmt",
    "factor",
    "expr",
    "bc",
    "dc",
    "apropos",
    "whatis",
    "lsof",
    "ss",
    "netstat",
    "ip",
    "ifconfig",
    "dig",
    "nslookup",
    "host",
    "ping",
    "traceroute",
    "top",
    "htop",
    "vmstat",
    "iostat",
    "mpstat",
    "env-check",
    "fd",
    "fdfind",
    "locate",
    "mdfind",
    "cd",
    "pushd",
    "popd",
    "dirs",
    "alias",
    "unalias",
    "hash",
    "wait",
    "exit",
    "return",
    "shift",
    "local",
    "declare",
    "typeset",
    "readonly",
    "unset",
    "umask",
    "set",
    "shopt",
    "read",
    ":",
    "let",
    "getopts",
    "trap",
    "ulimit",
    "times",
    "disown",
    "bg",
    "fg",
    "export",
];
const PACKAGE_MANAGERS: &[&str] = &[
    "apt", "apt-get", "aptitude", "yum", "dnf", "apk", "zypper", "pacman", "brew", "port", "snap",
    "flatpak", "emerge", "nix-env", "choco", "winget", "scoop",
];
const BUILD_TOOLS: &[&str] = &[
    "make",
    "gmake",
    "cmake",
    "ninja",
    "mvn",
    "gradle",
    "gradlew",
    "dotnet",
    "just",
    "bazel",
    "bazelisk",
    "meson",
    "pytest",
    "tox",
    "nox",
    "rake",
    "mix",
    "composer",
    "swift",
    "rustc",
    "gcc",
    "g++",
    "cc",
    "c++",
    "clang",
    "clang++",
    "javac",
    "java",
    "tsc",
    "vite",
    "webpack",
    "jest",
    "vitest",
    "mocha",
    "phpunit",
    "rspec",
    "bundle",
    "sbt",
    "lein",
    "stack",
    "cabal",
    "ghc",
    "zig",
    "nim",
    "dune",
    "ocaml",
    "elixir",
    "erl",
    "kotlinc",
    "scalac",
    "go-task",
    "task",
    "nx",
    "turbo",
    "lerna",
    "rustup",
    "pre-commit",
    "ruff",
    "black",
    "isort",
    "flake8",
    "mypy",
    "pylint",
    "eslint",
    "prettier",
    "rustfmt",
    "gofmt",
    "clippy-driver",
    "shellcheck",
    "hadolint",
    "yamllint",
    "markdownlint",
];
const DATABASE_CLIENTS: &[&str] = &[
    "psql",
    "mysql",
    "mariadb",
    "sqlite3",
    "mongo",
    "mongosh",
    "redis-cli",
    "cqlsh",
    "clickhouse-client",
    "sqlcmd",
    "duckdb",
    "pg_dump",
    "pg_restore",
    "mysqldump",
    "dropdb",
    "createdb",
];
const METADATA_HOSTS: &[&str] = &[
    "169.254.169.254",
    "metadata.google.internal",
    "100.100.100.200",
    "fd00:ec2::254",
    "169.254.170.2",
];

static FORK_BOMB_RE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"([A-Za-z_:][A-Za-z0-9_:]*)\s*\(\s*\)\s*\{[^}]*\|\s*[A-Za-z_:][A-Za-z0-9_:]*\s*&")
        .ok()
});
static PROC_ENVIRON_RE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"/proc/(?:[0-9]+|self|\$\$|\$[A-Za-z_{][A-Za-z0-9_}]*|\*|thread-self)/(?:task/[^/\s]+/)?environ").ok()
});
static SQL_DESTRUCTIVE_RE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r#"(?i)(?-u:\b)(?:drop\s+(?:table|database|schema|collection)|truncate\s+(?:table\s+)?[A-Za-z_"`]|delete\s+from\s+[A-Za-z0-9_."`]+\s*(?:;|"|'|$)|flushall|flushdb|dropDatabase\s*\()"#).ok()
});
static DANGEROUS_CODE_RE: LazyLock<Option<Regex>> = LazyLock::new(|| {
    Regex::new(r"(?:rmtree|os\.remove|os\.unlink|\bunlink(?:Sync)?\s*\(|os\.system|subprocess|child_process|execSync|spawn\w*\s*\(|Runtime\.getRuntime|\bsystem\s*\(|\bexec\s*\(|socket\.|requests\.(?:post|put|delete|patch)|urllib|fs\.rm|rimraf|File\.delete|FileUtils\.rm|Popen|`[^`]+`|shell_exec|passthru|popen)").ok()
});
static QUOTED_LITERAL_RE: LazyLock<Option<Regex>> =
    LazyLock::new(|| Regex::new(r#""((?:[^"\\]|\\.){2,})"|'((?:[^'\\]|\\.){2,})'"#).ok());

fn is_match(re: &LazyLock<Option<Regex>>, text: &str) -> bool {
    re.as_ref().is_some_and(|re| re.is_match(text))
}

/// Judges a whole command line.
pub(crate) fn analyze_command_line(text: &str, ws: &Workspace) -> Vec<Finding> {
    let mut analyzer = Analyzer {
        ws,
        findings: Vec::new(),
        downloaded: Vec::new(),
    };
    let snippet = snippet(text);
    if is_match(&FORK_BOMB_RE, text) {
        analyzer.add(FORK_BOMB, &snippet);
    }
    if is_match(&PROC_ENVIRON_RE, text) {
        analyzer.add(PROC_ENVIRON, &snippet);
    }
    if is_match(&SQL_DESTRUCTIVE_RE, text) {
        analyzer.add(SQL_DESTRUCTIVE, &snippet);
    }
    analyzer.script(&parse(text), 0);
    analyzer.findings
}

/// At most 160 characters of `text` on one line, for evidence.
pub(crate) fn snippet(text: &str) -> String {
    let one_line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    let mut out: String = one_line.chars().take(160).collect();
    if one_line.chars().count() > 160 {
        out.push('…');
    }
    out
}

/// A simple command seen through its wrappers: `sudo -u x env A=1 nice -n 5 rm -rf /` is
/// program `rm`, arguments `-rf /`, privileged by `sudo`.
struct Command<'a> {
    /// The program's file name (`/usr/bin/rm` → `rm`), lower-cased.
    program: String,
    /// The program word as written (`./install.sh`).
    program_word: &'a str,
    args: Vec<&'a str>,
    privileged: Option<&'a str>,
    text: String,
}

impl<'a> Command<'a> {
    fn of(words: &'a [String]) -> Option<Self> {
        let text = snippet(&words.join(" "));
        let mut i = 0;
        let mut privileged = None;
        while i < words.len() {
            let word = words[i].as_str();
            let name = base_name(word);
            if is_assignment(word) {
                i += 1;
                continue;
            }
            match name.as_str() {
                "sudo" | "doas" | "pkexec" | "runuser" => {
                    privileged = Some(word);
                    i += 1;
                    while i < words.len() && words[i].starts_with('-') {
                        let takes_value = matches!(
                            words[i].as_str(),
                            "-u" | "-g"
                                | "-h"
                                | "-C"
                                | "-D"
                                | "-p"
                                | "-r"
                                | "-t"
                                | "-U"
                                | "-T"
                                | "--user"
                                | "--group"
                        );
                        i += if takes_value { 2 } else { 1 };
                    }
                }
                "env" => {
                    i += 1;
                    while i < words.len() && (words[i].starts_with('-') || is_assignment(&words[i]))
                    {
                        let takes_value = matches!(
                            words[i].as_str(),
                            "-u" | "--unset" | "-C" | "--chdir" | "-S"
                        );
                        i += if takes_value { 2 } else { 1 };
                    }
                }
                "nohup" | "time" | "command" | "builtin" | "exec" | "unbuffer" | "caffeinate"
                | "catchsegv" | "setsid" | "chronic" => {
                    i += 1;
                    while i < words.len() && words[i].starts_with('-') {
                        i += 1;
                    }
                }
                "nice" | "ionice" | "stdbuf" | "taskset" | "chrt" => {
                    i += 1;
                    while i < words.len() && words[i].starts_with('-') {
                        let takes_value =
                            matches!(words[i].as_str(), "-n" | "-c" | "-p" | "-o" | "-e" | "-i");
                        i += if takes_value { 2 } else { 1 };
                    }
                    if matches!(name.as_str(), "taskset" | "chrt") && i < words.len() {
                        i += 1;
                    }
                }
                "timeout" | "watch" => {
                    i += 1;
                    while i < words.len() && words[i].starts_with('-') {
                        let takes_value = matches!(
                            words[i].as_str(),
                            "-s" | "-k" | "-n" | "--signal" | "--kill-after" | "--interval"
                        );
                        i += if takes_value { 2 } else { 1 };
                    }
                    if name == "timeout" && i < words.len() {
                        i += 1; // the duration
                    }
                }
                "xargs" => {
                    i += 1;
                    while i < words.len() && words[i].starts_with('-') {
                        let takes_value = matches!(
                            words[i].as_str(),
                            "-I" | "-n" | "-P" | "-d" | "-L" | "-s" | "-a" | "-E" | "-i"
                        );
                        i += if takes_value { 2 } else { 1 };
                    }
                }
                _ => break,
            }
        }
        let program_word = words.get(i)?.as_str();
        Some(Self {
            program: base_name(program_word),
            program_word,
            args: words[i + 1..].iter().map(String::as_str).collect(),
            privileged,
            text,
        })
    }

    /// The arguments that are not options (`--` ends options).
    fn positional(&self) -> Vec<&'a str> {
        let mut out = Vec::new();
        let mut options_done = false;
        for arg in &self.args {
            if !options_done && *arg == "--" {
                options_done = true;
            } else if options_done || !arg.starts_with('-') || *arg == "-" {
                out.push(*arg);
            }
        }
        out
    }

    fn has_flag(&self, flags: &[&str]) -> bool {
        self.args.iter().any(|a| flags.contains(a))
    }

    /// A short flag letter given alone or in a bundle (`-rf` has `r` and `f`).
    fn has_short(&self, letter: char) -> bool {
        self.args.iter().any(|a| {
            a.starts_with('-') && !a.starts_with("--") && a.len() > 1 && a[1..].contains(letter)
        })
    }

    /// The value of an option given as `-o X`, `-oX`, `--output X` or `--output=X`.
    fn option_value(&self, short: Option<&str>, long: Option<&str>) -> Option<&'a str> {
        let mut iter = self.args.iter().copied().peekable();
        while let Some(arg) = iter.next() {
            if let Some(s) = short {
                if arg == s {
                    return iter.peek().copied();
                }
                if arg.starts_with(s) && !arg.starts_with("--") && arg.len() > s.len() {
                    return Some(&arg[s.len()..]);
                }
            }
            if let Some(l) = long {
                if arg == l {
                    return iter.peek().copied();
                }
                if let Some(value) = arg.strip_prefix(l).and_then(|rest| rest.strip_prefix('=')) {
                    return Some(value);
                }
            }
        }
        None
    }

    /// The first positional argument (a subcommand) and the arguments after it.
    fn subcommand(&self) -> (&'a str, Vec<&'a str>) {
        match self.args.iter().position(|a| !a.starts_with('-')) {
            Some(i) => (self.args[i], self.args[i + 1..].to_vec()),
            None => ("", self.args.clone()),
        }
    }
}

fn is_assignment(word: &str) -> bool {
    match word.split_once('=') {
        Some((name, _)) => {
            !name.is_empty()
                && name
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        }
        None => false,
    }
}

/// `/usr/bin/Python3.12` → `python3.12`.
fn base_name(word: &str) -> String {
    word.rsplit('/').next().unwrap_or(word).to_ascii_lowercase()
}

/// `python3.12` → `python`; `pip3` → `pip`.
fn family(program: &str) -> &str {
    program.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.')
}

fn is_shell(program: &str) -> bool {
    SHELLS.contains(&program)
}

fn is_interpreter(program: &str) -> bool {
    INTERPRETERS.contains(&family(program))
}

fn is_downloader(cmd: &Command<'_>) -> bool {
    DOWNLOADERS.contains(&cmd.program.as_str())
}

fn is_decoder(cmd: &Command<'_>) -> bool {
    match cmd.program.as_str() {
        "base64" | "base32" => cmd.has_flag(&["-d", "--decode", "-D"]),
        "xxd" => cmd.has_flag(&["-r", "-revert"]),
        "openssl" => cmd.has_flag(&["-d", "-base64", "-a"]),
        "uudecode" | "gunzip" | "zcat" | "bunzip2" | "unxz" | "xzcat" | "bzcat" | "zstdcat" => true,
        "gzip" | "xz" | "bzip2" | "zstd" => cmd.has_flag(&["-d", "--decompress"]),
        "rev" | "tr" => true,
        _ => false,
    }
}

/// A shell or interpreter that takes its program from stdin (no `-c`, no script file).
fn reads_program_from_stdin(cmd: &Command<'_>) -> bool {
    !cmd.has_flag(&["-c", "-e", "-E", "-r", "--eval", "-m"])
        && cmd.positional().iter().all(|a| *a == "-")
}

struct Analyzer<'a> {
    ws: &'a Workspace,
    findings: Vec<Finding>,
    /// File names fetched from the network so far in this command line.
    downloaded: Vec<String>,
}

impl Analyzer<'_> {
    fn add(&mut self, rule: Rule, evidence: &str) {
        self.findings.push(Finding {
            rule,
            evidence: evidence.to_owned(),
        });
    }

    fn script(&mut self, script: &Script, depth: usize) {
        if script.truncated {
            self.add(TRUNCATED, "command line truncated for analysis");
        }
        for pipeline in &script.pipelines {
            self.pipeline(pipeline, depth);
        }
    }

    fn pipeline(&mut self, pipeline: &Pipeline, depth: usize) {
        let views: Vec<Option<Command<'_>>> = pipeline
            .commands
            .iter()
            .map(|c| Command::of(&c.words))
            .collect();
        for (raw, view) in pipeline.commands.iter().zip(&views) {
            self.simple_command(raw, view.as_ref(), depth);
        }
        for (j, stage) in views.iter().enumerate().skip(1) {
            let Some(stage) = stage else { continue };
            if !reads_program_from_stdin(stage) {
                continue;
            }
            let earlier = || views[..j].iter().flatten();
            if is_shell(&stage.program) {
                if earlier().any(is_downloader) {
                    self.add(PIPE_TO_SHELL, &stage.text);
                } else if earlier().any(is_decoder) {
                    self.add(DECODE_TO_SHELL, &stage.text);
                } else {
                    self.add(PIPE_INTO_SHELL, &stage.text);
                }
            } else if is_interpreter(&stage.program) {
                if earlier().any(is_downloader) {
                    self.add(DOWNLOAD_INTO_INTERPRETER, &stage.text);
                } else if earlier().any(is_decoder) {
                    self.add(DECODE_TO_SHELL, &stage.text);
                } else {
                    self.add(INLINE_CODE, &stage.text);
                }
            }
        }
    }

    fn simple_command(&mut self, raw: &SimpleCommand, cmd: Option<&Command<'_>>, depth: usize) {
        for redirect in &raw.redirects {
            let facts = self.ws.facts(&redirect.target);
            let evidence = format!(
                "{} {}",
                if redirect.writes { ">" } else { "<" },
                redirect.target
            );
            if redirect.writes {
                if let Some(rule) = write_risk(&facts) {
                    self.add(rule, &evidence);
                }
            } else {
                let rule = read_risk(&facts);
                if rule.level >= Medium {
                    self.add(rule, &evidence);
                }
            }
        }
        for nested in &raw.nested {
            self.script(nested, depth + 1);
        }
        let Some(cmd) = cmd else {
            return;
        };
        if let Some(wrapper) = cmd.privileged {
            self.add(PRIVILEGE, &format!("{wrapper}: {}", cmd.text));
        }
        // A shell (or `source`/`eval`) running the output of a download.
        if (is_shell(&cmd.program) || matches!(cmd.program.as_str(), "source" | "." | "eval"))
            && raw.nested.iter().any(script_downloads)
        {
            self.add(DOWNLOAD_SUBSTITUTION, &cmd.text);
        }
        if is_shell(&cmd.program) {
            for body in &raw.heredocs {
                self.script(&parse_nested(body, depth + 1), depth + 1);
            }
        }
        self.program(cmd, depth);
    }

    fn program(&mut self, cmd: &Command<'_>, depth: usize) {
        let program = cmd.program.as_str();
        if self.runs_downloaded(cmd) {
            self.add(DOWNLOAD_EXEC, &cmd.text);
        }
        match program {
            "rm" | "rmdir" | "unlink" | "shred" | "srm" | "wipe" | "trash" | "trash-put" => {
                self.removal(cmd)
            }
            "find" => self.find(cmd, depth),
            "dd" => self.dd(cmd),
            "mkswap" | "wipefs" | "mke2fs" | "mkfs" => self.add(DISK_FORMAT, &cmd.text),
            p if p.starts_with("mkfs.") => self.add(DISK_FORMAT, &cmd.text),
            "fdisk" | "sfdisk" | "parted" | "gdisk" | "cfdisk" | "sgdisk" | "cryptsetup" => {
                if cmd.has_flag(&["-l", "--list", "print"]) {
                    self.add(READ_ONLY, &cmd.text);
                } else {
                    self.add(PARTITION, &cmd.text);
                }
            }
            "chmod" => self.chmod(cmd),
            "chown" | "chgrp" => self.chown(cmd),
            "mv" | "cp" | "ln" | "install" | "rsync" => self.copy_or_move(cmd),
            "scp" | "sftp" => self.remote_copy(cmd),
            "curl" | "wget" | "fetch" | "http" | "https" | "xh" | "aria2c" | "lwp-download" => {
                self.download(cmd)
            }
            "ssh" | "mosh" | "telnet" | "ssh-copy-id" | "rlogin" => {
                self.add(REMOTE_ACCESS, &cmd.text)
            }
            "nc" | "ncat" | "netcat" | "socat" => {
                let exec = cmd.has_flag(&["-e", "-c", "--exec", "--sh-exec"])
                    || cmd.args.iter().any(|a| {
                        a.to_ascii_lowercase().starts_with("exec:")
                            || a.to_ascii_lowercase().starts_with("system:")
                    });
                self.add(if exec { REVERSE_SHELL } else { REMOTE_ACCESS }, &cmd.text);
            }
            "su" => {
                self.add(PRIVILEGE, &cmd.text);
                if let Some(code) = cmd.option_value(Some("-c"), Some("--command")) {
                    self.script(&parse_nested(code, depth + 1), depth + 1);
                }
            }
            "kill" => {
                let force = cmd
                    .args
                    .iter()
                    .any(|a| matches!(*a, "-9" | "-KILL" | "-SIGKILL" | "-kill"))
                    || cmd
                        .option_value(Some("-s"), None)
                        .is_some_and(|s| s.eq_ignore_ascii_case("KILL") || s == "9");
                self.add(if force { KILL_FORCE } else { KILL }, &cmd.text);
            }
            "killall" | "pkill" | "killall5" => self.add(KILL_FORCE, &cmd.text),
            "shutdown" | "reboot" | "halt" | "poweroff" => self.add(POWER, &cmd.text),
            "init" | "telinit" => {
                if cmd.args.iter().any(|a| matches!(*a, "0" | "6")) {
                    self.add(POWER, &cmd.text);
                } else {
                    self.add(SERVICE_CHANGE, &cmd.text);
                }
            }
            "systemctl" => {
                let (sub, _) = cmd.subcommand();
                if sub.is_empty()
                    || sub == "status"
                    || sub == "show"
                    || sub == "cat"
                    || sub == "help"
                    || sub.starts_with("list-")
                    || sub.starts_with("is-")
                {
                    self.add(READ_ONLY, &cmd.text);
                } else if matches!(
                    sub,
                    "poweroff" | "reboot" | "halt" | "kexec" | "suspend" | "hibernate"
                ) {
                    self.add(POWER, &cmd.text);
                } else {
                    self.add(SERVICE_CHANGE, &cmd.text);
                }
            }
            "service" | "rc-service" => {
                if cmd
                    .args
                    .iter()
                    .any(|a| matches!(*a, "status" | "--status-all"))
                {
                    self.add(READ_ONLY, &cmd.text);
                } else {
                    self.add(SERVICE_CHANGE, &cmd.text);
                }
            }
            "launchctl" => {
                let (sub, _) = cmd.subcommand();
                if matches!(sub, "list" | "print" | "help" | "version" | "") {
                    self.add(READ_ONLY, &cmd.text);
                } else {
                    self.add(SERVICE_CHANGE, &cmd.text);
                }
            }
            "crontab" => {
                if cmd.has_flag(&["-l"]) {
                    self.add(READ_ONLY, &cmd.text);
                } else {
                    self.add(SERVICE_CHANGE, &cmd.text);
                }
            }
            "at" | "batch" => self.add(SERVICE_CHANGE, &cmd.text),
            "iptables" | "ip6tables" | "nft" | "ufw" | "firewall-cmd" | "pfctl" => {
                if cmd.has_flag(&["-L", "-S", "--list", "--list-all", "list", "status", "-s"])
                    || cmd.args.first() == Some(&"status")
                {
                    self.add(READ_ONLY, &cmd.text);
                } else {
                    self.add(SYSTEM_CONFIG, &cmd.text);
                }
            }
            "mount"
            | "umount"
            | "swapon"
            | "swapoff"
            | "modprobe"
            | "insmod"
            | "rmmod"
            | "setenforce"
            | "chattr"
            | "useradd"
            | "userdel"
            | "usermod"
            | "passwd"
            | "chpasswd"
            | "groupadd"
            | "groupdel"
            | "visudo"
            | "adduser"
            | "deluser"
            | "update-alternatives"
            | "ldconfig"
            | "grub-install"
            | "update-grub"
            | "dscl"
            | "csrutil"
            | "nvram"
            | "bless" => {
                if program == "mount" && cmd.args.is_empty() {
                    self.add(READ_ONLY, &cmd.text);
                } else {
                    self.add(SYSTEM_CONFIG, &cmd.text);
                }
            }
            "sysctl" => {
                if cmd.has_flag(&["-w", "--write", "-p", "--load"])
                    || cmd.args.iter().any(|a| a.contains('='))
                {
                    self.add(SYSTEM_CONFIG, &cmd.text);
                } else {
                    self.add(READ_ONLY, &cmd.text);
                }
            }
            "git" => self.git(cmd),
            "docker" | "podman" | "nerdctl" | "docker-compose" | "podman-compose" => {
                self.container(cmd)
            }
            "kubectl" | "oc" | "k3s" | "microk8s" => self.kubectl(cmd),
            "helm" => self.helm(cmd),
            "terraform" | "tofu" | "terragrunt" | "pulumi" | "cdk" | "serverless" | "sls" => {
                self.terraform(cmd)
            }
            "aws" => self.aws(cmd),
            "gcloud" | "gsutil" | "az" | "doctl" | "flyctl" | "fly" | "heroku" | "vercel"
            | "netlify" | "wrangler" | "oci" | "ibmcloud" => self.cloud_cli(cmd),
            "pip" | "pipx" | "uv" | "poetry" | "conda" | "mamba" | "micromamba" | "pdm"
            | "hatch" | "rye" | "easy_install" => self.python_packages(cmd),
            "npm" | "pnpm" | "yarn" | "bun" => self.js_packages(cmd),
            "npx" | "pnpx" | "bunx" => self.add(RUNS_PROJECT, &cmd.text),
            "cargo" => self.cargo(cmd),
            "go" => self.go(cmd),
            "gem" | "cpan" | "cpanm" | "luarocks" | "opam" | "nuget" | "dotnet-install" => {
                let (sub, rest) = cmd.subcommand();
                if matches!(sub, "install" | "i") && rest.iter().any(|a| a.contains("://")) {
                    self.add(UNTRUSTED_INSTALL, &cmd.text);
                } else if matches!(sub, "list" | "search" | "info" | "show" | "outdated" | "") {
                    self.add(READ_ONLY, &cmd.text);
                } else if sub == "push" || sub == "publish" {
                    self.add(PUBLISH, &cmd.text);
                } else {
                    self.add(PACKAGE_INSTALL, &cmd.text);
                }
            }
            p if PACKAGE_MANAGERS.contains(&p) => {
                let (sub, _) = cmd.subcommand();
                if matches!(
                    sub,
                    "search"
                        | "show"
                        | "list"
                        | "info"
                        | "policy"
                        | "madison"
                        | "depends"
                        | "rdepends"
                        | "desc"
                        | "outdated"
                        | "doctor"
                        | "config"
                        | "--version"
                        | ""
                ) {
                    self.add(READ_ONLY, &cmd.text);
                } else {
                    self.add(PACKAGE_INSTALL, &cmd.text);
                }
            }
            p if BUILD_TOOLS.contains(&p) => self.add(RUNS_PROJECT, &cmd.text),
            p if DATABASE_CLIENTS.contains(&p) => {
                if matches!(p, "dropdb") {
                    self.add(SQL_DESTRUCTIVE, &cmd.text);
                } else {
                    self.add(DATABASE, &cmd.text);
                }
            }
            p if is_shell(p) => self.shell(cmd, depth),
            "eval" => {
                self.add(EVAL, &cmd.text);
                self.script(&parse_nested(&cmd.args.join(" "), depth + 1), depth + 1);
            }
            "source" | "." => self.add(RUNS_SCRIPT, &cmd.text),
            p if is_interpreter(p) => self.interpreter(cmd, depth),
            "env" | "printenv" => {
                if cmd.positional().is_empty() {
                    self.add(ENV_DUMP, &cmd.text);
                } else {
                    self.add(READ_ONLY, &cmd.text);
                }
            }
            "sed"
                if cmd.has_flag(&["-i", "--in-place"])
                    || cmd
                        .args
                        .iter()
                        .any(|a| a.starts_with("-i") && !a.starts_with("--")) =>
            {
                for path in cmd.positional().iter().skip(1) {
                    self.write_to(path);
                }
            }
            "tee" | "touch" | "mkdir" | "truncate" | "mkfifo" | "mktemp" => {
                let targets = cmd.positional();
                if targets.is_empty() {
                    self.add(BENIGN, &cmd.text);
                }
                for path in targets {
                    if program == "truncate" {
                        self.add(RM_WORKSPACE, &cmd.text);
                    }
                    self.write_to(path);
                }
            }
            "tar" | "unzip" | "zip" | "gzip" | "gunzip" | "bzip2" | "bunzip2" | "xz" | "unxz"
            | "7z" | "7za" | "unrar" | "zstd" | "cpio" => {
                if cmd.has_flag(&["-t", "--list", "-l"])
                    || cmd.args.first().is_some_and(|a| {
                        !a.starts_with('-')
                            && a.contains('t')
                            && !a.contains('x')
                            && !a.contains('c')
                    })
                {
                    self.add(READ_ONLY, &cmd.text);
                } else {
                    self.add(ARCHIVE, &cmd.text);
                    for dir in [
                        cmd.option_value(Some("-C"), Some("--directory")),
                        cmd.option_value(Some("-d"), None),
                    ]
                    .into_iter()
                    .flatten()
                    {
                        self.write_to(dir);
                    }
                }
            }
            "open" | "xdg-open" | "gio" | "start" => self.add(OPENS, &cmd.text),
            "ssh-keygen" | "ssh-add" | "ssh-agent" | "openssl" | "certbot" | "step" | "age"
            | "age-keygen" => self.add(KEY_MANAGEMENT, &cmd.text),
            "gpg" | "gpg2" => {
                if cmd.args.iter().any(|a| a.starts_with("--export-secret")) {
                    self.add(SECRET_EXPORT, &cmd.text);
                } else {
                    self.add(KEY_MANAGEMENT, &cmd.text);
                }
            }
            "security" => {
                if cmd
                    .args
                    .iter()
                    .any(|a| a.starts_with("find-") || *a == "dump-keychain" || *a == "export")
                {
                    self.add(SECRET_EXPORT, &cmd.text);
                } else {
                    self.add(KEY_MANAGEMENT, &cmd.text);
                }
            }
            p if LISTING.contains(&p) => self.add(READ_ONLY, &cmd.text),
            p if READERS.contains(&p) => self.read_files(cmd, cmd.positional()),
            p if PATTERN_READERS.contains(&p) => {
                let positional = cmd.positional();
                let files = if cmd.has_flag(&["-e", "-f", "--regexp", "--file"]) {
                    positional
                } else {
                    positional.into_iter().skip(1).collect()
                };
                if matches!(p, "awk" | "gawk" | "mawk")
                    && cmd.args.iter().any(|a| {
                        a.contains("system(") || a.contains("| getline") || a.contains("print >")
                    })
                {
                    self.add(INLINE_CODE, &cmd.text);
                }
                self.read_files(cmd, files);
            }
            p if PRINTERS.contains(&p) => self.add(READ_ONLY, &cmd.text),
            _ => {
                if cmd.args.len() == 1
                    && matches!(
                        cmd.args[0],
                        "--version" | "-V" | "--help" | "-h" | "version" | "help"
                    )
                {
                    self.add(READ_ONLY, &cmd.text);
                } else if cmd.program_word.contains('/') {
                    self.add(RUNS_SCRIPT, &cmd.text);
                } else {
                    self.add(UNKNOWN, &cmd.text);
                }
            }
        }
    }

    fn write_to(&mut self, path: &str) {
        let facts = self.ws.facts(path);
        if let Some(rule) = write_risk(&facts) {
            self.add(rule, path);
        }
    }

    fn read_files(&mut self, cmd: &Command<'_>, files: Vec<&str>) {
        self.add(READ_ONLY, &cmd.text);
        for file in files {
            let rule = read_risk(&self.ws.facts(file));
            // Reading outside the workspace from the shell is what `ls` and `cat` do all
            // day; only sensitive targets raise the level.
            if rule.level >= Medium && rule.name != "outside-workspace-read" {
                self.add(rule, file);
            }
        }
    }

    fn removal(&mut self, cmd: &Command<'_>) {
        if cmd.has_flag(&["--no-preserve-root"]) {
            self.add(NO_PRESERVE_ROOT, &cmd.text);
        }
        let recursive = cmd.program == "rmdir"
            || cmd.has_short('r')
            || cmd.has_short('R')
            || cmd.has_flag(&["--recursive"]);
        let targets = cmd.positional();
        if targets.is_empty() {
            self.add(RM_WORKSPACE, &cmd.text);
        }
        for target in targets {
            let facts = self.ws.facts(target);
            self.removal_of(&facts, recursive, target);
        }
    }

    fn removal_of(&mut self, facts: &PathFacts, recursive: bool, target: &str) {
        let rule = if facts.is_root || facts.is_home || facts.system || facts.block_device {
            RM_SYSTEM
        } else if facts.credential || facts.ssh {
            RM_CREDENTIALS
        } else if facts.unresolved || !facts.inside_workspace {
            if recursive {
                RM_RECURSIVE_OUTSIDE
            } else {
                RM_OUTSIDE
            }
        } else if facts.is_workspace_root && recursive {
            RM_WORKSPACE_ROOT
        } else {
            RM_WORKSPACE
        };
        self.add(rule, target);
    }

    fn find(&mut self, cmd: &Command<'_>, depth: usize) {
        let starts: Vec<&str> = cmd
            .args
            .iter()
            .take_while(|a| !a.starts_with('-') && **a != "(" && **a != "!")
            .copied()
            .collect();
        let starts = if starts.is_empty() { vec!["."] } else { starts };
        let mut acted = false;
        if cmd.has_flag(&["-delete"]) {
            acted = true;
            for start in &starts {
                let facts = self.ws.facts(start);
                self.removal_of(&facts, true, start);
            }
        }
        let mut i = 0;
        while i < cmd.args.len() {
            if matches!(cmd.args[i], "-exec" | "-execdir" | "-ok" | "-okdir") {
                acted = true;
                let mut words = Vec::new();
                i += 1;
                while i < cmd.args.len() && !matches!(cmd.args[i], ";" | "+" | "\\;") {
                    words.push(if cmd.args[i] == "{}" {
                        starts[0].to_owned()
                    } else {
                        cmd.args[i].to_owned()
                    });
                    i += 1;
                }
                if depth < MAX_NESTING {
                    let raw = SimpleCommand {
                        words,
                        ..SimpleCommand::default()
                    };
                    let view = Command::of(&raw.words);
                    self.simple_command(&raw, view.as_ref(), depth + 1);
                }
            }
            i += 1;
        }
        if !acted {
            self.add(READ_ONLY, &cmd.text);
        }
    }

    fn dd(&mut self, cmd: &Command<'_>) {
        let mut judged = false;
        if let Some(output) = dd_operand(&cmd.args, "of=") {
            let facts = self.ws.facts(output);
            if facts.block_device {
                self.add(DEVICE_WRITE, &cmd.text);
                judged = true;
            } else if let Some(rule) = write_risk(&facts) {
                self.add(rule, output);
            }
        }
        if let Some(input) = dd_operand(&cmd.args, "if=") {
            let facts = self.ws.facts(input);
            if facts.block_device {
                self.add(DEVICE_READ, &cmd.text);
                judged = true;
            }
        }
        if !judged {
            self.add(DD, &cmd.text);
        }
    }

    fn chmod(&mut self, cmd: &Command<'_>) {
        let positional = cmd.positional();
        let Some((mode, targets)) = positional.split_first() else {
            self.add(PERMISSION, &cmd.text);
            return;
        };
        let recursive = cmd.has_short('R') || cmd.has_flag(&["--recursive"]);
        let octal_setuid = mode.len() == 4
            && mode.chars().all(|c| c.is_ascii_digit())
            && matches!(mode.chars().next(), Some('2' | '4' | '6' | '7'));
        let permissive = mode.contains("777")
            || mode.ends_with("666")
            || mode.contains("o+w")
            || mode.contains("a+w")
            || mode.contains("a+rwx")
            || mode.contains("+s")
            || octal_setuid;
        let downloaded = targets.iter().any(|t| self.is_downloaded(t));
        if downloaded && (mode.contains('x') || mode.chars().all(|c| c.is_ascii_digit())) {
            self.add(CHMOD_DOWNLOADED, &cmd.text);
        }
        let mut worst = None;
        for target in targets {
            let facts = self.ws.facts(target);
            let rule = if facts.is_root || facts.system || facts.is_home {
                if recursive || permissive {
                    CHMOD_SYSTEM
                } else {
                    PERMISSION
                }
            } else if permissive {
                CHMOD_PERMISSIVE
            } else if facts.unresolved || !facts.inside_workspace {
                PERMISSION
            } else {
                BENIGN
            };
            worst = Some(rule);
            self.add(rule, target);
        }
        if worst.is_none() {
            self.add(PERMISSION, &cmd.text);
        }
    }

    fn chown(&mut self, cmd: &Command<'_>) {
        let recursive = cmd.has_short('R') || cmd.has_flag(&["--recursive"]);
        let positional = cmd.positional();
        let mut any = false;
        for target in positional.iter().skip(1) {
            any = true;
            let facts = self.ws.facts(target);
            let rule = if facts.is_root || (facts.system && recursive) || facts.is_home && recursive
            {
                CHOWN_SYSTEM
            } else {
                PERMISSION
            };
            self.add(rule, target);
        }
        if !any {
            self.add(PERMISSION, &cmd.text);
        }
    }

    fn copy_or_move(&mut self, cmd: &Command<'_>) {
        let positional = cmd.positional();
        if cmd.program == "rsync" && positional.iter().any(|a| is_remote_spec(a)) {
            self.remote_copy(cmd);
            return;
        }
        let target_dir = cmd.option_value(Some("-t"), Some("--target-directory"));
        let (sources, dest): (Vec<&str>, Option<&str>) = match target_dir {
            Some(dir) => (positional.clone(), Some(dir)),
            None if positional.len() >= 2 => (
                positional[..positional.len() - 1].to_vec(),
                positional.last().copied(),
            ),
            None => (positional.clone(), None),
        };
        match dest {
            Some(dest) => self.write_to(dest),
            None => self.add(RUNS_SCRIPT, &cmd.text),
        }
        if cmd.program == "rsync" && cmd.args.iter().any(|a| a.starts_with("--delete")) {
            self.add(RM_WORKSPACE, &cmd.text);
        }
        for source in sources {
            let facts = self.ws.facts(source);
            if facts.proc_environ {
                self.add(PROC_ENVIRON, source);
            } else if cmd.program == "mv" && (facts.is_root || facts.system || facts.is_home) {
                self.add(MOVE_SYSTEM, source);
            } else if facts.credential || facts.ssh {
                self.add(
                    if cmd.program == "mv" {
                        RM_CREDENTIALS
                    } else {
                        COPY_CREDENTIALS
                    },
                    source,
                );
            } else if cmd.program == "mv" && (facts.unresolved || !facts.inside_workspace) {
                self.add(RM_OUTSIDE, source);
            }
        }
    }

    fn remote_copy(&mut self, cmd: &Command<'_>) {
        let mut exfil = false;
        for arg in cmd.positional() {
            if !is_remote_spec(arg) {
                let facts = self.ws.facts(arg);
                if facts.credential || facts.ssh || facts.proc_environ || facts.secret_file {
                    exfil = true;
                }
            }
        }
        self.add(
            if exfil {
                EXFIL_CREDENTIAL
            } else {
                REMOTE_ACCESS
            },
            &cmd.text,
        );
    }

    fn download(&mut self, cmd: &Command<'_>) {
        let urls: Vec<&str> = cmd
            .positional()
            .into_iter()
            .filter(|a| a.contains("://") || a.contains('.'))
            .collect();
        if urls
            .iter()
            .chain(cmd.args.iter())
            .any(|u| METADATA_HOSTS.iter().any(|h| u.contains(h)))
        {
            self.add(METADATA, &cmd.text);
        }
        let method = cmd
            .option_value(Some("-X"), Some("--request"))
            .or_else(|| cmd.option_value(None, Some("--method")));
        let mutating_method = method
            .is_some_and(|m| !m.eq_ignore_ascii_case("GET") && !m.eq_ignore_ascii_case("HEAD"));
        let data_flags = [
            "-d",
            "--data",
            "--data-raw",
            "--data-binary",
            "--data-urlencode",
            "--json",
            "-F",
            "--form",
            "--form-string",
            "-T",
            "--upload-file",
            "--post-data",
            "--post-file",
            "--body-data",
            "--body-file",
        ];
        let mut sends_data = mutating_method;
        let mut exfil = false;
        let mut iter = cmd.args.iter().copied().peekable();
        while let Some(arg) = iter.next() {
            let (flag, inline) = match arg.split_once('=') {
                Some((f, v)) if f.starts_with("--") => (f, Some(v)),
                _ => (arg, None),
            };
            if data_flags.contains(&flag) {
                sends_data = true;
                let value = inline.or_else(|| iter.peek().copied()).unwrap_or("");
                let file = if flag == "-T"
                    || flag == "--upload-file"
                    || flag == "--post-file"
                    || flag == "--body-file"
                {
                    Some(value)
                } else {
                    value
                        .split_once('@')
                        .map(|(_, f)| f)
                        .filter(|_| value.starts_with('@') || value.contains("=@"))
                };
                if let Some(file) = file {
                    let facts = self.ws.facts(file.trim_start_matches('@'));
                    if facts.credential || facts.ssh || facts.secret_file || facts.proc_environ {
                        exfil = true;
                    }
                }
            }
        }
        if exfil {
            self.add(EXFIL_CREDENTIAL, &cmd.text);
        } else if sends_data {
            self.add(HTTP_MUTATION, &cmd.text);
        }
        // Where the download lands.
        let output = match cmd.program.as_str() {
            "wget" => cmd.option_value(Some("-O"), Some("--output-document")),
            _ => cmd.option_value(Some("-o"), Some("--output")),
        };
        match output {
            Some("-") | Some("/dev/stdout") => {}
            Some(file) => {
                self.downloaded.push(base_name(file));
                self.write_to(file);
            }
            None => {
                let remote_name = cmd.program == "wget"
                    || cmd.has_flag(&["-O", "--remote-name", "--remote-name-all"]);
                if remote_name {
                    for &url in &urls {
                        let name = url
                            .split(['?', '#'])
                            .next()
                            .unwrap_or(url)
                            .rsplit('/')
                            .next()
                            .unwrap_or("");
                        if !name.is_empty() {
                            self.downloaded.push(name.to_ascii_lowercase());
                        }
                    }
                }
            }
        }
        self.add(NETWORK_FETCH, &cmd.text);
    }

    fn is_downloaded(&self, path: &str) -> bool {
        let name = base_name(path);
        !name.is_empty() && self.downloaded.contains(&name)
    }

    /// Whether the command runs a file downloaded earlier in this command line.
    fn runs_downloaded(&self, cmd: &Command<'_>) -> bool {
        if self.downloaded.is_empty() {
            return false;
        }
        if cmd.program_word.contains('/') && self.is_downloaded(cmd.program_word) {
            return true;
        }
        (is_shell(&cmd.program)
            || is_interpreter(&cmd.program)
            || matches!(cmd.program.as_str(), "source" | "."))
            && cmd
                .positional()
                .first()
                .is_some_and(|script| self.is_downloaded(script))
    }

    fn shell(&mut self, cmd: &Command<'_>, depth: usize) {
        if let Some(code) = cmd.option_value(Some("-c"), None) {
            self.script(&parse_nested(code, depth + 1), depth + 1);
        } else if cmd.has_short('c') {
            // `bash -lc '…'`: the script is the first positional argument.
            if let Some(code) = cmd.positional().first() {
                self.script(&parse_nested(code, depth + 1), depth + 1);
            }
        } else if cmd.positional().first().is_some_and(|a| *a != "-") {
            self.add(RUNS_SCRIPT, &cmd.text);
        }
        // Reading the program from stdin is judged by the pipeline or the heredoc.
    }

    fn interpreter(&mut self, cmd: &Command<'_>, depth: usize) {
        let code = ["-c", "-e", "-E", "-r", "--eval", "-p", "--print"]
            .iter()
            .find_map(|&flag| {
                cmd.option_value(Some(flag), None)
                    .filter(|_| cmd.has_flag(&[flag]))
            });
        if let Some(code) = code {
            if is_match(&DANGEROUS_CODE_RE, code) {
                self.add(INLINE_CODE_DANGEROUS, &cmd.text);
                // Commands handed to os.system/subprocess are shell commands: judge them too.
                if let Some(re) = QUOTED_LITERAL_RE.as_ref() {
                    for literal in re.captures_iter(code) {
                        if let Some(text) = literal.get(1).or_else(|| literal.get(2)) {
                            let before = self.findings.len();
                            self.script(&parse_nested(text.as_str(), depth + 1), depth + 1);
                            // Only what the literal adds beyond "unknown command" counts.
                            let added: Vec<Finding> = self
                                .findings
                                .drain(before..)
                                .filter(|f| f.rule.level > Medium)
                                .collect();
                            self.findings.extend(added);
                        }
                    }
                }
            } else {
                self.add(INLINE_CODE, &cmd.text);
            }
            return;
        }
        if let Some(module) = cmd.option_value(Some("-m"), None) {
            let module = module.to_ascii_lowercase();
            if module == "pip" {
                let args: Vec<String> = std::iter::once("pip".to_owned())
                    .chain(
                        cmd.args
                            .iter()
                            .skip_while(|a| **a != "-m")
                            .skip(2)
                            .map(|a| (*a).to_owned()),
                    )
                    .collect();
                if let Some(view) = Command::of(&args) {
                    self.python_packages(&view);
                }
            } else if matches!(
                module.as_str(),
                "json.tool" | "site" | "platform" | "sysconfig"
            ) {
                self.add(READ_ONLY, &cmd.text);
            } else {
                self.add(RUNS_PROJECT, &cmd.text);
            }
            return;
        }
        if cmd.args.len() == 1 && matches!(cmd.args[0], "--version" | "-V" | "-v" | "--help" | "-h")
        {
            self.add(READ_ONLY, &cmd.text);
        } else {
            self.add(RUNS_SCRIPT, &cmd.text);
        }
    }

    fn git(&mut self, cmd: &Command<'_>) {
        // Skip git's own options (`-C dir`, `-c key=value`, `--no-pager` …).
        let mut i = 0;
        while i < cmd.args.len() && cmd.args[i].starts_with('-') {
            i += if matches!(
                cmd.args[i],
                "-C" | "-c" | "--git-dir" | "--work-tree" | "--namespace"
            ) {
                2
            } else {
                1
            };
        }
        let sub = cmd.args.get(i).copied().unwrap_or("");
        let rest = &cmd.args[(i + 1).min(cmd.args.len())..];
        let has = |flags: &[&str]| rest.iter().any(|a| flags.contains(a));
        let bundle = |letter: char| {
            rest.iter()
                .any(|a| a.starts_with('-') && !a.starts_with("--") && a.contains(letter))
        };
        let rule = match sub {
            "push" => {
                if has(&["-f", "--force", "--mirror", "--delete", "-d", "--prune"])
                    || rest.iter().any(|a| {
                        a.starts_with("--force")
                            || (a.starts_with('+') && a.len() > 1)
                            || (a.starts_with(':') && a.len() > 1)
                    })
                {
                    GIT_DESTRUCTIVE
                } else {
                    GIT_CHANGE
                }
            }
            "reset" => {
                if has(&["--hard", "--merge", "--keep"]) {
                    GIT_DESTRUCTIVE
                } else {
                    GIT_CHANGE
                }
            }
            "clean" => {
                if (bundle('f') || has(&["--force"])) && !(bundle('n') || has(&["--dry-run"])) {
                    GIT_DESTRUCTIVE
                } else {
                    GIT_LOCAL
                }
            }
            "branch" => {
                if has(&["-D"]) || (has(&["--delete", "-d"]) && has(&["--force", "-f"])) {
                    GIT_DESTRUCTIVE
                } else if has(&[
                    "-d",
                    "--delete",
                    "-m",
                    "-M",
                    "--move",
                    "-c",
                    "-C",
                    "-f",
                    "--force",
                    "--set-upstream-to",
                    "-u",
                ]) {
                    GIT_CHANGE
                } else {
                    GIT_LOCAL
                }
            }
            "checkout" | "restore" | "switch" => {
                let discards_all = rest.iter().any(|a| matches!(*a, "." | ":/" | "*"));
                let discards = rest.contains(&"--")
                    || has(&["-f", "--force", "--worktree", "-W", "--discard-changes"]);
                if sub == "restore" && has(&["--staged", "-S"]) && !has(&["--worktree", "-W"]) {
                    GIT_LOCAL
                } else if discards_all {
                    GIT_DESTRUCTIVE
                } else if discards || sub == "restore" {
                    GIT_CHANGE
                } else {
                    GIT_LOCAL
                }
            }
            "stash" => match rest.first().copied() {
                Some("clear") => GIT_DESTRUCTIVE,
                Some("drop") => GIT_CHANGE,
                _ => GIT_LOCAL,
            },
            "filter-branch" | "filter-repo" | "replace" => GIT_DESTRUCTIVE,
            "reflog"
                if rest
                    .first()
                    .is_some_and(|a| matches!(*a, "expire" | "delete")) =>
            {
                GIT_DESTRUCTIVE
            }
            "update-ref" if has(&["-d"]) => GIT_DESTRUCTIVE,
            "gc" if rest.iter().any(|a| a.starts_with("--prune")) => GIT_DESTRUCTIVE,
            "commit" if has(&["--amend"]) => GIT_CHANGE,
            "tag" if has(&["-d", "--delete", "-f", "--force"]) => GIT_CHANGE,
            "remote"
                if rest.first().is_some_and(|a| {
                    matches!(*a, "add" | "remove" | "rm" | "set-url" | "rename" | "prune")
                }) =>
            {
                GIT_CHANGE
            }
            "config" => {
                let sets_hook = rest.iter().any(|a| {
                    let a = a.to_ascii_lowercase();
                    a.starts_with("core.hookspath")
                        || a.starts_with("core.sshcommand")
                        || a.starts_with("credential.")
                        || a.starts_with("core.fsmonitor")
                        || a.starts_with("alias.")
                });
                let reads = has(&[
                    "--get",
                    "--get-all",
                    "--list",
                    "-l",
                    "--get-regexp",
                    "get",
                    "list",
                ]) || rest.len() <= 1;
                if sets_hook && !reads {
                    GIT_DESTRUCTIVE
                } else if reads {
                    GIT_LOCAL
                } else {
                    GIT_CHANGE
                }
            }
            "status" | "log" | "diff" | "show" | "blame" | "rev-parse" | "ls-files" | "ls-tree"
            | "ls-remote" | "describe" | "shortlog" | "grep" | "cat-file" | "rev-list"
            | "whatchanged" | "show-ref" | "for-each-ref" | "name-rev" | "merge-base" | "help"
            | "version" | "--version" | "count-objects" | "fsck" | "check-ignore" | "var"
            | "reflog" | "tag" | "remote" | "worktree" | "add" | "init" | "commit" | "mv"
            | "notes" | "bisect" | "range-diff" | "format-patch" | "archive" | "bundle" | "" => {
                GIT_LOCAL
            }
            _ => GIT_CHANGE,
        };
        self.add(rule, &cmd.text);
    }

    fn container(&mut self, cmd: &Command<'_>) {
        let mut args: Vec<&str> = cmd.args.clone();
        // Skip global options (`-H host`, `--context x`).
        while args.first().is_some_and(|a| a.starts_with('-')) {
            let takes_value = matches!(
                args[0],
                "-H" | "--host"
                    | "-c"
                    | "--context"
                    | "--config"
                    | "-f"
                    | "--file"
                    | "-p"
                    | "--project-name"
            );
            args.drain(..if takes_value { 2.min(args.len()) } else { 1 });
        }
        let compose = cmd.program.ends_with("compose") || args.first() == Some(&"compose");
        if args.first() == Some(&"compose") {
            args.remove(0);
            while args.first().is_some_and(|a| a.starts_with('-')) {
                let takes_value = matches!(
                    args[0],
                    "-f" | "--file" | "-p" | "--project-name" | "--profile" | "--env-file"
                );
                args.drain(..if takes_value { 2.min(args.len()) } else { 1 });
            }
        }
        let sub = args.first().copied().unwrap_or("");
        let rest = &args[1.min(args.len())..];
        let host_access = rest.iter().any(|a| {
            matches!(
                *a,
                "--privileged"
                    | "--pid=host"
                    | "--cap-add=ALL"
                    | "--cap-add=SYS_ADMIN"
                    | "--userns=host"
            ) || a.starts_with("/:")
                || a.contains("docker.sock")
                || a.starts_with("/etc:")
                || a.starts_with("/root:")
                || a.contains("source=/,")
                || a.contains("src=/,")
        }) || rest.windows(2).any(|w| {
            matches!(w[0], "--pid" | "--cap-add" | "--userns")
                && matches!(w[1], "host" | "ALL" | "SYS_ADMIN")
        });
        let rule = if host_access {
            CONTAINER_ESCAPE
        } else if (sub == "system"
            || sub == "volume"
            || sub == "image"
            || sub == "container"
            || sub == "builder")
            && rest.first().is_some_and(|a| matches!(*a, "prune" | "rm"))
            || sub == "volume" && rest.is_empty()
            || compose && sub == "down" && rest.iter().any(|a| matches!(*a, "-v" | "--volumes"))
        {
            CONTAINER_DATA_LOSS
        } else if matches!(
            sub,
            "ps" | "images"
                | "logs"
                | "inspect"
                | "version"
                | "info"
                | "stats"
                | "top"
                | "history"
                | "search"
                | "diff"
                | "port"
                | "ls"
                | "config"
                | "events"
                | "--version"
                | ""
        ) {
            READ_ONLY
        } else {
            CONTAINER
        };
        self.add(rule, &cmd.text);
    }

    fn kubectl(&mut self, cmd: &Command<'_>) {
        let (sub, rest) = cmd.subcommand();
        let secret_read = matches!(sub, "get" | "describe")
            && rest.iter().any(|a| a.starts_with("secret"))
            && (sub == "describe"
                || rest.iter().any(|a| {
                    a.starts_with("-o")
                        || a.starts_with("--output")
                        || matches!(*a, "yaml" | "json")
                }));
        let rule = if secret_read {
            CLOUD_CREDENTIALS
        } else {
            match sub {
                "delete" | "drain" | "replace" if sub != "replace" || rest.contains(&"--force") => {
                    CLUSTER_DELETE
                }
                "get" | "describe" | "logs" | "top" | "version" | "explain" | "api-resources"
                | "api-versions" | "cluster-info" | "auth" | "diff" | "events" | "wait" | "" => {
                    READ_ONLY
                }
                "config" => {
                    if rest.first().is_some_and(|a| {
                        matches!(
                            *a,
                            "view"
                                | "get-contexts"
                                | "current-context"
                                | "get-clusters"
                                | "get-users"
                        )
                    }) {
                        READ_ONLY
                    } else {
                        INFRA_CHANGE
                    }
                }
                _ => INFRA_CHANGE,
            }
        };
        self.add(rule, &cmd.text);
    }

    fn helm(&mut self, cmd: &Command<'_>) {
        let (sub, _) = cmd.subcommand();
        let rule = match sub {
            "uninstall" | "delete" | "del" | "un" => CLUSTER_DELETE,
            "list" | "ls" | "status" | "get" | "template" | "lint" | "show" | "search"
            | "version" | "history" | "env" | "" => READ_ONLY,
            _ => INFRA_CHANGE,
        };
        self.add(rule, &cmd.text);
    }

    fn terraform(&mut self, cmd: &Command<'_>) {
        let (sub, rest) = cmd.subcommand();
        let rule = match sub {
            "destroy" | "force-unlock" | "remove" | "rm" => CLUSTER_DELETE,
            "apply" | "up" | "deploy"
                if rest.iter().any(|a| *a == "-destroy" || *a == "--destroy") =>
            {
                CLUSTER_DELETE
            }
            "state"
                if rest
                    .first()
                    .is_some_and(|a| matches!(*a, "rm" | "mv" | "push" | "replace-provider")) =>
            {
                CLUSTER_DELETE
            }
            "stack" if rest.first().is_some_and(|a| *a == "rm") => CLUSTER_DELETE,
            "plan" | "validate" | "fmt" | "show" | "output" | "version" | "providers" | "graph"
            | "preview" | "state" | "whoami" | "synth" | "list" | "ls" | "" => READ_ONLY,
            _ => INFRA_CHANGE,
        };
        self.add(rule, &cmd.text);
    }

    fn aws(&mut self, cmd: &Command<'_>) {
        let positional: Vec<&str> = cmd
            .args
            .iter()
            .copied()
            .filter(|a| !a.starts_with('-'))
            .collect();
        let service = positional.first().copied().unwrap_or("");
        let operation = positional.get(1).copied().unwrap_or("");
        let credential_ops = [
            "get-secret-value",
            "get-session-token",
            "create-access-key",
            "get-login-password",
            "get-authorization-token",
            "assume-role",
            "get-federation-token",
            "get-parameters-by-path",
            "export-credentials",
            "get-credentials-for-identity",
        ];
        let rule = if credential_ops.contains(&operation)
            || (operation.starts_with("get-parameter") && cmd.has_flag(&["--with-decryption"]))
            || (service == "configure" && matches!(operation, "get" | "export-credentials"))
        {
            CLOUD_CREDENTIALS
        } else if service == "s3" {
            match operation {
                "rm" | "rb" => CLUSTER_DELETE,
                "sync" if cmd.has_flag(&["--delete"]) => CLUSTER_DELETE,
                "ls" | "presign" | "" => READ_ONLY,
                _ => INFRA_CHANGE,
            }
        } else if [
            "delete",
            "terminate",
            "remove",
            "deregister",
            "destroy",
            "purge",
            "revoke",
            "detach",
            "disable",
            "cancel",
            "stop",
        ]
        .iter()
        .any(|p| operation.starts_with(p))
        {
            CLUSTER_DELETE
        } else if operation.is_empty()
            || [
                "describe",
                "list",
                "get",
                "head",
                "lookup",
                "search",
                "wait",
                "help",
                "filter",
                "batch-get",
                "validate",
                "estimate",
                "simulate",
                "test",
                "check",
            ]
            .iter()
            .any(|p| operation.starts_with(p))
            || service == "sts" && operation == "get-caller-identity"
        {
            READ_ONLY
        } else {
            INFRA_CHANGE
        };
        self.add(rule, &cmd.text);
    }

    fn cloud_cli(&mut self, cmd: &Command<'_>) {
        let words: Vec<String> = cmd
            .args
            .iter()
            .filter(|a| !a.starts_with('-'))
            .map(|a| a.to_ascii_lowercase())
            .collect();
        let has = |list: &[&str]| words.iter().any(|w| list.contains(&w.as_str()));
        let rule = if has(&[
            "print-access-token",
            "get-access-token",
            "print-identity-token",
            "access",
            "get-credentials",
            "show-connection-string",
            "keys",
        ]) && !has(&["list"])
        {
            CLOUD_CREDENTIALS
        } else if has(&[
            "delete",
            "destroy",
            "remove",
            "rm",
            "rb",
            "purge",
            "terminate",
            "wipe",
            "destroy-app",
            "rollback",
        ]) {
            CLUSTER_DELETE
        } else if has(&["ssh", "scp"]) {
            REMOTE_ACCESS
        } else if words.is_empty()
            || has(&[
                "list", "ls", "describe", "show", "get", "info", "version", "status", "whoami",
                "logs", "cat", "help",
            ]) && !has(&["create", "deploy", "update", "set", "add", "apply"])
        {
            READ_ONLY
        } else {
            INFRA_CHANGE
        };
        self.add(rule, &cmd.text);
    }

    fn python_packages(&mut self, cmd: &Command<'_>) {
        let (mut sub, mut rest) = cmd.subcommand();
        if cmd.program == "uv" && sub == "pip" {
            let inner = rest.iter().position(|a| !a.starts_with('-'));
            if let Some(i) = inner {
                sub = rest[i];
                rest = rest[i + 1..].to_vec();
            }
        }
        let untrusted = rest.iter().any(|a| {
            a.contains("://")
                || a.starts_with("git+")
                || matches!(
                    *a,
                    "--index-url"
                        | "-i"
                        | "--extra-index-url"
                        | "--trusted-host"
                        | "-f"
                        | "--find-links"
                )
                || a.starts_with("--index-url=")
                || a.starts_with("--extra-index-url=")
        });
        let rule = match sub {
            "install" | "add" | "sync" | "i" | "update" | "upgrade" | "inject" | "lock"
                if untrusted =>
            {
                UNTRUSTED_INSTALL
            }
            "install" | "add" | "sync" | "i" | "update" | "upgrade" | "inject" | "uninstall"
            | "remove" | "create" | "env" => PACKAGE_INSTALL,
            "publish" | "upload" => PUBLISH,
            "run" | "exec" | "shell" | "tool" | "x" | "build" | "test" => RUNS_PROJECT,
            "list" | "show" | "freeze" | "check" | "search" | "--version" | "version" | "info"
            | "config" | "tree" | "" => READ_ONLY,
            _ => PACKAGE_INSTALL,
        };
        self.add(rule, &cmd.text);
    }

    fn js_packages(&mut self, cmd: &Command<'_>) {
        let (sub, rest) = cmd.subcommand();
        let untrusted = rest.iter().any(|a| {
            a.contains("://")
                || a.starts_with("git+")
                || a.starts_with("github:")
                || a.starts_with("--registry")
        });
        let rule = match sub {
            "install" | "i" | "add" | "ci" | "update" | "upgrade" | "up" | "link" if untrusted => {
                UNTRUSTED_INSTALL
            }
            "install" | "i" | "add" | "ci" | "update" | "upgrade" | "up" | "remove" | "rm"
            | "uninstall" | "un" | "link" | "dedupe" | "prune" => PACKAGE_INSTALL,
            "" if cmd.program == "yarn" => PACKAGE_INSTALL,
            "publish" | "unpublish" | "deprecate" => PUBLISH,
            "ls" | "list" | "view" | "info" | "outdated" | "why" | "search" | "--version"
            | "-v" | "version" | "help" | "config" | "whoami" | "explain" | "doctor" | "" => {
                READ_ONLY
            }
            "audit" if !rest.contains(&"fix") => READ_ONLY,
            _ => RUNS_PROJECT,
        };
        self.add(rule, &cmd.text);
    }

    fn cargo(&mut self, cmd: &Command<'_>) {
        let (sub, rest) = cmd.subcommand();
        let rule = match sub {
            "install"
                if rest.iter().any(|a| {
                    matches!(*a, "--git" | "--index" | "--registry") || a.contains("://")
                }) =>
            {
                UNTRUSTED_INSTALL
            }
            "install" | "uninstall" => PACKAGE_INSTALL,
            "publish" | "yank" | "owner" => PUBLISH,
            "--version" | "-V" | "version" | "tree" | "metadata" | "search" | "help"
            | "locate-project" | "pkgid" | "verify-project" | "--list" | "" => READ_ONLY,
            _ => RUNS_PROJECT,
        };
        self.add(rule, &cmd.text);
    }

    fn go(&mut self, cmd: &Command<'_>) {
        let (sub, _) = cmd.subcommand();
        let rule = match sub {
            "install" | "get" => PACKAGE_INSTALL,
            "version" | "env" | "list" | "doc" | "vet" | "help" | "" => READ_ONLY,
            _ => RUNS_PROJECT,
        };
        self.add(rule, &cmd.text);
    }
}

/// The value of a `dd` operand (`of=…`).
fn dd_operand<'a>(args: &[&'a str], key: &str) -> Option<&'a str> {
    args.iter().find_map(|a| a.strip_prefix(key))
}

/// `host:path`, `user@host:path` or `rsync://…` (but not `C:\…`-style or `./a:b`).
fn is_remote_spec(arg: &str) -> bool {
    if arg.starts_with("rsync://") || arg.starts_with("sftp://") || arg.starts_with("scp://") {
        return true;
    }
    match arg.split_once(':') {
        Some((host, _)) => {
            !host.is_empty() && !host.contains('/') && host.len() > 1 && !arg.starts_with('-')
        }
        None => false,
    }
}

/// Whether a nested script fetches from the network anywhere.
fn script_downloads(script: &Script) -> bool {
    script.pipelines.iter().flat_map(|p| &p.commands).any(|c| {
        Command::of(&c.words).is_some_and(|view| is_downloader(&view))
            || c.nested.iter().any(script_downloads)
    })
}

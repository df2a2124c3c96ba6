//! Slash commands and approval answers: parsing only. What a command does lives in
//! [`crate::repl`].

/// A parsed slash command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// `/ws new [name]`
    WsNew(Option<String>),
    /// `/ws list` (or a bare `/ws`)
    WsList,
    /// `/ws <n>`: switch by position in the list, 1-based.
    WsSwitch(usize),
    /// `/ws close`
    WsClose,
    /// `/ws rename <name>`
    WsRename(String),
    /// `/resume <alias|id|prefix>`
    Resume(String),
    /// `/clear`: forget the conversation context.
    Clear,
    /// `/compact`: replace the conversation by a summary.
    Compact,
    /// `/new`: a fresh workstream replacing the current one.
    New,
    /// `/name <name>`
    Name(String),
    /// `/model [alias]`
    Model(Option<String>),
    /// `/tools`: the exact tool array of the latest model request.
    Tools,
    Help,
    /// `/exit`, `/quit`, `/q`
    Exit,
    /// A known command used wrongly; the text is its usage line.
    Usage(&'static str),
    /// Anything else starting with `/`; the text is the command word.
    Unknown(String),
}

/// One line per command, for `/help`.
pub const HELP: &str = "\
Commands:
  /ws new [name]     start a new workstream and switch to it
  /ws list           list workstreams (* marks the current one)
  /ws <n>            switch to workstream n of the list
  /ws close          close the current workstream
  /ws rename <name>  rename the current workstream
  /new               replace the current workstream with a fresh one
  /clear             forget the conversation context (keeps the workstream)
  /compact           replace the conversation by a summary (frees context)
  /name <name>       name the current workstream
  /resume <x>        resume a saved session (needs persistence)
  /model [alias]     show the model, or switch to a configured alias
  /tools             the tool array of the latest model request (names, bytes, digest)
  /help              this help
  /exit, /quit       leave (Ctrl-C cancels a running turn; twice exits)
Approvals: y = yes, n = no, a = always for this tool; add feedback after the answer,
e.g. `n use ripgrep instead`.";

/// Parses a line; `None` when it is not a slash command (a prompt).
pub fn parse(line: &str) -> Option<Command> {
    let line = line.trim();
    let rest = line.strip_prefix('/')?;
    let (word, args) = match rest.split_once(char::is_whitespace) {
        Some((w, a)) => (w, a.trim()),
        None => (rest, ""),
    };
    let arg = (!args.is_empty()).then(|| args.to_string());
    Some(match word {
        "ws" => parse_ws(args),
        "resume" => match arg {
            Some(a) => Command::Resume(a),
            None => Command::Usage("Usage: /resume <alias|id|id-prefix>"),
        },
        "clear" => Command::Clear,
        "compact" => Command::Compact,
        "new" => Command::New,
        "name" => match arg {
            Some(a) => Command::Name(a),
            None => Command::Usage("Usage: /name <name>"),
        },
        "model" => Command::Model(arg),
        "tools" => Command::Tools,
        "help" | "?" => Command::Help,
        "exit" | "quit" | "q" => Command::Exit,
        _ => Command::Unknown(format!("/{word}")),
    })
}

fn parse_ws(args: &str) -> Command {
    let (sub, rest) = match args.split_once(char::is_whitespace) {
        Some((s, r)) => (s, r.trim()),
        None => (args, ""),
    };
    let rest = (!rest.is_empty()).then(|| rest.to_string());
    match sub {
        "" | "list" | "ls" => Command::WsList,
        "new" => Command::WsNew(rest),
        "close" => Command::WsClose,
        "rename" => match rest {
            Some(name) => Command::WsRename(name),
            None => Command::Usage("Usage: /ws rename <name>"),
        },
        n => match n.parse::<usize>() {
            Ok(n) if n >= 1 && rest.is_none() => Command::WsSwitch(n),
            _ => Command::Usage("Usage: /ws new [name] | list | <n> | close | rename <name>"),
        },
    }
}

/// An answer to an approval prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub approved: bool,
    /// Approve this tool from now on (without asking) in this workstream.
    pub always: bool,
    pub feedback: Option<String>,
}

/// Parses an approval answer: `y`/`yes`, `n`/`no`, `a`/`always`, each optionally followed by
/// feedback text (`n because …`, `n: use rg`, `y, then summarise`). Any other text is a
/// denial with that text as feedback. `None` for an empty line (ask again).
pub fn parse_answer(line: &str) -> Option<Answer> {
    let line = line.trim();
    if line.is_empty() {
        return None;
    }
    let split = line
        .find(|c: char| !c.is_alphanumeric())
        .unwrap_or(line.len());
    let (word, rest) = line.split_at(split);
    let feedback = rest
        .trim_start_matches(|c: char| c.is_whitespace() || matches!(c, ':' | ',' | '-' | '—'))
        .trim();
    let feedback = (!feedback.is_empty()).then(|| feedback.to_string());
    let answer = |approved, always, feedback| {
        Some(Answer {
            approved,
            always,
            feedback,
        })
    };
    match word.to_lowercase().as_str() {
        "y" | "yes" => answer(true, false, feedback),
        "a" | "always" => answer(true, true, feedback),
        "n" | "no" => answer(false, false, feedback),
        _ => answer(false, false, Some(line.to_string())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_are_not_commands() {
        assert_eq!(parse("hello /ws"), None);
        assert_eq!(parse(""), None);
    }

    #[test]
    fn workstream_commands() {
        assert_eq!(parse("/ws new"), Some(Command::WsNew(None)));
        assert_eq!(
            parse("/ws new  research notes "),
            Some(Command::WsNew(Some("research notes".into())))
        );
        assert_eq!(parse("/ws list"), Some(Command::WsList));
        assert_eq!(parse("/ws"), Some(Command::WsList));
        assert_eq!(parse("/ws 2"), Some(Command::WsSwitch(2)));
        assert_eq!(parse("/ws close"), Some(Command::WsClose));
        assert_eq!(
            parse("/ws rename alpha"),
            Some(Command::WsRename("alpha".into()))
        );
        assert!(matches!(parse("/ws 0"), Some(Command::Usage(_))));
        assert!(matches!(parse("/ws rename"), Some(Command::Usage(_))));
        assert!(matches!(parse("/ws frobnicate"), Some(Command::Usage(_))));
    }

    #[test]
    fn session_commands() {
        assert_eq!(parse("/clear"), Some(Command::Clear));
        assert_eq!(parse("/compact"), Some(Command::Compact));
        assert_eq!(parse("/new"), Some(Command::New));
        assert_eq!(
            parse("/name  my work"),
            Some(Command::Name("my work".into()))
        );
        assert!(matches!(parse("/name"), Some(Command::Usage(_))));
        assert_eq!(parse("/resume abc"), Some(Command::Resume("abc".into())));
        assert!(matches!(parse("/resume"), Some(Command::Usage(_))));
        assert_eq!(parse("/model"), Some(Command::Model(None)));
        assert_eq!(
            parse("/model big"),
            Some(Command::Model(Some("big".into())))
        );
        assert_eq!(parse("/help"), Some(Command::Help));
        assert_eq!(parse("/tools"), Some(Command::Tools));
        for exit in ["/exit", "/quit", "/q", "  /exit  "] {
            assert_eq!(parse(exit), Some(Command::Exit), "{exit}");
        }
        assert_eq!(parse("/frob x"), Some(Command::Unknown("/frob".into())));
    }

    #[test]
    fn approval_answers() {
        let yes = parse_answer("y").unwrap();
        assert!(yes.approved && !yes.always && yes.feedback.is_none());
        assert!(parse_answer("YES").unwrap().approved);
        let always = parse_answer("a").unwrap();
        assert!(always.approved && always.always);
        assert!(parse_answer("always").unwrap().always);
        let no = parse_answer("n").unwrap();
        assert!(!no.approved && no.feedback.is_none());
        assert_eq!(
            parse_answer("n because it deletes files")
                .unwrap()
                .feedback
                .as_deref(),
            Some("because it deletes files")
        );
        assert_eq!(
            parse_answer("n: use rg").unwrap().feedback.as_deref(),
            Some("use rg")
        );
        let y_fb = parse_answer("y, then summarise").unwrap();
        assert!(y_fb.approved);
        assert_eq!(y_fb.feedback.as_deref(), Some("then summarise"));
        let other = parse_answer("nope, try again").unwrap();
        assert!(!other.approved);
        assert_eq!(other.feedback.as_deref(), Some("nope, try again"));
        assert_eq!(parse_answer("   "), None);
    }
}

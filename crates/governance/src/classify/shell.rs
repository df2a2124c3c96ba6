//! A forgiving reader of shell command lines: enough of the POSIX/bash grammar to find
//! every simple command (through pipes, lists, subshells, `$(…)`, backticks, `<(…)`,
//! `bash -c '…'` and heredocs fed to a shell), its words with quotes removed, and its
//! redirections. It never fails: malformed input (an unclosed quote, a stray paren) reads
//! as far as it goes. Input beyond [`MAX_SCRIPT_CHARS`] and nesting beyond
//! [`MAX_NESTING`] are not read (the classifier reports that as its own finding).

/// Characters of a command line that are parsed; the rest is ignored.
pub(crate) const MAX_SCRIPT_CHARS: usize = 64 * 1024;
/// How deep substitutions and `sh -c` strings are followed.
pub(crate) const MAX_NESTING: usize = 6;

/// A command line: pipelines joined by `;`, `&&`, `||`, `&` or newlines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Script {
    pub pipelines: Vec<Pipeline>,
    /// Parts of the text were not read (too long or nested too deep).
    pub truncated: bool,
}

/// Commands joined by `|`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Pipeline {
    pub commands: Vec<SimpleCommand>,
}

/// One command: its words (quotes removed), redirections and the scripts nested in it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SimpleCommand {
    pub words: Vec<String>,
    pub redirects: Vec<Redirect>,
    /// Command and process substitutions inside this command's words.
    pub nested: Vec<Script>,
    /// Heredoc bodies given to this command on stdin.
    pub heredocs: Vec<String>,
}

/// An output redirection to a file (`>`, `>>`, `&>`, `>|`) or an input one (`<`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Redirect {
    pub writes: bool,
    pub target: String,
}

/// Parses `text` (see the module docs).
pub(crate) fn parse(text: &str) -> Script {
    parse_nested(text, 0)
}

pub(crate) fn parse_nested(text: &str, depth: usize) -> Script {
    let mut chars: Vec<char> = text.chars().take(MAX_SCRIPT_CHARS + 1).collect();
    let truncated = chars.len() > MAX_SCRIPT_CHARS;
    chars.truncate(MAX_SCRIPT_CHARS);
    if depth > MAX_NESTING {
        return Script {
            pipelines: Vec::new(),
            truncated: true,
        };
    }
    let mut parser = Parser {
        chars: &chars,
        pos: 0,
        depth,
        script: Script {
            pipelines: Vec::new(),
            truncated,
        },
        pipeline: Pipeline::default(),
        command: SimpleCommand::default(),
        word: String::new(),
        word_started: false,
        pending: Pending::None,
        heredoc_delims: Vec::new(),
    };
    parser.run();
    parser.script
}

/// What the next word means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Pending {
    None,
    /// The target of a redirection (`true`: output).
    RedirectTarget(bool),
    /// A heredoc delimiter (`true`: `<<-`, tabs stripped).
    HeredocDelimiter(bool),
    /// A here-string or an fd duplication: the word is data, not a file.
    Discard,
}

struct Parser<'a> {
    chars: &'a [char],
    pos: usize,
    depth: usize,
    script: Script,
    pipeline: Pipeline,
    command: SimpleCommand,
    word: String,
    word_started: bool,
    pending: Pending,
    /// Heredocs announced on the current line: (delimiter, strip tabs).
    heredoc_delims: Vec<(String, bool)>,
}

impl Parser<'_> {
    fn peek(&self, offset: usize) -> Option<char> {
        self.chars.get(self.pos + offset).copied()
    }

    fn run(&mut self) {
        while let Some(c) = self.peek(0) {
            match c {
                '\'' => {
                    self.pos += 1;
                    self.word_started = true;
                    while let Some(q) = self.peek(0) {
                        self.pos += 1;
                        if q == '\'' {
                            break;
                        }
                        self.word.push(q);
                    }
                }
                '"' => {
                    self.pos += 1;
                    self.word_started = true;
                    self.double_quoted();
                }
                '\\' => {
                    self.pos += 1;
                    match self.peek(0) {
                        Some('\n') => self.pos += 1,
                        Some(next) => {
                            self.word.push(next);
                            self.word_started = true;
                            self.pos += 1;
                        }
                        None => {}
                    }
                }
                '$' => self.dollar(),
                '`' => self.backtick(),
                ' ' | '\t' | '\r' => {
                    self.finish_word();
                    self.pos += 1;
                }
                '\n' => {
                    self.pos += 1;
                    self.end_pipeline();
                    self.read_heredoc_bodies();
                }
                ';' | '(' | ')' => {
                    self.pos += 1;
                    self.end_pipeline();
                }
                '&' => {
                    if self.peek(1) == Some('&') {
                        self.pos += 2;
                        self.end_pipeline();
                    } else if self.peek(1) == Some('>') {
                        self.finish_word();
                        self.pos += 2;
                        if self.peek(0) == Some('>') {
                            self.pos += 1;
                        }
                        self.pending = Pending::RedirectTarget(true);
                    } else {
                        self.pos += 1;
                        self.end_pipeline();
                    }
                }
                '|' => {
                    if self.peek(1) == Some('|') {
                        self.pos += 2;
                        self.end_pipeline();
                    } else {
                        self.pos += if self.peek(1) == Some('&') { 2 } else { 1 };
                        self.end_command();
                    }
                }
                '>' | '<' => self.redirection(c),
                '#' if !self.word_started => {
                    while self.peek(0).is_some_and(|c| c != '\n') {
                        self.pos += 1;
                    }
                }
                other => {
                    self.word.push(other);
                    self.word_started = true;
                    self.pos += 1;
                }
            }
        }
        self.end_pipeline();
    }

    /// Inside `"…"`: escapes, `$…` and backticks; ends after the closing quote.
    fn double_quoted(&mut self) {
        while let Some(c) = self.peek(0) {
            match c {
                '"' => {
                    self.pos += 1;
                    return;
                }
                '\\' => {
                    self.pos += 1;
                    if let Some(next) = self.peek(0) {
                        if !matches!(next, '"' | '\\' | '$' | '`' | '\n') {
                            self.word.push('\\');
                        }
                        if next != '\n' {
                            self.word.push(next);
                        }
                        self.pos += 1;
                    }
                }
                '$' => self.dollar(),
                '`' => self.backtick(),
                other => {
                    self.word.push(other);
                    self.pos += 1;
                }
            }
        }
    }

    /// `$(…)`, `$((…))`, `${…}` or a plain `$NAME` (kept as text: it marks the word as
    /// unresolvable).
    fn dollar(&mut self) {
        self.word_started = true;
        match (self.peek(1), self.peek(2)) {
            (Some('('), Some('(')) => {
                let end = matching_close(self.chars, self.pos + 1);
                self.word.push('0');
                self.pos = end;
            }
            (Some('('), _) => {
                let start = self.pos + 2;
                let end = matching_close(self.chars, self.pos + 1);
                self.nest(start, end.saturating_sub(1).max(start));
                self.word.push_str("$(…)");
                self.pos = end;
            }
            (Some('{'), _) => {
                while let Some(c) = self.peek(0) {
                    self.word.push(c);
                    self.pos += 1;
                    if c == '}' {
                        break;
                    }
                }
            }
            _ => {
                self.word.push('$');
                self.pos += 1;
            }
        }
    }

    fn backtick(&mut self) {
        self.word_started = true;
        let start = self.pos + 1;
        let mut end = start;
        while end < self.chars.len() && self.chars[end] != '`' {
            end += 1;
        }
        self.nest(start, end);
        self.word.push_str("$(…)");
        self.pos = (end + 1).min(self.chars.len());
    }

    /// Parses `chars[start..end]` as a nested script of the current command.
    fn nest(&mut self, start: usize, end: usize) {
        let end = end.min(self.chars.len());
        if start >= end {
            return;
        }
        let inner: String = self.chars[start..end].iter().collect();
        let nested = parse_nested(&inner, self.depth + 1);
        self.command.nested.push(nested);
    }

    fn redirection(&mut self, c: char) {
        // A word of digits right before `>` is the file descriptor, not an argument.
        if self.word_started
            && !self.word.is_empty()
            && self.word.chars().all(|d| d.is_ascii_digit())
        {
            self.word.clear();
            self.word_started = false;
        }
        self.finish_word();
        self.pos += 1;
        let next = self.peek(0);
        if c == '>' {
            match next {
                Some('(') => {
                    self.process_substitution();
                }
                Some('>') | Some('|') => {
                    self.pos += 1;
                    self.pending = Pending::RedirectTarget(true);
                }
                Some('&') => {
                    self.pos += 1;
                    self.pending = if self.peek(0).is_some_and(|d| d.is_ascii_digit() || d == '-') {
                        Pending::Discard
                    } else {
                        Pending::RedirectTarget(true)
                    };
                }
                _ => self.pending = Pending::RedirectTarget(true),
            }
        } else {
            match next {
                Some('(') => self.process_substitution(),
                Some('<') => {
                    self.pos += 1;
                    if self.peek(0) == Some('<') {
                        self.pos += 1;
                        self.pending = Pending::Discard;
                    } else {
                        let strip = self.peek(0) == Some('-');
                        if strip {
                            self.pos += 1;
                        }
                        self.pending = Pending::HeredocDelimiter(strip);
                    }
                }
                Some('&') => {
                    self.pos += 1;
                    self.pending = Pending::Discard;
                }
                Some('>') => {
                    self.pos += 1;
                    self.pending = Pending::RedirectTarget(true);
                }
                _ => self.pending = Pending::RedirectTarget(false),
            }
        }
    }

    /// `<(…)` / `>(…)`: the inner script runs; the word is a `/dev/fd` path.
    fn process_substitution(&mut self) {
        let start = self.pos + 1;
        let end = matching_close(self.chars, self.pos);
        self.nest(start, end.saturating_sub(1).max(start));
        self.pos = end;
        self.word.push_str("/dev/fd/63");
        self.word_started = true;
    }

    fn finish_word(&mut self) {
        if !self.word_started {
            return;
        }
        let word = std::mem::take(&mut self.word);
        self.word_started = false;
        match std::mem::replace(&mut self.pending, Pending::None) {
            Pending::RedirectTarget(writes) => self.command.redirects.push(Redirect {
                writes,
                target: word,
            }),
            Pending::HeredocDelimiter(strip) => self.heredoc_delims.push((word, strip)),
            Pending::Discard => {}
            Pending::None => {
                // Grouping braces are syntax, not words.
                if !(self.command.words.is_empty() && (word == "{" || word == "}")) {
                    self.command.words.push(word);
                }
            }
        }
    }

    fn end_command(&mut self) {
        self.finish_word();
        let command = std::mem::take(&mut self.command);
        if !command.words.is_empty() || !command.redirects.is_empty() || !command.nested.is_empty()
        {
            self.pipeline.commands.push(command);
        }
    }

    fn end_pipeline(&mut self) {
        self.end_command();
        let pipeline = std::mem::take(&mut self.pipeline);
        if !pipeline.commands.is_empty() {
            self.script.pipelines.push(pipeline);
        }
    }

    /// After a newline: the bodies of the heredocs announced on the line just ended. Each
    /// is attached to the last command read; it is parsed as a script only when that
    /// command is a shell (the analyser decides).
    fn read_heredoc_bodies(&mut self) {
        let delims = std::mem::take(&mut self.heredoc_delims);
        for (delimiter, strip_tabs) in delims {
            let mut body = String::new();
            loop {
                if self.peek(0).is_none() {
                    break;
                }
                let line_start = self.pos;
                while self.peek(0).is_some_and(|c| c != '\n') {
                    self.pos += 1;
                }
                let line: String = self.chars[line_start..self.pos].iter().collect();
                if self.peek(0) == Some('\n') {
                    self.pos += 1;
                }
                let candidate = if strip_tabs {
                    line.trim_start_matches('\t')
                } else {
                    &line
                };
                if candidate == delimiter {
                    break;
                }
                body.push_str(&line);
                body.push('\n');
            }
            let owner = self
                .script
                .pipelines
                .last_mut()
                .and_then(|p| p.commands.last_mut());
            if let Some(command) = owner {
                command.heredocs.push(body);
            }
        }
    }
}

/// The index just after the `)` matching the `(` at `open`, skipping quoted text; the end
/// of the input when unmatched.
fn matching_close(chars: &[char], open: usize) -> usize {
    let mut depth = 0usize;
    let mut i = open;
    while i < chars.len() {
        match chars[i] {
            '(' => depth += 1,
            ')' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return i + 1;
                }
            }
            '\'' => {
                i += 1;
                while i < chars.len() && chars[i] != '\'' {
                    i += 1;
                }
            }
            '"' => {
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    if chars[i] == '\\' {
                        i += 1;
                    }
                    i += 1;
                }
            }
            '\\' => i += 1,
            _ => {}
        }
        i += 1;
    }
    chars.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(script: &Script) -> Vec<Vec<String>> {
        script
            .pipelines
            .iter()
            .flat_map(|p| p.commands.iter().map(|c| c.words.clone()))
            .collect()
    }

    #[test]
    fn splits_lists_pipes_and_quotes() {
        let s = parse("ls -la 'my dir' && cat \"a b\" | grep -v x; echo done &");
        assert_eq!(
            words(&s),
            vec![
                vec!["ls", "-la", "my dir"],
                vec!["cat", "a b"],
                vec!["grep", "-v", "x"],
                vec!["echo", "done"],
            ]
        );
        assert_eq!(s.pipelines[1].commands.len(), 2);
    }

    #[test]
    fn reads_redirections_and_fds() {
        let s = parse("make 2>&1 > build.log >> /tmp/all.log < in.txt");
        let c = &s.pipelines[0].commands[0];
        assert_eq!(c.words, vec!["make"]);
        let targets: Vec<_> = c
            .redirects
            .iter()
            .map(|r| (r.writes, r.target.as_str()))
            .collect();
        assert_eq!(
            targets,
            vec![
                (true, "build.log"),
                (true, "/tmp/all.log"),
                (false, "in.txt")
            ]
        );
    }

    #[test]
    fn follows_substitutions() {
        let s = parse("echo $(rm -rf /tmp/x) `whoami` <(curl http://x)");
        let c = &s.pipelines[0].commands[0];
        assert_eq!(c.nested.len(), 3);
        assert_eq!(words(&c.nested[0]), vec![vec!["rm", "-rf", "/tmp/x"]]);
        assert_eq!(words(&c.nested[2]), vec![vec!["curl", "http://x"]]);
    }

    #[test]
    fn heredoc_bodies_are_not_commands() {
        let s = parse("cat <<'EOF' > notes.md\nrm -rf /\nEOF\nls");
        assert_eq!(words(&s), vec![vec!["cat"], vec!["ls"]]);
        assert_eq!(
            s.pipelines[0].commands[0].heredocs,
            vec!["rm -rf /\n".to_owned()]
        );
    }

    #[test]
    fn malformed_input_reads_as_far_as_it_goes() {
        for text in [
            "echo 'unclosed",
            "$(",
            "a && || ;; b",
            ")(",
            "`",
            "<<",
            "x >",
            "\\",
        ] {
            let _ = parse(text);
        }
        assert_eq!(
            words(&parse("echo \"unclosed")),
            vec![vec!["echo", "unclosed"]]
        );
    }
}

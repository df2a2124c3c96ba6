//! Turning a workstream's streamed text into terminal output.
//!
//! [`MarkdownRenderer`] is line-buffered: it holds a partial line until its newline arrives
//! (or [`finish`](MarkdownRenderer::finish)), then styles the whole line — headings, list
//! bullets, fenced code blocks, block quotes, rules, inline code and bold. Without styling
//! (`NO_COLOR`, or output not a terminal) lines pass through unchanged.
//! [`ToolOutput`] prefixes streamed tool output so it stands apart from the reply.

/// ANSI sequences used, each undone by its specific reset so styles nest.
mod ansi {
    pub const BOLD: &str = "\x1b[1m";
    pub const NOT_BOLD_OR_DIM: &str = "\x1b[22m";
    pub const DIM: &str = "\x1b[2m";
    pub const UNDERLINE: &str = "\x1b[4m";
    pub const NO_UNDERLINE: &str = "\x1b[24m";
    pub const CYAN: &str = "\x1b[36m";
    pub const YELLOW: &str = "\x1b[33m";
    pub const RED: &str = "\x1b[31m";
    pub const DEFAULT_FG: &str = "\x1b[39m";
}

/// Whether to emit ANSI styling, with small helpers for one-off styled text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Style {
    pub color: bool,
}

impl Style {
    pub const PLAIN: Self = Self { color: false };
    pub const ANSI: Self = Self { color: true };

    /// Styling for stdout: on when it is a terminal and `NO_COLOR` is unset or empty.
    pub fn detect(stdout_is_tty: bool, no_color: Option<&str>) -> Self {
        Self {
            color: stdout_is_tty && no_color.is_none_or(str::is_empty),
        }
    }

    fn wrap(self, open: &str, text: &str, close: &str) -> String {
        if self.color {
            format!("{open}{text}{close}")
        } else {
            text.to_string()
        }
    }

    pub fn dim(self, text: &str) -> String {
        self.wrap(ansi::DIM, text, ansi::NOT_BOLD_OR_DIM)
    }

    pub fn bold(self, text: &str) -> String {
        self.wrap(ansi::BOLD, text, ansi::NOT_BOLD_OR_DIM)
    }

    pub fn red(self, text: &str) -> String {
        self.wrap(ansi::RED, text, ansi::DEFAULT_FG)
    }

    pub fn yellow(self, text: &str) -> String {
        self.wrap(ansi::YELLOW, text, ansi::DEFAULT_FG)
    }
}

/// A line-buffered markdown-to-terminal renderer for one stream of text.
#[derive(Debug)]
pub struct MarkdownRenderer {
    style: Style,
    partial: String,
    /// Inside a fenced code block: the fence that opened it (```` ``` ```` or `~~~`).
    fence: Option<String>,
}

impl MarkdownRenderer {
    pub fn new(style: Style) -> Self {
        Self {
            style,
            partial: String::new(),
            fence: None,
        }
    }

    /// Adds streamed text; returns the rendered complete lines (each ending in `\n`).
    pub fn push(&mut self, text: &str) -> String {
        self.partial.push_str(text);
        let Some(last_newline) = self.partial.rfind('\n') else {
            return String::new();
        };
        let rest = self.partial.split_off(last_newline + 1);
        let complete = std::mem::replace(&mut self.partial, rest);
        let mut out = String::with_capacity(complete.len());
        for line in complete.split_inclusive('\n') {
            out.push_str(&self.render_line(line.trim_end_matches(['\n', '\r'])));
            out.push('\n');
        }
        out
    }

    /// Whether a partial line is held back.
    pub fn has_partial(&self) -> bool {
        !self.partial.is_empty()
    }

    /// Ends the stream: renders a held partial line (with a newline). A code block left
    /// open stays open for the next stream of the same reply only if `finish` is not called.
    pub fn finish(&mut self) -> String {
        let mut out = String::new();
        if !self.partial.is_empty() {
            let line = std::mem::take(&mut self.partial);
            out.push_str(&self.render_line(line.trim_end_matches('\r')));
            out.push('\n');
        }
        self.fence = None;
        out
    }

    /// Renders one line (without its newline), updating the code-block state.
    pub fn render_line(&mut self, line: &str) -> String {
        let trimmed = line.trim_start();
        if let Some(fence) = &self.fence {
            if trimmed.starts_with(fence.as_str()) && trimmed[fence.len()..].trim().is_empty() {
                self.fence = None;
                return self.style.dim(line);
            }
            return self.code(line);
        }
        if let Some(fence) = ["```", "~~~"].into_iter().find(|f| trimmed.starts_with(f)) {
            self.fence = Some(fence.to_string());
            return self.style.dim(line);
        }
        if !self.style.color {
            return line.to_string();
        }
        let indent = &line[..line.len() - trimmed.len()];
        if let Some((level, text)) = heading(trimmed) {
            let text = inline(text, self.style);
            return if level == 1 {
                format!(
                    "{}{}{text}{}{}",
                    ansi::BOLD,
                    ansi::UNDERLINE,
                    ansi::NO_UNDERLINE,
                    ansi::NOT_BOLD_OR_DIM
                )
            } else {
                format!("{}{text}{}", ansi::BOLD, ansi::NOT_BOLD_OR_DIM)
            };
        }
        if is_rule(trimmed) {
            return self.style.dim(&"\u{2500}".repeat(40));
        }
        if let Some(rest) = trimmed
            .strip_prefix("- ")
            .or_else(|| trimmed.strip_prefix("* "))
            .or_else(|| trimmed.strip_prefix("+ "))
        {
            return format!("{indent}\u{2022} {}", inline(rest.trim_start(), self.style));
        }
        if let Some((marker, rest)) = numbered(trimmed) {
            return format!(
                "{indent}{} {}",
                self.style.bold(marker),
                inline(rest, self.style)
            );
        }
        if let Some(rest) = trimmed.strip_prefix('>') {
            return format!(
                "{indent}{}",
                self.style.dim(&format!(
                    "\u{2502} {}",
                    inline(rest.trim_start(), Style::PLAIN)
                ))
            );
        }
        inline(line, self.style)
    }

    fn code(&self, line: &str) -> String {
        if self.style.color {
            format!("{}{line}{}", ansi::CYAN, ansi::DEFAULT_FG)
        } else {
            line.to_string()
        }
    }
}

/// `# Title` → (1, "Title"); up to six `#` followed by a space.
fn heading(line: &str) -> Option<(usize, &str)> {
    let level = line.chars().take_while(|&c| c == '#').count();
    if !(1..=6).contains(&level) {
        return None;
    }
    let rest = &line[level..];
    if rest.is_empty() {
        return Some((level, ""));
    }
    rest.strip_prefix(' ').map(|text| (level, text.trim()))
}

/// `---`, `***`, `___` (three or more, spaces allowed).
fn is_rule(line: &str) -> bool {
    let compact: String = line.chars().filter(|c| !c.is_whitespace()).collect();
    compact.len() >= 3
        && ['-', '*', '_']
            .into_iter()
            .any(|m| compact.chars().all(|c| c == m))
}

/// `12. item` / `3) item` → ("12.", "item").
fn numbered(line: &str) -> Option<(&str, &str)> {
    let digits = line.chars().take_while(char::is_ascii_digit).count();
    if digits == 0 || digits > 9 {
        return None;
    }
    let after = &line[digits..];
    let mut chars = after.chars();
    match (chars.next(), chars.next()) {
        (Some('.' | ')'), Some(' ')) => Some((&line[..digits + 1], after[2..].trim_start())),
        _ => None,
    }
}

/// Styles inline code (`` `x` ``) and bold (`**x**`, `__x__`); unmatched markers stay.
pub fn inline(text: &str, style: Style) -> String {
    if !style.color {
        return text.to_string();
    }
    let mut out = String::with_capacity(text.len() + 16);
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('`')
            && let Some(end) = after.find('`')
            && end > 0
        {
            out.push_str(ansi::YELLOW);
            out.push_str(&after[..end]);
            out.push_str(ansi::DEFAULT_FG);
            rest = &after[end + 1..];
            continue;
        }
        let bold_marker = ["**", "__"].into_iter().find(|m| rest.starts_with(m));
        if let Some(marker) = bold_marker {
            let after = &rest[2..];
            if let Some(end) = after.find(marker)
                && end > 0
                && !after.starts_with(' ')
            {
                out.push_str(ansi::BOLD);
                out.push_str(&inline(&after[..end], style));
                out.push_str(ansi::NOT_BOLD_OR_DIM);
                rest = &after[end + 2..];
                continue;
            }
            out.push_str(marker);
            rest = after;
            continue;
        }
        let mut chars = rest.chars();
        if let Some(c) = chars.next() {
            out.push(c);
        }
        rest = chars.as_str();
    }
    out
}

/// Prefixes streamed tool output line by line (`  │ `), across chunk boundaries.
#[derive(Debug)]
pub struct ToolOutput {
    style: Style,
    at_line_start: bool,
}

impl ToolOutput {
    pub fn new(style: Style) -> Self {
        Self {
            style,
            at_line_start: true,
        }
    }

    /// Formats a chunk of output.
    pub fn push(&mut self, chunk: &str) -> String {
        let mut out = String::with_capacity(chunk.len() + 8);
        for piece in chunk.split_inclusive('\n') {
            if self.at_line_start {
                out.push_str(&self.style.dim("  \u{2502} "));
            }
            out.push_str(piece);
            self.at_line_start = piece.ends_with('\n');
        }
        out
    }

    /// Ends the output: a newline if the last line was not terminated.
    pub fn finish(&mut self) -> String {
        if self.at_line_start {
            String::new()
        } else {
            self.at_line_start = true;
            "\n".to_string()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render_all(style: Style, chunks: &[&str]) -> String {
        let mut r = MarkdownRenderer::new(style);
        let mut out = String::new();
        for c in chunks {
            out.push_str(&r.push(c));
        }
        out + &r.finish()
    }

    #[test]
    fn plain_mode_passes_text_through_line_by_line() {
        let text = "# Title\n- **a** `b`\n```\nx\n```\nend";
        assert_eq!(render_all(Style::PLAIN, &[text]), format!("{text}\n"));
    }

    #[test]
    fn nothing_is_emitted_before_a_line_is_complete() {
        let mut r = MarkdownRenderer::new(Style::ANSI);
        assert_eq!(r.push("**bo"), "");
        assert!(r.has_partial());
        assert_eq!(r.push("ld** rest\nnext"), "\x1b[1mbold\x1b[22m rest\n");
        assert_eq!(r.finish(), "next\n");
        assert!(!r.has_partial());
    }

    #[test]
    fn headings_lists_and_rules() {
        let out = render_all(
            Style::ANSI,
            &["# Top\n## Sub `x`\n- one\n  * two\n3. three\n---\n#hashtag\n"],
        );
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "\x1b[1m\x1b[4mTop\x1b[24m\x1b[22m");
        assert_eq!(lines[1], "\x1b[1mSub \x1b[33mx\x1b[39m\x1b[22m");
        assert_eq!(lines[2], "\u{2022} one");
        assert_eq!(lines[3], "  \u{2022} two");
        assert_eq!(lines[4], "\x1b[1m3.\x1b[22m three");
        assert!(
            lines[5].contains("\u{2500}\u{2500}\u{2500}"),
            "{}",
            lines[5]
        );
        assert_eq!(lines[6], "#hashtag", "not a heading without the space");
    }

    #[test]
    fn code_blocks_are_not_inline_styled_and_close_again() {
        let out = render_all(
            Style::ANSI,
            &["before **b**\n```rust\nlet **x** = `y`;\n# not a heading\n```\nafter `c`\n"],
        );
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "before \x1b[1mb\x1b[22m");
        assert_eq!(lines[1], "\x1b[2m```rust\x1b[22m");
        assert_eq!(lines[2], "\x1b[36mlet **x** = `y`;\x1b[39m");
        assert_eq!(lines[3], "\x1b[36m# not a heading\x1b[39m");
        assert_eq!(lines[4], "\x1b[2m```\x1b[22m");
        assert_eq!(lines[5], "after \x1b[33mc\x1b[39m");
    }

    #[test]
    fn a_fence_split_across_chunks_still_counts() {
        let out = render_all(Style::ANSI, &["``", "`\n# x\n`", "``\n# y\n"]);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[1], "\x1b[36m# x\x1b[39m");
        assert_eq!(
            lines[3], "\x1b[1m\x1b[4my\x1b[24m\x1b[22m",
            "a heading again"
        );
    }

    #[test]
    fn unmatched_markers_stay_literal() {
        assert_eq!(inline("a ` b ** c __", Style::ANSI), "a ` b ** c __");
        assert_eq!(inline("2 ** 3 = 8", Style::ANSI), "2 ** 3 = 8");
        assert_eq!(inline("``", Style::ANSI), "``");
        assert_eq!(
            inline("**bold `code` in**", Style::ANSI),
            "\x1b[1mbold \x1b[33mcode\x1b[39m in\x1b[22m"
        );
        assert_eq!(
            inline("héllo **wörld**", Style::ANSI),
            "héllo \x1b[1mwörld\x1b[22m"
        );
    }

    #[test]
    fn style_detection_respects_no_color_and_tty() {
        assert!(Style::detect(true, None).color);
        assert!(Style::detect(true, Some("")).color);
        assert!(!Style::detect(true, Some("1")).color);
        assert!(!Style::detect(false, None).color);
    }

    #[test]
    fn tool_output_prefixes_each_line_across_chunks() {
        let mut t = ToolOutput::new(Style::PLAIN);
        let mut out = t.push("a\nb");
        out += &t.push("c\n");
        out += &t.push("d");
        out += &t.finish();
        assert_eq!(out, "  \u{2502} a\n  \u{2502} bc\n  \u{2502} d\n");
        assert_eq!(t.finish(), "");
    }
}

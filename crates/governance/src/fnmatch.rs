//! Shell-style patterns with the semantics of Python's `fnmatch.fnmatchcase`, which the
//! original uses for tool policies on POSIX (where `fnmatch` does not fold case).
//!
//! * `*` matches any run of characters, `/` included (these are tool names, not paths);
//! * `?` matches exactly one character;
//! * `[seq]` matches one character of the set, `[!seq]` one character outside it; `a-z`
//!   inside a set is a range, a `-` first or last is literal, a `]` right after `[` or `[!`
//!   is literal, and a range whose ends are reversed matches nothing;
//! * a `[` without a closing `]` is a literal `[`;
//! * the whole name must match, and case matters.
//!
//! Matching is a direct scan (no regex): linear in the name for patterns with one `*`, and
//! bounded by `pattern × name` in general, so an admin-written pattern cannot blow up.

/// One element of a parsed pattern.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Literal(char),
    /// `?`
    AnyOne,
    /// `*`
    AnyRun,
    /// `[...]` / `[!...]`: inclusive character ranges (a single character is `(c, c)`).
    Set {
        negated: bool,
        ranges: Vec<(char, char)>,
    },
}

impl Token {
    fn matches_one(&self, c: char) -> bool {
        match self {
            Self::Literal(l) => *l == c,
            Self::AnyOne => true,
            Self::AnyRun => false,
            Self::Set { negated, ranges } => {
                ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negated
            }
        }
    }
}

/// A compiled pattern; compile once, match many names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern {
    tokens: Vec<Token>,
}

impl Pattern {
    /// Parses `pattern`. Every string is a valid pattern (as in Python).
    pub fn new(pattern: &str) -> Self {
        let chars: Vec<char> = pattern.chars().collect();
        let mut tokens = Vec::with_capacity(chars.len());
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            i += 1;
            match c {
                '*' => {
                    // Consecutive stars are one star.
                    if tokens.last() != Some(&Token::AnyRun) {
                        tokens.push(Token::AnyRun);
                    }
                }
                '?' => tokens.push(Token::AnyOne),
                '[' => match parse_set(&chars, i) {
                    Some((token, next)) => {
                        tokens.push(token);
                        i = next;
                    }
                    None => tokens.push(Token::Literal('[')),
                },
                other => tokens.push(Token::Literal(other)),
            }
        }
        Self { tokens }
    }

    /// Whether the whole of `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        let name: Vec<char> = name.chars().collect();
        let tokens = &self.tokens;
        let (mut t, mut n) = (0usize, 0usize);
        // The last `*` seen and the name position it was tried at: on a mismatch, let that
        // star swallow one more character and retry (the classic wildcard backtrack).
        let mut star: Option<(usize, usize)> = None;
        while n < name.len() {
            match tokens.get(t) {
                Some(Token::AnyRun) => {
                    star = Some((t, n));
                    t += 1;
                }
                Some(token) if token.matches_one(name[n]) => {
                    t += 1;
                    n += 1;
                }
                _ => match star {
                    Some((star_t, star_n)) => {
                        t = star_t + 1;
                        n = star_n + 1;
                        star = Some((star_t, star_n + 1));
                    }
                    None => return false,
                },
            }
        }
        tokens[t.min(tokens.len())..]
            .iter()
            .all(|token| *token == Token::AnyRun)
    }
}

/// `fnmatch.fnmatchcase(name, pattern)` in one call (compiles the pattern each time).
pub fn fnmatch(name: &str, pattern: &str) -> bool {
    Pattern::new(pattern).matches(name)
}

/// Parses a set starting right after its `[` at `start`; `None` when it has no closing `]`.
/// Returns the token and the index after the `]`.
fn parse_set(chars: &[char], start: usize) -> Option<(Token, usize)> {
    let mut j = start;
    let negated = chars.get(j) == Some(&'!');
    if negated {
        j += 1;
    }
    let body_start = j;
    // A `]` first in the set is a member, not the end.
    if chars.get(j) == Some(&']') {
        j += 1;
    }
    while chars.get(j).is_some_and(|&c| c != ']') {
        j += 1;
    }
    if j >= chars.len() {
        return None;
    }
    let body = &chars[body_start..j];
    let mut ranges = Vec::new();
    let mut k = 0;
    while k < body.len() {
        let lo = body[k];
        // `a-z`: a `-` between two members (not the set's last character) is a range.
        if body.get(k + 1) == Some(&'-') && k + 2 < body.len() {
            let hi = body[k + 2];
            if lo <= hi {
                ranges.push((lo, hi));
            }
            k += 3;
        } else {
            ranges.push((lo, lo));
            k += 1;
        }
    }
    Some((Token::Set { negated, ranges }, j + 1))
}

#[cfg(test)]
mod tests {
    use super::fnmatch;

    #[test]
    fn python_fnmatchcase_cases() {
        let cases: &[(&str, &str, bool)] = &[
            ("bash", "bash", true),
            ("bash", "bas", false),
            ("bash", "Bash", false),
            ("bash", "*", true),
            ("", "*", true),
            ("", "", true),
            ("", "?", false),
            ("mcp__github__create_issue", "mcp__*", true),
            ("mcp__github__create_issue", "mcp__*__create_*", true),
            ("mcp__github__create_issue", "mcp__*__delete_*", false),
            ("a/b", "a*b", true),
            ("write_file", "write_?ile", true),
            ("write_file", "write_[fF]ile", true),
            ("write_File", "write_[!fF]ile", false),
            ("write_xile", "write_[!fF]ile", true),
            ("b", "[a-c]", true),
            ("d", "[a-c]", false),
            ("-", "[a-]", true),
            ("-", "[-a]", true),
            ("]", "[]]", true),
            ("]", "[!]]", false),
            ("x", "[!]]", true),
            ("[", "[", true),
            ("[ab", "[ab", true),
            ("b", "[c-a]", false),
            ("b", "[!c-a]", true),
            ("aaaaaaaaaaaaaaaaaaaaaaaaaaaaab", "*a*a*a*a*a*a*c", false),
            ("abcabc", "*abc", true),
            ("skill__deploy", "skill__*", true),
            ("read_file_outside", "read_file", false),
            ("read_file_outside", "read_file*", true),
            ("x", "**", true),
        ];
        for &(name, pattern, expected) in cases {
            assert_eq!(fnmatch(name, pattern), expected, "{name:?} ~ {pattern:?}");
        }
    }
}

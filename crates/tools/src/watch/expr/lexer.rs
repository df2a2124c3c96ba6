//! The lexer: an expression's characters into tokens (names, numbers, strings, operators),
//! refusing the syntax the language leaves out.

use super::*;

// ---------------------------------------------------------------------------------------------
// Tokens
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    Name(String),
    Int(i64),
    Float(f64),
    Str(String),
    Op(&'static str),
    End,
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Token {
    pub(super) tok: Tok,
    /// 0-based character index.
    pub(super) pos: usize,
}

pub(super) const OPS: &[&str] = &[
    "==", "!=", "<=", ">=", "<", ">", "(", ")", "[", "]", ",", ".", ":", "+", "-", "*", "/", "%",
];

/// Two-character sequences Python has but this language refuses, with the advice given.
pub(super) const REFUSED: &[(&str, &str)] = &[
    ("**", "'**' (power) is not supported"),
    (
        "//",
        "'//' (floor division) is not supported; use int(a / b)",
    ),
    ("&&", "'&&' is not an operator; use 'and'"),
    ("||", "'||' is not an operator; use 'or'"),
    (":=", "assignment is not allowed"),
];

pub(super) fn parse_error<T>(pos: usize, reason: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError {
        position: pos + 1,
        reason: reason.into(),
    })
}

pub(super) fn tokenize(src: &str) -> Result<Vec<Token>, ParseError> {
    let chars: Vec<char> = src.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let start = i;
        if c.is_alphabetic() || c == '_' {
            while i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            let name: String = chars[start..i].iter().collect();
            if i < chars.len() && (chars[i] == '\'' || chars[i] == '"') {
                return parse_error(
                    start,
                    format!("string prefixes such as {name}'…' are not supported"),
                );
            }
            tokens.push(Token {
                tok: Tok::Name(name),
                pos: start,
            });
            continue;
        }
        if c.is_ascii_digit() || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit)) {
            let (tok, end) = number(&chars, i)?;
            tokens.push(Token { tok, pos: start });
            i = end;
            continue;
        }
        if c == '\'' || c == '"' {
            let (text, end) = string(&chars, i)?;
            tokens.push(Token {
                tok: Tok::Str(text),
                pos: start,
            });
            i = end;
            continue;
        }
        let two: String = chars[i..chars.len().min(i + 2)].iter().collect();
        if let Some((_, reason)) = REFUSED.iter().find(|(op, _)| *op == two) {
            return parse_error(start, *reason);
        }
        if let Some(op) = OPS.iter().find(|op| two.starts_with(**op)) {
            tokens.push(Token {
                tok: Tok::Op(op),
                pos: start,
            });
            i += op.chars().count();
            continue;
        }
        let reason = match c {
            '=' => "'=' is not allowed (assignment); use '==' to compare".to_string(),
            '!' => "'!' is not an operator; use 'not' or '!='".to_string(),
            '&' | '|' | '^' | '~' => format!("bitwise operator '{c}' is not supported"),
            '{' | '}' => "dict and set literals are not supported".to_string(),
            '#' => "comments are not supported".to_string(),
            '`' => "backticks are not supported".to_string(),
            ';' => "only one expression is allowed (no ';')".to_string(),
            c => format!("unexpected character {c:?}"),
        };
        return parse_error(start, reason);
    }
    tokens.push(Token {
        tok: Tok::End,
        pos: chars.len(),
    });
    Ok(tokens)
}

/// Scans a number literal at `start`; returns the token and the index after it.
pub(super) fn number(chars: &[char], start: usize) -> Result<(Tok, usize), ParseError> {
    let mut i = start;
    let mut text = String::new();
    let mut is_float = false;
    let digits = |i: &mut usize, text: &mut String| -> Result<(), ParseError> {
        let begin = *i;
        while *i < chars.len() && (chars[*i].is_ascii_digit() || chars[*i] == '_') {
            if chars[*i] == '_' {
                let ok = *i > begin
                    && chars[*i - 1].is_ascii_digit()
                    && chars.get(*i + 1).is_some_and(char::is_ascii_digit);
                if !ok {
                    return parse_error(*i, "invalid '_' in a number literal");
                }
            } else {
                text.push(chars[*i]);
            }
            *i += 1;
        }
        Ok(())
    };
    digits(&mut i, &mut text)?;
    if i < chars.len() && chars[i] == '.' {
        let next = chars.get(i + 1);
        // `1.` is a float; `1.x` is not a number followed by an attribute.
        if !next.is_some_and(|c| c.is_alphabetic() || *c == '_') {
            is_float = true;
            text.push('.');
            i += 1;
            digits(&mut i, &mut text)?;
        }
    }
    if i < chars.len() && (chars[i] == 'e' || chars[i] == 'E') {
        let mut j = i + 1;
        let mut exp = String::from("e");
        if j < chars.len() && (chars[j] == '+' || chars[j] == '-') {
            exp.push(chars[j]);
            j += 1;
        }
        if j < chars.len() && chars[j].is_ascii_digit() {
            is_float = true;
            i = j;
            text.push_str(&exp);
            digits(&mut i, &mut text)?;
        }
    }
    if i < chars.len() && (chars[i].is_alphanumeric() || chars[i] == '_') {
        return parse_error(start, "invalid number literal");
    }
    if is_float {
        match text.parse::<f64>() {
            Ok(f) => Ok((Tok::Float(f), i)),
            Err(_) => parse_error(start, "invalid number literal"),
        }
    } else {
        match text.parse::<i64>() {
            Ok(n) => Ok((Tok::Int(n), i)),
            Err(_) => parse_error(start, "integer literal too large (64-bit integers only)"),
        }
    }
}

/// Scans a string literal at `start` (the opening quote); returns its text and the index
/// after the closing quote.
pub(super) fn string(chars: &[char], start: usize) -> Result<(String, usize), ParseError> {
    let quote = chars[start];
    let mut out = String::new();
    let mut i = start + 1;
    loop {
        let Some(&c) = chars.get(i) else {
            return parse_error(start, "unterminated string literal");
        };
        match c {
            c if c == quote => return Ok((out, i + 1)),
            '\n' => return parse_error(start, "unterminated string literal (newline inside)"),
            '\\' => {
                let Some(&e) = chars.get(i + 1) else {
                    return parse_error(start, "unterminated string literal");
                };
                i += 2;
                match e {
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'r' => out.push('\r'),
                    '0' => out.push('\0'),
                    'a' => out.push('\u{7}'),
                    'b' => out.push('\u{8}'),
                    'f' => out.push('\u{c}'),
                    'v' => out.push('\u{b}'),
                    '\\' | '\'' | '"' => out.push(e),
                    '\n' => {}
                    'x' | 'u' | 'U' => {
                        let len = match e {
                            'x' => 2,
                            'u' => 4,
                            _ => 8,
                        };
                        let hex: String = chars[i..chars.len().min(i + len)].iter().collect();
                        let code = (hex.chars().count() == len)
                            .then(|| u32::from_str_radix(&hex, 16).ok())
                            .flatten()
                            .and_then(char::from_u32);
                        match code {
                            Some(ch) => out.push(ch),
                            None => {
                                return parse_error(i - 2, format!("invalid \\{e} escape"));
                            }
                        }
                        i += len;
                    }
                    other => {
                        out.push('\\');
                        out.push(other);
                    }
                }
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
}

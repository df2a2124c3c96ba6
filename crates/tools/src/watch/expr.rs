//! The `stop_on` expression language: a small, safe, Python-flavoured language of our own.
//!
//! A watch's `stop_on` condition is an *expression* over five variables — never Python
//! `eval`. This module tokenizes it, parses it by recursive descent into an AST, checks every
//! name while parsing, and evaluates the AST over a [`Value`] type with bounded work and
//! bounded value sizes. Nothing in it can run code, read files, loop without bound or panic.
//!
//! # Grammar
//!
//! ```text
//! expression := or
//! or         := and ("or" and)*
//! and        := not ("and" not)*
//! not        := "not" not | comparison
//! comparison := sum (cmp_op sum)*            -- chained like Python: a < b < c
//! cmp_op     := "==" | "!=" | "<" | "<=" | ">" | ">=" | "in" | "not" "in" | "is" | "is" "not"
//! sum        := product (("+" | "-") product)*
//! product    := unary (("*" | "/" | "%") unary)*
//! unary      := ("-" | "+") unary | postfix
//! postfix    := atom ( "[" subscript "]" | "." METHOD "(" args ")" )*
//! subscript  := expression | [expression] ":" [expression]
//! atom       := VARIABLE | LITERAL | BUILTIN "(" args ")"
//!             | "isinstance" "(" expression "," types ")"
//!             | "(" expression ")" | "(" [expression ("," expression)* [","]] ")"   -- tuple
//!             | "[" [expression ("," expression)* [","]] "]"
//! types      := TYPE | "(" TYPE ("," TYPE)* [","] ")"
//! ```
//!
//! * `VARIABLE`: `output` (str), `data` (`output` parsed as JSON, or `None`), `exit_code`
//!   (int), `prev_output` (str or `None` on the first poll), `changed` (bool).
//! * `LITERAL`: `True`/`False`/`None` (also `true`/`false`/`null`), integers (`1_000`),
//!   floats (`1.5`, `2e3`), strings in `'…'` or `"…"` with the escapes `\n \t \r \0 \\ \' \"
//!   \xhh \uXXXX \UXXXXXXXX` (an unknown escape keeps its backslash, as in Python).
//! * `BUILTIN`: `len str int float bool abs min max any all sorted`; `isinstance` takes the
//!   `TYPE`s `str int float bool list dict` (and `isinstance(True, int)` holds, as in Python).
//! * `METHOD`s: on strings `lower upper strip lstrip rstrip startswith endswith split
//!   splitlines find count replace contains`; on dicts `get keys values items`; on lists
//!   `count index contains`. (`contains` is ours; Python spells it `in`.)
//! * Tuples evaluate to lists.
//!
//! Any other name, attribute or syntax (assignment, lambda, comprehensions, `**`, `//`,
//! keyword arguments, …) is a [`ParseError`] naming it, with its 1-based character position.
//!
//! # Semantics and limits
//!
//! Operators follow Python: `and`/`or` short-circuit and return an operand, comparisons
//! chain, `True == 1`, `/` is true division, `%` takes the sign of the divisor, `in` tests
//! substrings, list membership and dict keys, indexes may be negative. `is` compares type
//! and value (it is meant for `None`, `True` and `False`). Runtime failures — a missing key,
//! a type mismatch, division by zero, integer overflow — are an [`EvalError`].
//!
//! Bounds: at most [`MAX_EXPR_CHARS`] characters and [`MAX_DEPTH`] levels of nesting; a
//! work budget of [`MAX_WORK`] units (one per AST node evaluated, plus one per character or
//! element a builtin touches); strings at most [`MAX_STR_BYTES`] bytes and lists at most
//! [`MAX_LIST_LEN`] elements, checked *before* anything is allocated (`"a" * 10**9` is an
//! error, not an allocation).

use std::cmp::Ordering;
use std::fmt;
use std::sync::Arc;

/// Longest accepted expression, in characters.
pub const MAX_EXPR_CHARS: usize = 1_000;
/// Deepest accepted nesting (parentheses, brackets, calls, unary and `not` chains).
pub const MAX_DEPTH: usize = 32;
/// Largest string an evaluation may build, in bytes.
pub const MAX_STR_BYTES: usize = 1 << 20;
/// Longest list an evaluation may build.
pub const MAX_LIST_LEN: usize = 100_000;
/// Work budget of one evaluation (AST nodes plus characters/elements touched by builtins).
pub const MAX_WORK: u64 = 20_000_000;

// ---------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------

/// Why an expression was rejected before it ever ran.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError {
    /// 1-based character position in the expression (one past the end for "unexpected end").
    pub position: usize,
    pub reason: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "at position {}: {}", self.position, self.reason)
    }
}

impl std::error::Error for ParseError {}

/// Why an evaluation failed (the Python error it corresponds to is named in the text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EvalError(pub String);

impl fmt::Display for EvalError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EvalError {}

fn err<T>(message: impl Into<String>) -> Result<T, EvalError> {
    Err(EvalError(message.into()))
}

// ---------------------------------------------------------------------------------------------
// Values
// ---------------------------------------------------------------------------------------------

/// A value of the language. Strings, lists and dicts are shared (cheap to clone).
#[derive(Debug, Clone)]
pub enum Value {
    None,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Arc<str>),
    List(Arc<Vec<Value>>),
    /// String keys in insertion order (JSON objects keep their order).
    Dict(Arc<Vec<(Arc<str>, Value)>>),
}

impl Value {
    /// A string value.
    pub fn str(s: &str) -> Self {
        Self::Str(Arc::from(s))
    }

    /// The value of a JSON document (`json.loads`): objects become dicts, arrays lists,
    /// integers that fit 64 bits ints and every other number a float.
    pub fn from_json(json: &serde_json::Value) -> Self {
        match json {
            serde_json::Value::Null => Self::None,
            serde_json::Value::Bool(b) => Self::Bool(*b),
            serde_json::Value::Number(n) => match n.as_i64() {
                Some(i) => Self::Int(i),
                None => Self::Float(n.as_f64().unwrap_or(f64::NAN)),
            },
            serde_json::Value::String(s) => Self::str(s),
            serde_json::Value::Array(items) => {
                Self::List(Arc::new(items.iter().map(Self::from_json).collect()))
            }
            serde_json::Value::Object(map) => Self::Dict(Arc::new(
                map.iter()
                    .map(|(k, v)| (Arc::from(k.as_str()), Self::from_json(v)))
                    .collect(),
            )),
        }
    }

    /// Python's type name (`NoneType`, `bool`, `int`, `float`, `str`, `list`, `dict`).
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::None => "NoneType",
            Self::Bool(_) => "bool",
            Self::Int(_) => "int",
            Self::Float(_) => "float",
            Self::Str(_) => "str",
            Self::List(_) => "list",
            Self::Dict(_) => "dict",
        }
    }

    /// Python truthiness.
    pub fn truthy(&self) -> bool {
        match self {
            Self::None => false,
            Self::Bool(b) => *b,
            Self::Int(i) => *i != 0,
            Self::Float(f) => *f != 0.0,
            Self::Str(s) => !s.is_empty(),
            Self::List(l) => !l.is_empty(),
            Self::Dict(d) => !d.is_empty(),
        }
    }

    /// Python `str(value)` (strings inside containers are quoted, as `repr` does).
    pub fn to_display(&self) -> String {
        let mut out = String::new();
        self.write_display(&mut out, false);
        out
    }

    fn write_display(&self, out: &mut String, quoted: bool) {
        match self {
            Self::None => out.push_str("None"),
            Self::Bool(true) => out.push_str("True"),
            Self::Bool(false) => out.push_str("False"),
            Self::Int(i) => out.push_str(&i.to_string()),
            Self::Float(f) => out.push_str(&float_repr(*f)),
            Self::Str(s) if quoted => out.push_str(&str_repr(s)),
            Self::Str(s) => out.push_str(s),
            Self::List(items) => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    item.write_display(out, true);
                }
                out.push(']');
            }
            Self::Dict(entries) => {
                out.push('{');
                for (i, (k, v)) in entries.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    out.push_str(&str_repr(k));
                    out.push_str(": ");
                    v.write_display(out, true);
                }
                out.push('}');
            }
        }
    }

    /// Rough size in units of work: characters of strings, elements of containers.
    fn weight(&self) -> u64 {
        match self {
            Self::Str(s) => s.len() as u64,
            Self::List(l) => l.len() as u64,
            Self::Dict(d) => d.len() as u64,
            _ => 1,
        }
    }
}

/// Structural equality with Python's rules (`True == 1`, `1 == 1.0`, no cross-type errors).
impl PartialEq for Value {
    fn eq(&self, other: &Self) -> bool {
        let mut budget = Budget::unlimited();
        py_eq(self, other, &mut budget).unwrap_or(false)
    }
}

/// Python's `repr` of a float: shortest round-trip digits, exponent form outside
/// `1e-4 <= |x| < 1e16`.
fn float_repr(f: f64) -> String {
    if f.is_nan() {
        return "nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { "inf".into() } else { "-inf".into() };
    }
    if f == 0.0 {
        return if f.is_sign_negative() {
            "-0.0".into()
        } else {
            "0.0".into()
        };
    }
    let sci = format!("{f:e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((sci.as_str(), "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if (-4..16).contains(&exp) {
        let plain = format!("{f}");
        if plain.contains('.') {
            plain
        } else {
            format!("{plain}.0")
        }
    } else {
        let sign = if exp < 0 { '-' } else { '+' };
        format!("{mantissa}e{sign}{:02}", exp.abs())
    }
}

/// Python's `repr` of a string: single quotes unless the text has some and no double ones.
fn str_repr(s: &str) -> String {
    let quote = if s.contains('\'') && !s.contains('"') {
        '"'
    } else {
        '\''
    };
    let mut out = String::with_capacity(s.len() + 2);
    out.push(quote);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if c == quote => {
                out.push('\\');
                out.push(c);
            }
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c => out.push(c),
        }
    }
    out.push(quote);
    out
}

// ---------------------------------------------------------------------------------------------
// Tokens
// ---------------------------------------------------------------------------------------------

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Name(String),
    Int(i64),
    Float(f64),
    Str(String),
    Op(&'static str),
    End,
}

#[derive(Debug, Clone, PartialEq)]
struct Token {
    tok: Tok,
    /// 0-based character index.
    pos: usize,
}

const OPS: &[&str] = &[
    "==", "!=", "<=", ">=", "<", ">", "(", ")", "[", "]", ",", ".", ":", "+", "-", "*", "/", "%",
];

/// Two-character sequences Python has but this language refuses, with the advice given.
const REFUSED: &[(&str, &str)] = &[
    ("**", "'**' (power) is not supported"),
    (
        "//",
        "'//' (floor division) is not supported; use int(a / b)",
    ),
    ("&&", "'&&' is not an operator; use 'and'"),
    ("||", "'||' is not an operator; use 'or'"),
    (":=", "assignment is not allowed"),
];

fn parse_error<T>(pos: usize, reason: impl Into<String>) -> Result<T, ParseError> {
    Err(ParseError {
        position: pos + 1,
        reason: reason.into(),
    })
}

fn tokenize(src: &str) -> Result<Vec<Token>, ParseError> {
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
fn number(chars: &[char], start: usize) -> Result<(Tok, usize), ParseError> {
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
fn string(chars: &[char], start: usize) -> Result<(String, usize), ParseError> {
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

// ---------------------------------------------------------------------------------------------
// AST
// ---------------------------------------------------------------------------------------------

/// A variable of the condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Var {
    Output,
    Data,
    ExitCode,
    PrevOutput,
    Changed,
}

const VARIABLES: &[(&str, Var)] = &[
    ("output", Var::Output),
    ("data", Var::Data),
    ("exit_code", Var::ExitCode),
    ("prev_output", Var::PrevOutput),
    ("changed", Var::Changed),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Builtin {
    Len,
    Str,
    Int,
    Float,
    Bool,
    Abs,
    Min,
    Max,
    Any,
    All,
    Sorted,
}

/// Name, function, (least, most) positional arguments (`usize::MAX` = any number).
const BUILTINS: &[(&str, Builtin, usize, usize)] = &[
    ("len", Builtin::Len, 1, 1),
    ("str", Builtin::Str, 0, 1),
    ("int", Builtin::Int, 0, 1),
    ("float", Builtin::Float, 0, 1),
    ("bool", Builtin::Bool, 0, 1),
    ("abs", Builtin::Abs, 1, 1),
    ("min", Builtin::Min, 1, usize::MAX),
    ("max", Builtin::Max, 1, usize::MAX),
    ("any", Builtin::Any, 1, 1),
    ("all", Builtin::All, 1, 1),
    ("sorted", Builtin::Sorted, 1, 1),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TypeName {
    Str,
    Int,
    Float,
    Bool,
    List,
    Dict,
}

const TYPE_NAMES: &[(&str, TypeName)] = &[
    ("str", TypeName::Str),
    ("int", TypeName::Int),
    ("float", TypeName::Float),
    ("bool", TypeName::Bool),
    ("list", TypeName::List),
    ("dict", TypeName::Dict),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Lower,
    Upper,
    Strip,
    Lstrip,
    Rstrip,
    Startswith,
    Endswith,
    Split,
    Splitlines,
    Find,
    Count,
    Replace,
    Contains,
    Get,
    Keys,
    Values,
    Items,
    Index,
}

/// Name, method, (least, most) arguments.
const METHODS: &[(&str, Method, usize, usize)] = &[
    ("lower", Method::Lower, 0, 0),
    ("upper", Method::Upper, 0, 0),
    ("strip", Method::Strip, 0, 1),
    ("lstrip", Method::Lstrip, 0, 1),
    ("rstrip", Method::Rstrip, 0, 1),
    ("startswith", Method::Startswith, 1, 1),
    ("endswith", Method::Endswith, 1, 1),
    ("split", Method::Split, 0, 2),
    ("splitlines", Method::Splitlines, 0, 0),
    ("find", Method::Find, 1, 1),
    ("count", Method::Count, 1, 1),
    ("replace", Method::Replace, 2, 2),
    ("contains", Method::Contains, 1, 1),
    ("get", Method::Get, 1, 2),
    ("keys", Method::Keys, 0, 0),
    ("values", Method::Values, 0, 0),
    ("items", Method::Items, 0, 0),
    ("index", Method::Index, 1, 1),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CmpOp {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
    In,
    NotIn,
    Is,
    IsNot,
}

#[derive(Debug, Clone)]
enum Expr {
    Lit(Value),
    Var(Var),
    List(Vec<Node>),
    Not(Box<Node>),
    Neg(Box<Node>),
    Pos(Box<Node>),
    And(Box<Node>, Box<Node>),
    Or(Box<Node>, Box<Node>),
    Bin(BinOp, Box<Node>, Box<Node>),
    Compare(Box<Node>, Vec<(CmpOp, Node)>),
    Index(Box<Node>, Box<Node>),
    Slice(Box<Node>, Option<Box<Node>>, Option<Box<Node>>),
    Call(Builtin, Vec<Node>),
    IsInstance(Box<Node>, Vec<TypeName>),
    Method(Box<Node>, Method, Vec<Node>),
}

#[derive(Debug, Clone)]
struct Node {
    expr: Expr,
    /// 0-based character index where the node starts.
    pos: usize,
}

fn node(expr: Expr, pos: usize) -> Node {
    Node { expr, pos }
}

// ---------------------------------------------------------------------------------------------
// Parser
// ---------------------------------------------------------------------------------------------

struct Parser {
    tokens: Vec<Token>,
    at: usize,
    depth: usize,
}

fn allowed_names() -> String {
    let mut names: Vec<&str> = VARIABLES.iter().map(|(n, _)| *n).collect();
    names.extend(["True", "False", "None"]);
    names.extend(BUILTINS.iter().map(|(n, ..)| *n));
    names.push("isinstance");
    names.join(", ")
}

fn method_names() -> String {
    METHODS
        .iter()
        .map(|(n, ..)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

impl Parser {
    fn peek(&self) -> &Token {
        // The token list always ends with `End`, and `at` never passes it.
        &self.tokens[self.at.min(self.tokens.len() - 1)]
    }

    fn peek2(&self) -> &Tok {
        &self.tokens[(self.at + 1).min(self.tokens.len() - 1)].tok
    }

    fn advance(&mut self) -> Token {
        let token = self.peek().clone();
        if self.at < self.tokens.len() - 1 {
            self.at += 1;
        }
        token
    }

    fn is_op(&self, op: &str) -> bool {
        matches!(&self.peek().tok, Tok::Op(o) if *o == op)
    }

    fn is_name(&self, name: &str) -> bool {
        matches!(&self.peek().tok, Tok::Name(n) if n == name)
    }

    fn expect_op(&mut self, op: &str) -> Result<Token, ParseError> {
        if self.is_op(op) {
            Ok(self.advance())
        } else {
            let token = self.peek().clone();
            parse_error(
                token.pos,
                format!("expected '{op}', found {}", describe(&token.tok)),
            )
        }
    }

    fn enter(&mut self, pos: usize) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return parse_error(
                pos,
                format!("expression nested too deeply (limit {MAX_DEPTH} levels)"),
            );
        }
        Ok(())
    }

    fn leave(&mut self) {
        self.depth -= 1;
    }

    fn expression(&mut self) -> Result<Node, ParseError> {
        let pos = self.peek().pos;
        self.enter(pos)?;
        let out = self.or();
        self.leave();
        out
    }

    fn or(&mut self) -> Result<Node, ParseError> {
        let mut left = self.and()?;
        while self.is_name("or") {
            self.advance();
            let right = self.and()?;
            let pos = left.pos;
            left = node(Expr::Or(Box::new(left), Box::new(right)), pos);
        }
        Ok(left)
    }

    fn and(&mut self) -> Result<Node, ParseError> {
        let mut left = self.not()?;
        while self.is_name("and") {
            self.advance();
            let right = self.not()?;
            let pos = left.pos;
            left = node(Expr::And(Box::new(left), Box::new(right)), pos);
        }
        Ok(left)
    }

    fn not(&mut self) -> Result<Node, ParseError> {
        if self.is_name("not") {
            let pos = self.advance().pos;
            self.enter(pos)?;
            let inner = self.not();
            self.leave();
            return Ok(node(Expr::Not(Box::new(inner?)), pos));
        }
        self.comparison()
    }

    fn comparison(&mut self) -> Result<Node, ParseError> {
        let first = self.sum()?;
        let mut rest = Vec::new();
        loop {
            let op = match &self.peek().tok {
                Tok::Op("==") => CmpOp::Eq,
                Tok::Op("!=") => CmpOp::Ne,
                Tok::Op("<") => CmpOp::Lt,
                Tok::Op("<=") => CmpOp::Le,
                Tok::Op(">") => CmpOp::Gt,
                Tok::Op(">=") => CmpOp::Ge,
                Tok::Name(n) if n == "in" => CmpOp::In,
                Tok::Name(n) if n == "is" => {
                    if matches!(self.peek2(), Tok::Name(n) if n == "not") {
                        self.advance();
                        CmpOp::IsNot
                    } else {
                        CmpOp::Is
                    }
                }
                Tok::Name(n) if n == "not" => {
                    if matches!(self.peek2(), Tok::Name(n) if n == "in") {
                        self.advance();
                        CmpOp::NotIn
                    } else {
                        let pos = self.peek().pos;
                        return parse_error(pos, "expected 'in' after 'not' in a comparison");
                    }
                }
                _ => break,
            };
            self.advance();
            rest.push((op, self.sum()?));
        }
        if rest.is_empty() {
            return Ok(first);
        }
        let pos = first.pos;
        Ok(node(Expr::Compare(Box::new(first), rest), pos))
    }

    fn sum(&mut self) -> Result<Node, ParseError> {
        let mut left = self.product()?;
        loop {
            let op = if self.is_op("+") {
                BinOp::Add
            } else if self.is_op("-") {
                BinOp::Sub
            } else {
                break;
            };
            self.advance();
            let right = self.product()?;
            let pos = left.pos;
            left = node(Expr::Bin(op, Box::new(left), Box::new(right)), pos);
        }
        Ok(left)
    }

    fn product(&mut self) -> Result<Node, ParseError> {
        let mut left = self.unary()?;
        loop {
            let op = if self.is_op("*") {
                BinOp::Mul
            } else if self.is_op("/") {
                BinOp::Div
            } else if self.is_op("%") {
                BinOp::Mod
            } else {
                break;
            };
            self.advance();
            let right = self.unary()?;
            let pos = left.pos;
            left = node(Expr::Bin(op, Box::new(left), Box::new(right)), pos);
        }
        Ok(left)
    }

    fn unary(&mut self) -> Result<Node, ParseError> {
        if self.is_op("-") || self.is_op("+") {
            let token = self.advance();
            self.enter(token.pos)?;
            let inner = self.unary();
            self.leave();
            let inner = Box::new(inner?);
            let expr = if token.tok == Tok::Op("-") {
                Expr::Neg(inner)
            } else {
                Expr::Pos(inner)
            };
            return Ok(node(expr, token.pos));
        }
        self.postfix()
    }

    fn postfix(&mut self) -> Result<Node, ParseError> {
        let mut value = self.atom()?;
        loop {
            if self.is_op("[") {
                let open = self.advance().pos;
                value = self.subscript(value, open)?;
                self.expect_op("]")?;
            } else if self.is_op(".") {
                let dot = self.advance().pos;
                let token = self.advance();
                let Tok::Name(name) = &token.tok else {
                    return parse_error(
                        token.pos,
                        format!(
                            "expected a method name after '.', found {}",
                            describe(&token.tok)
                        ),
                    );
                };
                let Some((_, method, least, most)) =
                    METHODS.iter().find(|(n, ..)| *n == name.as_str()).copied()
                else {
                    return parse_error(
                        token.pos,
                        format!(
                            "attribute or method '{name}' is not allowed (methods: {})",
                            method_names()
                        ),
                    );
                };
                if !self.is_op("(") {
                    return parse_error(
                        token.pos,
                        format!("'.{name}' must be called: write .{name}(…)"),
                    );
                }
                let args = self.arguments(&format!(".{name}()"), least, most)?;
                value = node(Expr::Method(Box::new(value), method, args), dot);
            } else if self.is_op("(") {
                let pos = self.peek().pos;
                return parse_error(pos, "only builtins and methods can be called");
            } else {
                return Ok(value);
            }
        }
    }

    fn subscript(&mut self, target: Node, open: usize) -> Result<Node, ParseError> {
        if self.is_op("]") {
            return parse_error(open, "empty subscript");
        }
        let start = if self.is_op(":") {
            None
        } else {
            Some(Box::new(self.expression()?))
        };
        if !self.is_op(":") {
            return match start {
                Some(index) => Ok(node(Expr::Index(Box::new(target), index), open)),
                None => parse_error(open, "empty subscript"),
            };
        }
        self.advance();
        let end = if self.is_op("]") {
            None
        } else {
            Some(Box::new(self.expression()?))
        };
        if self.is_op(":") {
            let pos = self.peek().pos;
            return parse_error(pos, "slice steps are not supported");
        }
        Ok(node(Expr::Slice(Box::new(target), start, end), open))
    }

    /// `(` args `)` with arity checked; the caller checked that `(` is next.
    fn arguments(
        &mut self,
        what: &str,
        least: usize,
        most: usize,
    ) -> Result<Vec<Node>, ParseError> {
        let open = self.expect_op("(")?.pos;
        let args = self.items(")")?;
        self.expect_op(")")?;
        if args.len() < least || args.len() > most {
            let expected = match (least, most) {
                (1, 1) => "exactly 1 argument".to_string(),
                (l, m) if l == m => format!("exactly {l} arguments"),
                (1, usize::MAX) => "at least 1 argument".to_string(),
                (l, usize::MAX) => format!("at least {l} arguments"),
                (l, m) => format!("{l} to {m} arguments"),
            };
            return parse_error(
                open,
                format!("{what} takes {expected} ({} given)", args.len()),
            );
        }
        Ok(args)
    }

    /// Comma-separated expressions up to (not including) `close`; a trailing comma is fine.
    fn items(&mut self, close: &str) -> Result<Vec<Node>, ParseError> {
        let mut items = Vec::new();
        while !self.is_op(close) {
            items.push(self.expression()?);
            if self.is_op(",") {
                self.advance();
            } else {
                break;
            }
        }
        Ok(items)
    }

    fn atom(&mut self) -> Result<Node, ParseError> {
        let token = self.advance();
        let pos = token.pos;
        match token.tok {
            Tok::Int(i) => Ok(node(Expr::Lit(Value::Int(i)), pos)),
            Tok::Float(f) => Ok(node(Expr::Lit(Value::Float(f)), pos)),
            Tok::Str(s) => Ok(node(Expr::Lit(Value::str(&s)), pos)),
            Tok::Op("(") => self.parenthesised(pos),
            Tok::Op("[") => {
                let items = self.items("]")?;
                self.expect_op("]")?;
                Ok(node(Expr::List(items), pos))
            }
            Tok::Name(name) => self.name(name, pos),
            Tok::End => parse_error(pos, "unexpected end of expression"),
            other => parse_error(pos, format!("unexpected {}", describe(&other))),
        }
    }

    /// After `(`: a parenthesised expression or a tuple.
    fn parenthesised(&mut self, open: usize) -> Result<Node, ParseError> {
        if self.is_op(")") {
            self.advance();
            return Ok(node(Expr::List(Vec::new()), open));
        }
        let first = self.expression()?;
        if !self.is_op(",") {
            self.expect_op(")")?;
            return Ok(first);
        }
        self.advance();
        let mut items = vec![first];
        items.extend(self.items(")")?);
        self.expect_op(")")?;
        Ok(node(Expr::List(items), open))
    }

    fn name(&mut self, name: String, pos: usize) -> Result<Node, ParseError> {
        match name.as_str() {
            "True" | "true" => return Ok(node(Expr::Lit(Value::Bool(true)), pos)),
            "False" | "false" => return Ok(node(Expr::Lit(Value::Bool(false)), pos)),
            "None" | "null" => return Ok(node(Expr::Lit(Value::None), pos)),
            _ => {}
        }
        if let Some((_, var)) = VARIABLES.iter().find(|(n, _)| *n == name) {
            return Ok(node(Expr::Var(*var), pos));
        }
        if name == "isinstance" {
            return self.isinstance(pos);
        }
        if let Some((_, builtin, least, most)) = BUILTINS.iter().find(|(n, ..)| *n == name).copied()
        {
            if !self.is_op("(") {
                return parse_error(
                    pos,
                    format!("'{name}' must be called, or used as a type in isinstance()"),
                );
            }
            let args = self.arguments(&format!("{name}()"), least, most)?;
            return Ok(node(Expr::Call(builtin, args), pos));
        }
        if TYPE_NAMES.iter().any(|(n, _)| *n == name) {
            return parse_error(
                pos,
                format!("type name '{name}' can only be used in isinstance()"),
            );
        }
        let reason = match name.as_str() {
            "and" | "or" | "in" | "is" => format!("'{name}' needs an operand before it"),
            "not" => "'not' must start an operand; parenthesise it: (not …)".to_string(),
            _ => format!("unknown name '{name}' (allowed: {})", allowed_names()),
        };
        parse_error(pos, reason)
    }

    /// After `isinstance`: `(` expression `,` type or tuple of types `)`.
    fn isinstance(&mut self, pos: usize) -> Result<Node, ParseError> {
        self.expect_op("(")?;
        let value = self.expression()?;
        self.expect_op(",")?;
        let mut types = Vec::new();
        if self.is_op("(") {
            self.advance();
            while !self.is_op(")") {
                types.push(self.type_name()?);
                if self.is_op(",") {
                    self.advance();
                } else {
                    break;
                }
            }
            self.expect_op(")")?;
            if types.is_empty() {
                return parse_error(pos, "isinstance() needs at least one type");
            }
        } else {
            types.push(self.type_name()?);
        }
        if self.is_op(",") {
            self.advance();
        }
        self.expect_op(")")?;
        Ok(node(Expr::IsInstance(Box::new(value), types), pos))
    }

    fn type_name(&mut self) -> Result<TypeName, ParseError> {
        let token = self.advance();
        if let Tok::Name(name) = &token.tok
            && let Some((_, t)) = TYPE_NAMES.iter().find(|(n, _)| n == name)
        {
            return Ok(*t);
        }
        parse_error(
            token.pos,
            format!(
                "isinstance() types must be among str, int, float, bool, list, dict; found {}",
                describe(&token.tok)
            ),
        )
    }
}

fn describe(tok: &Tok) -> String {
    match tok {
        Tok::Name(n) => format!("'{n}'"),
        Tok::Int(i) => format!("number {i}"),
        Tok::Float(f) => format!("number {}", float_repr(*f)),
        Tok::Str(_) => "a string".to_string(),
        Tok::Op(o) => format!("'{o}'"),
        Tok::End => "end of expression".to_string(),
    }
}

// ---------------------------------------------------------------------------------------------
// The parsed expression and its variables
// ---------------------------------------------------------------------------------------------

/// A parsed, checked `stop_on` expression.
#[derive(Debug, Clone)]
pub struct Expression {
    root: Node,
    source: String,
}

impl Expression {
    /// Parses and checks `source` (see the module docs for the grammar and the limits).
    pub fn parse(source: &str) -> Result<Self, ParseError> {
        let count = source.chars().count();
        if count > MAX_EXPR_CHARS {
            return parse_error(
                MAX_EXPR_CHARS,
                format!("expression is {count} characters long; the limit is {MAX_EXPR_CHARS}"),
            );
        }
        if source.trim().is_empty() {
            return parse_error(0, "empty expression");
        }
        let tokens = tokenize(source)?;
        let mut parser = Parser {
            tokens,
            at: 0,
            depth: 0,
        };
        let root = parser.expression()?;
        let next = parser.peek().clone();
        if next.tok != Tok::End {
            return parse_error(
                next.pos,
                format!(
                    "unexpected {} after a complete expression",
                    describe(&next.tok)
                ),
            );
        }
        Ok(Self {
            root,
            source: source.to_owned(),
        })
    }

    /// The text the expression was parsed from.
    pub fn source(&self) -> &str {
        &self.source
    }

    /// Evaluates the expression over `vars`.
    pub fn evaluate(&self, vars: &Vars) -> Result<Value, EvalError> {
        let mut budget = Budget::new(MAX_WORK);
        eval(&self.root, vars, &mut budget)
    }

    /// Evaluates and takes Python truthiness of the result.
    pub fn is_true(&self, vars: &Vars) -> Result<bool, EvalError> {
        self.evaluate(vars).map(|v| v.truthy())
    }
}

/// The variables a condition sees after one poll.
#[derive(Debug, Clone)]
pub struct Vars {
    pub output: Value,
    pub data: Value,
    pub exit_code: i64,
    pub prev_output: Value,
    pub changed: bool,
}

impl Vars {
    /// The variables of a poll: `data` is `output` parsed as JSON (`None` when it is not).
    pub fn new(output: &str, exit_code: i64, prev_output: Option<&str>, changed: bool) -> Self {
        let data = serde_json::from_str::<serde_json::Value>(output)
            .map(|json| Value::from_json(&json))
            .unwrap_or(Value::None);
        Self {
            output: Value::str(output),
            data,
            exit_code,
            prev_output: prev_output.map_or(Value::None, Value::str),
            changed,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Evaluation
// ---------------------------------------------------------------------------------------------

struct Budget {
    left: u64,
}

impl Budget {
    fn new(units: u64) -> Self {
        Self { left: units }
    }

    fn unlimited() -> Self {
        Self { left: u64::MAX }
    }

    fn charge(&mut self, units: u64) -> Result<(), EvalError> {
        match self.left.checked_sub(units) {
            Some(left) => {
                self.left = left;
                Ok(())
            }
            None => {
                self.left = 0;
                err(format!(
                    "evaluation too expensive (work limit of {MAX_WORK} units exceeded)"
                ))
            }
        }
    }
}

fn check_str_len(bytes: usize) -> Result<(), EvalError> {
    if bytes > MAX_STR_BYTES {
        return err(format!(
            "string too large ({bytes} bytes; the limit is {MAX_STR_BYTES})"
        ));
    }
    Ok(())
}

fn check_list_len(len: usize) -> Result<(), EvalError> {
    if len > MAX_LIST_LEN {
        return err(format!(
            "list too large ({len} elements; the limit is {MAX_LIST_LEN})"
        ));
    }
    Ok(())
}

fn new_str(s: String) -> Result<Value, EvalError> {
    check_str_len(s.len())?;
    Ok(Value::Str(Arc::from(s)))
}

fn new_list(items: Vec<Value>) -> Result<Value, EvalError> {
    check_list_len(items.len())?;
    Ok(Value::List(Arc::new(items)))
}

fn eval(n: &Node, vars: &Vars, budget: &mut Budget) -> Result<Value, EvalError> {
    budget.charge(1)?;
    match &n.expr {
        Expr::Lit(v) => Ok(v.clone()),
        Expr::Var(var) => Ok(match var {
            Var::Output => vars.output.clone(),
            Var::Data => vars.data.clone(),
            Var::ExitCode => Value::Int(vars.exit_code),
            Var::PrevOutput => vars.prev_output.clone(),
            Var::Changed => Value::Bool(vars.changed),
        }),
        Expr::List(items) => {
            let mut out = Vec::with_capacity(items.len());
            for item in items {
                out.push(eval(item, vars, budget)?);
            }
            new_list(out)
        }
        Expr::Not(inner) => Ok(Value::Bool(!eval(inner, vars, budget)?.truthy())),
        Expr::Neg(inner) => negate(eval(inner, vars, budget)?),
        Expr::Pos(inner) => match eval(inner, vars, budget)? {
            Value::Bool(b) => Ok(Value::Int(i64::from(b))),
            v @ (Value::Int(_) | Value::Float(_)) => Ok(v),
            other => err(format!(
                "bad operand type for unary +: '{}'",
                other.type_name()
            )),
        },
        Expr::And(a, b) => {
            let left = eval(a, vars, budget)?;
            if left.truthy() {
                eval(b, vars, budget)
            } else {
                Ok(left)
            }
        }
        Expr::Or(a, b) => {
            let left = eval(a, vars, budget)?;
            if left.truthy() {
                Ok(left)
            } else {
                eval(b, vars, budget)
            }
        }
        Expr::Bin(op, a, b) => {
            let left = eval(a, vars, budget)?;
            let right = eval(b, vars, budget)?;
            binary(*op, &left, &right, budget)
        }
        Expr::Compare(first, rest) => {
            let mut left = eval(first, vars, budget)?;
            for (op, rhs) in rest {
                let right = eval(rhs, vars, budget)?;
                if !compare(*op, &left, &right, budget)? {
                    return Ok(Value::Bool(false));
                }
                left = right;
            }
            Ok(Value::Bool(true))
        }
        Expr::Index(target, index) => {
            let target = eval(target, vars, budget)?;
            let index = eval(index, vars, budget)?;
            subscript(&target, &index, budget)
        }
        Expr::Slice(target, start, end) => {
            let target = eval(target, vars, budget)?;
            let start = match start {
                Some(s) => eval(s, vars, budget)?,
                None => Value::None,
            };
            let end = match end {
                Some(e) => eval(e, vars, budget)?,
                None => Value::None,
            };
            slice(&target, &start, &end, budget)
        }
        Expr::Call(builtin, args) => {
            let mut values = Vec::with_capacity(args.len());
            for arg in args {
                values.push(eval(arg, vars, budget)?);
            }
            call(*builtin, &values, budget)
        }
        Expr::IsInstance(value, types) => {
            let value = eval(value, vars, budget)?;
            Ok(Value::Bool(types.iter().any(|t| is_instance(&value, *t))))
        }
        Expr::Method(target, method, args) => {
            let target = eval(target, vars, budget)?;
            let mut values = Vec::with_capacity(args.len());
            for arg in args {
                values.push(eval(arg, vars, budget)?);
            }
            call_method(&target, *method, &values, budget)
        }
    }
}

fn is_instance(value: &Value, t: TypeName) -> bool {
    matches!(
        (value, t),
        (Value::Str(_), TypeName::Str)
            | (Value::Int(_) | Value::Bool(_), TypeName::Int)
            | (Value::Float(_), TypeName::Float)
            | (Value::Bool(_), TypeName::Bool)
            | (Value::List(_), TypeName::List)
            | (Value::Dict(_), TypeName::Dict)
    )
}

/// A number operand: bools count as ints, as in Python.
#[derive(Debug, Clone, Copy)]
enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    fn of(v: &Value) -> Option<Self> {
        match v {
            Value::Bool(b) => Some(Self::Int(i64::from(*b))),
            Value::Int(i) => Some(Self::Int(*i)),
            Value::Float(f) => Some(Self::Float(*f)),
            _ => None,
        }
    }

    fn float(self) -> f64 {
        match self {
            Self::Int(i) => i as f64,
            Self::Float(f) => f,
        }
    }
}

fn overflow() -> EvalError {
    EvalError("integer overflow (64-bit integers only)".into())
}

fn negate(v: Value) -> Result<Value, EvalError> {
    match Num::of(&v) {
        Some(Num::Int(i)) => i.checked_neg().map(Value::Int).ok_or_else(overflow),
        Some(Num::Float(f)) => Ok(Value::Float(-f)),
        None => err(format!("bad operand type for unary -: '{}'", v.type_name())),
    }
}

fn unsupported(symbol: &str, a: &Value, b: &Value) -> EvalError {
    EvalError(format!(
        "unsupported operand type(s) for {symbol}: '{}' and '{}'",
        a.type_name(),
        b.type_name()
    ))
}

fn binary(op: BinOp, a: &Value, b: &Value, budget: &mut Budget) -> Result<Value, EvalError> {
    let symbol = match op {
        BinOp::Add => "+",
        BinOp::Sub => "-",
        BinOp::Mul => "*",
        BinOp::Div => "/",
        BinOp::Mod => "%",
    };
    if let (Some(x), Some(y)) = (Num::of(a), Num::of(b)) {
        return arithmetic(op, x, y);
    }
    match (op, a, b) {
        (BinOp::Add, Value::Str(x), Value::Str(y)) => {
            check_str_len(x.len().saturating_add(y.len()))?;
            budget.charge((x.len() + y.len()) as u64)?;
            new_str(format!("{x}{y}"))
        }
        (BinOp::Add, Value::List(x), Value::List(y)) => {
            check_list_len(x.len().saturating_add(y.len()))?;
            budget.charge((x.len() + y.len()) as u64)?;
            new_list(x.iter().chain(y.iter()).cloned().collect())
        }
        (BinOp::Mul, Value::Str(s), n) | (BinOp::Mul, n, Value::Str(s))
            if matches!(n, Value::Int(_) | Value::Bool(_)) =>
        {
            let times = repeat_count(n);
            let bytes = s.len().saturating_mul(times);
            check_str_len(bytes)?;
            budget.charge(bytes as u64)?;
            new_str(s.repeat(times))
        }
        (BinOp::Mul, Value::List(l), n) | (BinOp::Mul, n, Value::List(l))
            if matches!(n, Value::Int(_) | Value::Bool(_)) =>
        {
            let times = repeat_count(n);
            let len = l.len().saturating_mul(times);
            check_list_len(len)?;
            budget.charge(len as u64)?;
            let mut out = Vec::with_capacity(len);
            for _ in 0..times {
                out.extend(l.iter().cloned());
            }
            new_list(out)
        }
        (BinOp::Mod, Value::Str(_), _) => err("string formatting with '%' is not supported"),
        _ => Err(unsupported(symbol, a, b)),
    }
}

/// The repeat count of `str * n` / `list * n` (negative counts give an empty result).
fn repeat_count(n: &Value) -> usize {
    match Num::of(n) {
        Some(Num::Int(i)) if i > 0 => usize::try_from(i).unwrap_or(usize::MAX),
        _ => 0,
    }
}

fn arithmetic(op: BinOp, x: Num, y: Num) -> Result<Value, EvalError> {
    match (x, y) {
        (Num::Int(a), Num::Int(b)) => match op {
            BinOp::Add => a.checked_add(b).map(Value::Int).ok_or_else(overflow),
            BinOp::Sub => a.checked_sub(b).map(Value::Int).ok_or_else(overflow),
            BinOp::Mul => a.checked_mul(b).map(Value::Int).ok_or_else(overflow),
            BinOp::Div => {
                if b == 0 {
                    return err("division by zero");
                }
                Ok(Value::Float(a as f64 / b as f64))
            }
            BinOp::Mod => {
                if b == 0 {
                    return err("integer modulo by zero");
                }
                let r = a.checked_rem(b).ok_or_else(overflow)?;
                Ok(Value::Int(if r != 0 && ((r < 0) != (b < 0)) {
                    r + b
                } else {
                    r
                }))
            }
        },
        _ => {
            let (a, b) = (x.float(), y.float());
            match op {
                BinOp::Add => Ok(Value::Float(a + b)),
                BinOp::Sub => Ok(Value::Float(a - b)),
                BinOp::Mul => Ok(Value::Float(a * b)),
                BinOp::Div => {
                    if b == 0.0 {
                        return err("float division by zero");
                    }
                    Ok(Value::Float(a / b))
                }
                BinOp::Mod => {
                    if b == 0.0 {
                        return err("float modulo by zero");
                    }
                    let r = a % b;
                    Ok(Value::Float(if r != 0.0 && ((r < 0.0) != (b < 0.0)) {
                        r + b
                    } else {
                        r
                    }))
                }
            }
        }
    }
}

fn py_eq(a: &Value, b: &Value, budget: &mut Budget) -> Result<bool, EvalError> {
    budget.charge(1)?;
    if let (Some(x), Some(y)) = (Num::of(a), Num::of(b)) {
        return Ok(match (x, y) {
            (Num::Int(i), Num::Int(j)) => i == j,
            _ => x.float() == y.float(),
        });
    }
    Ok(match (a, b) {
        (Value::None, Value::None) => true,
        (Value::Str(x), Value::Str(y)) => {
            budget.charge(x.len().min(y.len()) as u64)?;
            x == y
        }
        (Value::List(x), Value::List(y)) => {
            if x.len() != y.len() {
                return Ok(false);
            }
            for (i, j) in x.iter().zip(y.iter()) {
                if !py_eq(i, j, budget)? {
                    return Ok(false);
                }
            }
            true
        }
        (Value::Dict(x), Value::Dict(y)) => {
            if x.len() != y.len() {
                return Ok(false);
            }
            for (k, v) in x.iter() {
                budget.charge(y.len() as u64)?;
                match y.iter().find(|(k2, _)| k2 == k) {
                    Some((_, v2)) if py_eq(v, v2, budget)? => {}
                    _ => return Ok(false),
                }
            }
            true
        }
        _ => false,
    })
}

/// Python ordering: `None` when the values are unordered (a NaN is involved).
fn py_cmp(a: &Value, b: &Value, budget: &mut Budget) -> Result<Option<Ordering>, EvalError> {
    budget.charge(1)?;
    if let (Some(x), Some(y)) = (Num::of(a), Num::of(b)) {
        return Ok(match (x, y) {
            (Num::Int(i), Num::Int(j)) => Some(i.cmp(&j)),
            _ => x.float().partial_cmp(&y.float()),
        });
    }
    match (a, b) {
        (Value::Str(x), Value::Str(y)) => {
            budget.charge(x.len().min(y.len()) as u64)?;
            // UTF-8 byte order is code point order, as Python compares strings.
            Ok(Some(x.as_bytes().cmp(y.as_bytes())))
        }
        (Value::List(x), Value::List(y)) => {
            for (i, j) in x.iter().zip(y.iter()) {
                if !py_eq(i, j, budget)? {
                    return py_cmp(i, j, budget);
                }
            }
            Ok(Some(x.len().cmp(&y.len())))
        }
        _ => err(format!(
            "ordering not supported between instances of '{}' and '{}'",
            a.type_name(),
            b.type_name()
        )),
    }
}

fn contains(container: &Value, item: &Value, budget: &mut Budget) -> Result<bool, EvalError> {
    match container {
        Value::Str(hay) => match item {
            Value::Str(needle) => {
                budget.charge(hay.len() as u64)?;
                Ok(hay.contains(&**needle))
            }
            other => err(format!(
                "'in <string>' requires string as left operand, not {}",
                other.type_name()
            )),
        },
        Value::List(items) => {
            for x in items.iter() {
                if py_eq(x, item, budget)? {
                    return Ok(true);
                }
            }
            Ok(false)
        }
        Value::Dict(entries) => {
            budget.charge(entries.len() as u64)?;
            Ok(match item {
                Value::Str(key) => entries.iter().any(|(k, _)| k == key),
                _ => false,
            })
        }
        other => err(format!(
            "argument of type '{}' is not iterable",
            other.type_name()
        )),
    }
}

fn compare(op: CmpOp, a: &Value, b: &Value, budget: &mut Budget) -> Result<bool, EvalError> {
    Ok(match op {
        CmpOp::Eq => py_eq(a, b, budget)?,
        CmpOp::Ne => !py_eq(a, b, budget)?,
        CmpOp::Lt => py_cmp(a, b, budget)? == Some(Ordering::Less),
        CmpOp::Le => matches!(
            py_cmp(a, b, budget)?,
            Some(Ordering::Less | Ordering::Equal)
        ),
        CmpOp::Gt => py_cmp(a, b, budget)? == Some(Ordering::Greater),
        CmpOp::Ge => matches!(
            py_cmp(a, b, budget)?,
            Some(Ordering::Greater | Ordering::Equal)
        ),
        CmpOp::In => contains(b, a, budget)?,
        CmpOp::NotIn => !contains(b, a, budget)?,
        CmpOp::Is => same(a, b, budget)?,
        CmpOp::IsNot => !same(a, b, budget)?,
    })
}

/// `is`: same type and equal value.
fn same(a: &Value, b: &Value, budget: &mut Budget) -> Result<bool, EvalError> {
    if std::mem::discriminant(a) != std::mem::discriminant(b) {
        return Ok(false);
    }
    py_eq(a, b, budget)
}

/// A Python index (negative counts from the end); `None` when out of range.
fn resolve_index(index: &Value, len: usize, what: &str) -> Result<Option<usize>, EvalError> {
    let i = match index {
        Value::Int(i) => *i,
        Value::Bool(b) => i64::from(*b),
        other => {
            return err(format!(
                "{what} indices must be integers, not {}",
                other.type_name()
            ));
        }
    };
    let len = i64::try_from(len).unwrap_or(i64::MAX);
    let i = if i < 0 { i + len } else { i };
    Ok((0..len)
        .contains(&i)
        .then(|| usize::try_from(i).unwrap_or(0)))
}

fn subscript(target: &Value, index: &Value, budget: &mut Budget) -> Result<Value, EvalError> {
    match target {
        Value::List(items) => match resolve_index(index, items.len(), "list")? {
            Some(i) => Ok(items[i].clone()),
            None => err("list index out of range"),
        },
        Value::Str(s) => {
            budget.charge(s.len() as u64)?;
            let len = s.chars().count();
            match resolve_index(index, len, "string")? {
                Some(i) => Ok(s
                    .chars()
                    .nth(i)
                    .map_or(Value::None, |c| Value::str(c.encode_utf8(&mut [0; 4])))),
                None => err("string index out of range"),
            }
        }
        Value::Dict(entries) => {
            budget.charge(entries.len() as u64)?;
            let found = match index {
                Value::Str(key) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
                _ => None,
            };
            match found {
                Some(v) => Ok(v.clone()),
                None => err(format!("KeyError: key {} not found", index_repr(index))),
            }
        }
        other => err(format!(
            "'{}' object is not subscriptable",
            other.type_name()
        )),
    }
}

fn index_repr(v: &Value) -> String {
    let mut out = String::new();
    v.write_display(&mut out, true);
    out.chars().take(80).collect()
}

/// Clamps an optional slice bound to `0..=len`, as Python does.
fn slice_bound(bound: &Value, len: usize, default: usize) -> Result<usize, EvalError> {
    let i = match bound {
        Value::None => return Ok(default),
        Value::Int(i) => *i,
        Value::Bool(b) => i64::from(*b),
        other => {
            return err(format!(
                "slice indices must be integers or None, not {}",
                other.type_name()
            ));
        }
    };
    let len_i = i64::try_from(len).unwrap_or(i64::MAX);
    let i = if i < 0 {
        (i + len_i).max(0)
    } else {
        i.min(len_i)
    };
    Ok(usize::try_from(i).unwrap_or(0))
}

fn slice(
    target: &Value,
    start: &Value,
    end: &Value,
    budget: &mut Budget,
) -> Result<Value, EvalError> {
    match target {
        Value::List(items) => {
            let from = slice_bound(start, items.len(), 0)?;
            let to = slice_bound(end, items.len(), items.len())?;
            budget.charge(to.saturating_sub(from) as u64)?;
            new_list(
                items
                    .get(from..to)
                    .map(<[Value]>::to_vec)
                    .unwrap_or_default(),
            )
        }
        Value::Str(s) => {
            budget.charge(s.len() as u64)?;
            let len = s.chars().count();
            let from = slice_bound(start, len, 0)?;
            let to = slice_bound(end, len, len)?;
            let text: String = s.chars().skip(from).take(to.saturating_sub(from)).collect();
            new_str(text)
        }
        other => err(format!(
            "'{}' object is not subscriptable",
            other.type_name()
        )),
    }
}

/// The items `for x in value` would give: list elements, string characters, dict keys.
fn iterate(value: &Value, budget: &mut Budget) -> Result<Vec<Value>, EvalError> {
    budget.charge(value.weight())?;
    match value {
        Value::List(items) => Ok(items.as_ref().clone()),
        Value::Str(s) => {
            let chars: Vec<Value> = s
                .chars()
                .map(|c| Value::str(c.encode_utf8(&mut [0; 4])))
                .collect();
            check_list_len(chars.len())?;
            Ok(chars)
        }
        Value::Dict(entries) => Ok(entries.iter().map(|(k, _)| Value::Str(k.clone())).collect()),
        other => err(format!("'{}' object is not iterable", other.type_name())),
    }
}

fn call(builtin: Builtin, args: &[Value], budget: &mut Budget) -> Result<Value, EvalError> {
    let first = args.first();
    match builtin {
        Builtin::Len => {
            let Some(v) = first else {
                return err("len() takes exactly one argument");
            };
            let n = match v {
                Value::Str(s) => {
                    budget.charge(s.len() as u64)?;
                    s.chars().count()
                }
                Value::List(l) => l.len(),
                Value::Dict(d) => d.len(),
                other => {
                    return err(format!(
                        "object of type '{}' has no len()",
                        other.type_name()
                    ));
                }
            };
            Ok(Value::Int(i64::try_from(n).unwrap_or(i64::MAX)))
        }
        Builtin::Str => match first {
            None => Ok(Value::str("")),
            Some(v @ Value::Str(_)) => Ok(v.clone()),
            Some(v) => {
                budget.charge(v.weight())?;
                new_str(bounded_display(v, budget)?)
            }
        },
        Builtin::Int => match first {
            None => Ok(Value::Int(0)),
            Some(v) => to_int(v),
        },
        Builtin::Float => match first {
            None => Ok(Value::Float(0.0)),
            Some(v) => to_float(v),
        },
        Builtin::Bool => Ok(Value::Bool(first.is_some_and(Value::truthy))),
        Builtin::Abs => match first.and_then(Num::of) {
            Some(Num::Int(i)) => i.checked_abs().map(Value::Int).ok_or_else(overflow),
            Some(Num::Float(f)) => Ok(Value::Float(f.abs())),
            None => err(format!(
                "bad operand type for abs(): '{}'",
                first.map_or("NoneType", Value::type_name)
            )),
        },
        Builtin::Min | Builtin::Max => {
            let name = if builtin == Builtin::Min {
                "min"
            } else {
                "max"
            };
            let items = match args {
                [single] => iterate(single, budget)?,
                many => many.to_vec(),
            };
            let mut best: Option<Value> = None;
            for item in items {
                best = Some(match best {
                    None => item,
                    Some(current) => {
                        let ord = py_cmp(&item, &current, budget)?;
                        let better = if builtin == Builtin::Min {
                            ord == Some(Ordering::Less)
                        } else {
                            ord == Some(Ordering::Greater)
                        };
                        if better { item } else { current }
                    }
                });
            }
            best.ok_or_else(|| EvalError(format!("{name}() arg is an empty sequence")))
        }
        Builtin::Any | Builtin::All => {
            let Some(v) = first else {
                return err("any()/all() take exactly one argument");
            };
            let items = iterate(v, budget)?;
            Ok(Value::Bool(if builtin == Builtin::Any {
                items.iter().any(Value::truthy)
            } else {
                items.iter().all(Value::truthy)
            }))
        }
        Builtin::Sorted => {
            let Some(v) = first else {
                return err("sorted() takes exactly one argument");
            };
            let items = iterate(v, budget)?;
            sort(items, budget).and_then(new_list)
        }
    }
}

/// `str(v)` of a container, refusing results over the size limit.
fn bounded_display(v: &Value, budget: &mut Budget) -> Result<String, EvalError> {
    let text = v.to_display();
    budget.charge(text.len() as u64)?;
    check_str_len(text.len())?;
    Ok(text)
}

/// A stable merge sort with Python ordering. Written out rather than `sort_by`, which may
/// panic when the order is not total (NaN) and cannot stop at the first comparison error.
fn sort(mut items: Vec<Value>, budget: &mut Budget) -> Result<Vec<Value>, EvalError> {
    if items.len() <= 1 {
        return Ok(items);
    }
    let right = items.split_off(items.len() / 2);
    let left = sort(items, budget)?;
    let right = sort(right, budget)?;
    let mut out = Vec::with_capacity(left.len() + right.len());
    let mut left = left.into_iter().peekable();
    let mut right = right.into_iter().peekable();
    while let (Some(l), Some(r)) = (left.peek(), right.peek()) {
        // Take from the right only when strictly less: equal items keep their order.
        let take_right = py_cmp(r, l, budget)? == Some(Ordering::Less);
        let next = if take_right {
            right.next()
        } else {
            left.next()
        };
        out.extend(next);
    }
    out.extend(left);
    out.extend(right);
    Ok(out)
}

fn to_int(v: &Value) -> Result<Value, EvalError> {
    match v {
        Value::Bool(b) => Ok(Value::Int(i64::from(*b))),
        Value::Int(i) => Ok(Value::Int(*i)),
        Value::Float(f) => {
            if f.is_nan() {
                return err("cannot convert float NaN to integer");
            }
            if f.is_infinite() {
                return err("cannot convert float infinity to integer");
            }
            let t = f.trunc();
            // i64::MAX as f64 rounds up to 2^63, which does not fit.
            if t >= -(2f64.powi(63)) && t < 2f64.powi(63) {
                Ok(Value::Int(t as i64))
            } else {
                Err(overflow())
            }
        }
        Value::Str(s) => {
            let text = s.trim();
            let digits = text.strip_prefix(['+', '-']).unwrap_or(text);
            let valid = !digits.is_empty()
                && !digits.starts_with('_')
                && !digits.ends_with('_')
                && !digits.contains("__")
                && digits.chars().all(|c| c.is_ascii_digit() || c == '_');
            let cleaned: String = text.chars().filter(|c| *c != '_').collect();
            match cleaned.parse::<i64>() {
                Ok(i) if valid => Ok(Value::Int(i)),
                Err(_) if valid => Err(overflow()),
                _ => err(format!(
                    "invalid literal for int() with base 10: {}",
                    index_repr(v)
                )),
            }
        }
        other => err(format!(
            "int() argument must be a string or a number, not '{}'",
            other.type_name()
        )),
    }
}

fn to_float(v: &Value) -> Result<Value, EvalError> {
    match Num::of(v) {
        Some(n) => Ok(Value::Float(n.float())),
        None => match v {
            Value::Str(s) => {
                let text = s.trim();
                let lower = text.to_ascii_lowercase();
                let known = matches!(
                    lower.trim_start_matches(['+', '-']),
                    "inf" | "infinity" | "nan"
                );
                let numeric = !text.is_empty()
                    && text
                        .chars()
                        .all(|c| c.is_ascii_digit() || matches!(c, '.' | 'e' | 'E' | '+' | '-'));
                match text.parse::<f64>() {
                    Ok(f) if known || numeric => Ok(Value::Float(f)),
                    _ => err(format!(
                        "could not convert string to float: {}",
                        index_repr(v)
                    )),
                }
            }
            other => err(format!(
                "float() argument must be a string or a number, not '{}'",
                other.type_name()
            )),
        },
    }
}

fn no_method(target: &Value, method: Method) -> EvalError {
    let name = METHODS
        .iter()
        .find(|(_, m, ..)| *m == method)
        .map_or("?", |(n, ..)| *n);
    EvalError(format!(
        "'{}' object has no method '{name}'",
        target.type_name()
    ))
}

fn str_arg<'a>(args: &'a [Value], i: usize, method: &str) -> Result<&'a str, EvalError> {
    match args.get(i) {
        Some(Value::Str(s)) => Ok(s),
        Some(other) => err(format!(
            "{method}() argument must be str, not {}",
            other.type_name()
        )),
        None => err(format!("{method}() is missing an argument")),
    }
}

fn call_method(
    target: &Value,
    method: Method,
    args: &[Value],
    budget: &mut Budget,
) -> Result<Value, EvalError> {
    budget.charge(target.weight())?;
    // The parser checked the arity; a missing argument reads as `None` all the same.
    let first = args.first().unwrap_or(&Value::None);
    match target {
        Value::Str(s) => {
            str_method(s, method, args, budget).ok_or_else(|| no_method(target, method))?
        }
        Value::Dict(entries) => match method {
            Method::Get => {
                let found = match first {
                    Value::Str(key) => entries.iter().find(|(k, _)| k == key).map(|(_, v)| v),
                    _ => None,
                };
                Ok(found
                    .cloned()
                    .unwrap_or_else(|| args.get(1).cloned().unwrap_or(Value::None)))
            }
            Method::Keys => new_list(entries.iter().map(|(k, _)| Value::Str(k.clone())).collect()),
            Method::Values => new_list(entries.iter().map(|(_, v)| v.clone()).collect()),
            Method::Items => new_list(
                entries
                    .iter()
                    .map(|(k, v)| Value::List(Arc::new(vec![Value::Str(k.clone()), v.clone()])))
                    .collect(),
            ),
            Method::Contains => Ok(Value::Bool(contains(target, first, budget)?)),
            _ => Err(no_method(target, method)),
        },
        Value::List(items) => match method {
            Method::Count => {
                let mut n = 0i64;
                for item in items.iter() {
                    if py_eq(item, first, budget)? {
                        n += 1;
                    }
                }
                Ok(Value::Int(n))
            }
            Method::Index => {
                for (i, item) in items.iter().enumerate() {
                    if py_eq(item, first, budget)? {
                        return Ok(Value::Int(i64::try_from(i).unwrap_or(i64::MAX)));
                    }
                }
                err(format!("{} is not in list", index_repr(first)))
            }
            Method::Contains => Ok(Value::Bool(contains(target, first, budget)?)),
            _ => Err(no_method(target, method)),
        },
        _ => Err(no_method(target, method)),
    }
}

/// A string method; `None` when strings have no such method.
fn str_method(
    s: &str,
    method: Method,
    args: &[Value],
    budget: &mut Budget,
) -> Option<Result<Value, EvalError>> {
    let strip_set = |args: &[Value], name: &str| -> Result<Option<Vec<char>>, EvalError> {
        match args.first() {
            None | Some(Value::None) => Ok(None),
            Some(Value::Str(chars)) => Ok(Some(chars.chars().collect())),
            Some(other) => err(format!(
                "{name} arg must be None or str, not {}",
                other.type_name()
            )),
        }
    };
    let result = match method {
        Method::Lower => new_str(s.to_lowercase()),
        Method::Upper => new_str(s.to_uppercase()),
        Method::Strip | Method::Lstrip | Method::Rstrip => {
            let name = match method {
                Method::Strip => "strip",
                Method::Lstrip => "lstrip",
                _ => "rstrip",
            };
            strip_set(args, name).and_then(|set| {
                let is_stripped = |c: char| match &set {
                    None => c.is_whitespace(),
                    Some(set) => set.contains(&c),
                };
                let out = match method {
                    Method::Strip => s.trim_matches(is_stripped),
                    Method::Lstrip => s.trim_start_matches(is_stripped),
                    _ => s.trim_end_matches(is_stripped),
                };
                new_str(out.to_owned())
            })
        }
        Method::Startswith | Method::Endswith => {
            let name = if method == Method::Startswith {
                "startswith"
            } else {
                "endswith"
            };
            let test = |p: &str| {
                if method == Method::Startswith {
                    s.starts_with(p)
                } else {
                    s.ends_with(p)
                }
            };
            match args.first().unwrap_or(&Value::None) {
                Value::Str(p) => Ok(Value::Bool(test(p))),
                Value::List(options) => {
                    let mut hit = Ok(false);
                    for option in options.iter() {
                        match option {
                            Value::Str(p) if test(p) => {
                                hit = Ok(true);
                                break;
                            }
                            Value::Str(_) => {}
                            other => {
                                hit = err(format!(
                                    "tuple for {name} must only contain str, not {}",
                                    other.type_name()
                                ));
                                break;
                            }
                        }
                    }
                    hit.map(Value::Bool)
                }
                other => err(format!(
                    "{name} first arg must be str or a tuple of str, not {}",
                    other.type_name()
                )),
            }
        }
        Method::Split => split(s, args),
        Method::Splitlines => new_list(s.lines().map(Value::str).collect()),
        Method::Find => str_arg(args, 0, "find").map(|needle| {
            Value::Int(match s.find(needle) {
                Some(byte) => i64::try_from(s[..byte].chars().count()).unwrap_or(i64::MAX),
                None => -1,
            })
        }),
        Method::Count => str_arg(args, 0, "count").map(|needle| {
            let n = if needle.is_empty() {
                s.chars().count() + 1
            } else {
                s.matches(needle).count()
            };
            Value::Int(i64::try_from(n).unwrap_or(i64::MAX))
        }),
        Method::Replace => str_arg(args, 0, "replace").and_then(|old| {
            let new = str_arg(args, 1, "replace")?;
            let hits = if old.is_empty() {
                s.chars().count() + 1
            } else {
                s.matches(old).count()
            };
            let grown = hits.saturating_mul(new.len());
            check_str_len(s.len().saturating_add(grown))?;
            budget.charge(grown as u64)?;
            new_str(s.replace(old, new))
        }),
        Method::Contains => {
            str_arg(args, 0, "contains").map(|needle| Value::Bool(s.contains(needle)))
        }
        _ => return None,
    };
    Some(result)
}

/// `str.split([sep[, maxsplit]])` with Python's rules for a missing separator.
fn split(s: &str, args: &[Value]) -> Result<Value, EvalError> {
    let max = match args.get(1) {
        None => -1,
        Some(Value::Int(i)) => *i,
        Some(Value::Bool(b)) => i64::from(*b),
        Some(other) => {
            return err(format!(
                "split() maxsplit must be an integer, not {}",
                other.type_name()
            ));
        }
    };
    let limit = usize::try_from(max).ok();
    let parts: Vec<Value> = match args.first() {
        None | Some(Value::None) => {
            let mut parts = Vec::new();
            let mut rest = s.trim_start();
            while !rest.is_empty() {
                if limit.is_some_and(|l| parts.len() >= l) {
                    parts.push(Value::str(rest));
                    break;
                }
                let end = rest.find(char::is_whitespace).unwrap_or(rest.len());
                parts.push(Value::str(&rest[..end]));
                rest = rest[end..].trim_start();
            }
            parts
        }
        Some(Value::Str(sep)) => {
            if sep.is_empty() {
                return err("split(): empty separator");
            }
            match limit {
                Some(l) => s
                    .splitn(l.saturating_add(1), &**sep)
                    .map(Value::str)
                    .collect(),
                None => s.split(&**sep).map(Value::str).collect(),
            }
        }
        Some(other) => {
            return err(format!(
                "split() separator must be str or None, not {}",
                other.type_name()
            ));
        }
    };
    new_list(parts)
}

#[cfg(test)]
#[path = "expr_tests.rs"]
mod tests;

//! The `stop_on` expression language: a small, safe, Python-flavoured language of our own.
//!
//! A watch's `stop_on` condition is an *expression* over five variables — never Python
//! `eval`. This module tokenizes it, parses it by recursive descent into an AST, checks every
//! name while parsing, and evaluates the AST over a [`Value`] type with bounded work and
//! bounded value sizes. Nothing in it can run code, read files, loop without bound or panic.
//!
//! `lexer` tokenizes it, `parser` parses it by recursive descent into an AST (checking every
//! name), `eval` evaluates the AST over the `value` types; this module holds the limits,
//! the errors and the public [`Expression`].
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

use std::fmt;

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

mod eval;
mod lexer;
mod parser;
mod value;

use eval::*;
use lexer::*;
use parser::*;
pub use value::Value;
use value::*;

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

#[cfg(test)]
mod tests;

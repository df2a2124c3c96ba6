//! The AST and the recursive-descent parser that builds it, checking every name (variables,
//! builtins, types, methods) and the nesting depth while parsing.

use super::*;

// ---------------------------------------------------------------------------------------------
// AST
// ---------------------------------------------------------------------------------------------

/// A variable of the condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Var {
    Output,
    Data,
    ExitCode,
    PrevOutput,
    Changed,
}

pub(super) const VARIABLES: &[(&str, Var)] = &[
    ("output", Var::Output),
    ("data", Var::Data),
    ("exit_code", Var::ExitCode),
    ("prev_output", Var::PrevOutput),
    ("changed", Var::Changed),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Builtin {
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
pub(super) const BUILTINS: &[(&str, Builtin, usize, usize)] = &[
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
pub(super) enum TypeName {
    Str,
    Int,
    Float,
    Bool,
    List,
    Dict,
}

pub(super) const TYPE_NAMES: &[(&str, TypeName)] = &[
    ("str", TypeName::Str),
    ("int", TypeName::Int),
    ("float", TypeName::Float),
    ("bool", TypeName::Bool),
    ("list", TypeName::List),
    ("dict", TypeName::Dict),
];

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Method {
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
pub(super) const METHODS: &[(&str, Method, usize, usize)] = &[
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
pub(super) enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum CmpOp {
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
pub(super) enum Expr {
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
pub(super) struct Node {
    pub(super) expr: Expr,
    /// 0-based character index where the node starts.
    pub(super) pos: usize,
}

pub(super) fn node(expr: Expr, pos: usize) -> Node {
    Node { expr, pos }
}

// ---------------------------------------------------------------------------------------------
// Parser
// ---------------------------------------------------------------------------------------------

pub(super) struct Parser {
    pub(super) tokens: Vec<Token>,
    pub(super) at: usize,
    pub(super) depth: usize,
}

pub(super) fn allowed_names() -> String {
    let mut names: Vec<&str> = VARIABLES.iter().map(|(n, _)| *n).collect();
    names.extend(["True", "False", "None"]);
    names.extend(BUILTINS.iter().map(|(n, ..)| *n));
    names.push("isinstance");
    names.join(", ")
}

pub(super) fn method_names() -> String {
    METHODS
        .iter()
        .map(|(n, ..)| *n)
        .collect::<Vec<_>>()
        .join(", ")
}

impl Parser {
    pub(super) fn peek(&self) -> &Token {
        // The token list always ends with `End`, and `at` never passes it.
        &self.tokens[self.at.min(self.tokens.len() - 1)]
    }

    pub(super) fn peek2(&self) -> &Tok {
        &self.tokens[(self.at + 1).min(self.tokens.len() - 1)].tok
    }

    pub(super) fn advance(&mut self) -> Token {
        let token = self.peek().clone();
        if self.at < self.tokens.len() - 1 {
            self.at += 1;
        }
        token
    }

    pub(super) fn is_op(&self, op: &str) -> bool {
        matches!(&self.peek().tok, Tok::Op(o) if *o == op)
    }

    pub(super) fn is_name(&self, name: &str) -> bool {
        matches!(&self.peek().tok, Tok::Name(n) if n == name)
    }

    pub(super) fn expect_op(&mut self, op: &str) -> Result<Token, ParseError> {
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

    pub(super) fn enter(&mut self, pos: usize) -> Result<(), ParseError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return parse_error(
                pos,
                format!("expression nested too deeply (limit {MAX_DEPTH} levels)"),
            );
        }
        Ok(())
    }

    pub(super) fn leave(&mut self) {
        self.depth -= 1;
    }

    pub(super) fn expression(&mut self) -> Result<Node, ParseError> {
        let pos = self.peek().pos;
        self.enter(pos)?;
        let out = self.or();
        self.leave();
        out
    }

    pub(super) fn or(&mut self) -> Result<Node, ParseError> {
        let mut left = self.and()?;
        while self.is_name("or") {
            self.advance();
            let right = self.and()?;
            let pos = left.pos;
            left = node(Expr::Or(Box::new(left), Box::new(right)), pos);
        }
        Ok(left)
    }

    pub(super) fn and(&mut self) -> Result<Node, ParseError> {
        let mut left = self.not()?;
        while self.is_name("and") {
            self.advance();
            let right = self.not()?;
            let pos = left.pos;
            left = node(Expr::And(Box::new(left), Box::new(right)), pos);
        }
        Ok(left)
    }

    pub(super) fn not(&mut self) -> Result<Node, ParseError> {
        if self.is_name("not") {
            let pos = self.advance().pos;
            self.enter(pos)?;
            let inner = self.not();
            self.leave();
            return Ok(node(Expr::Not(Box::new(inner?)), pos));
        }
        self.comparison()
    }

    pub(super) fn comparison(&mut self) -> Result<Node, ParseError> {
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

    pub(super) fn sum(&mut self) -> Result<Node, ParseError> {
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

    pub(super) fn product(&mut self) -> Result<Node, ParseError> {
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

    pub(super) fn unary(&mut self) -> Result<Node, ParseError> {
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

    pub(super) fn postfix(&mut self) -> Result<Node, ParseError> {
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

    pub(super) fn subscript(&mut self, target: Node, open: usize) -> Result<Node, ParseError> {
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
    pub(super) fn arguments(
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
    pub(super) fn items(&mut self, close: &str) -> Result<Vec<Node>, ParseError> {
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

    pub(super) fn atom(&mut self) -> Result<Node, ParseError> {
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
    pub(super) fn parenthesised(&mut self, open: usize) -> Result<Node, ParseError> {
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

    pub(super) fn name(&mut self, name: String, pos: usize) -> Result<Node, ParseError> {
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
    pub(super) fn isinstance(&mut self, pos: usize) -> Result<Node, ParseError> {
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

    pub(super) fn type_name(&mut self) -> Result<TypeName, ParseError> {
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

pub(super) fn describe(tok: &Tok) -> String {
    match tok {
        Tok::Name(n) => format!("'{n}'"),
        Tok::Int(i) => format!("number {i}"),
        Tok::Float(f) => format!("number {}", float_repr(*f)),
        Tok::Str(_) => "a string".to_string(),
        Tok::Op(o) => format!("'{o}'"),
        Tok::End => "end of expression".to_string(),
    }
}

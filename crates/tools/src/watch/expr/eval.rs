//! Evaluation of the AST over [`Value`]s, with Python's semantics, a work budget and bounded
//! value sizes.

use std::cmp::Ordering;
use std::sync::Arc;

use super::*;

// ---------------------------------------------------------------------------------------------
// Evaluation
// ---------------------------------------------------------------------------------------------

pub(super) struct Budget {
    pub(super) left: u64,
}

impl Budget {
    pub(super) fn new(units: u64) -> Self {
        Self { left: units }
    }

    pub(super) fn unlimited() -> Self {
        Self { left: u64::MAX }
    }

    pub(super) fn charge(&mut self, units: u64) -> Result<(), EvalError> {
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

pub(super) fn check_str_len(bytes: usize) -> Result<(), EvalError> {
    if bytes > MAX_STR_BYTES {
        return err(format!(
            "string too large ({bytes} bytes; the limit is {MAX_STR_BYTES})"
        ));
    }
    Ok(())
}

pub(super) fn check_list_len(len: usize) -> Result<(), EvalError> {
    if len > MAX_LIST_LEN {
        return err(format!(
            "list too large ({len} elements; the limit is {MAX_LIST_LEN})"
        ));
    }
    Ok(())
}

pub(super) fn new_str(s: String) -> Result<Value, EvalError> {
    check_str_len(s.len())?;
    Ok(Value::Str(Arc::from(s)))
}

pub(super) fn new_list(items: Vec<Value>) -> Result<Value, EvalError> {
    check_list_len(items.len())?;
    Ok(Value::List(Arc::new(items)))
}

pub(super) fn eval(n: &Node, vars: &Vars, budget: &mut Budget) -> Result<Value, EvalError> {
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

pub(super) fn is_instance(value: &Value, t: TypeName) -> bool {
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
pub(super) enum Num {
    Int(i64),
    Float(f64),
}

impl Num {
    pub(super) fn of(v: &Value) -> Option<Self> {
        match v {
            Value::Bool(b) => Some(Self::Int(i64::from(*b))),
            Value::Int(i) => Some(Self::Int(*i)),
            Value::Float(f) => Some(Self::Float(*f)),
            _ => None,
        }
    }

    pub(super) fn float(self) -> f64 {
        match self {
            Self::Int(i) => i as f64,
            Self::Float(f) => f,
        }
    }
}

pub(super) fn overflow() -> EvalError {
    EvalError("integer overflow (64-bit integers only)".into())
}

pub(super) fn negate(v: Value) -> Result<Value, EvalError> {
    match Num::of(&v) {
        Some(Num::Int(i)) => i.checked_neg().map(Value::Int).ok_or_else(overflow),
        Some(Num::Float(f)) => Ok(Value::Float(-f)),
        None => err(format!("bad operand type for unary -: '{}'", v.type_name())),
    }
}

pub(super) fn unsupported(symbol: &str, a: &Value, b: &Value) -> EvalError {
    EvalError(format!(
        "unsupported operand type(s) for {symbol}: '{}' and '{}'",
        a.type_name(),
        b.type_name()
    ))
}

pub(super) fn binary(
    op: BinOp,
    a: &Value,
    b: &Value,
    budget: &mut Budget,
) -> Result<Value, EvalError> {
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
pub(super) fn repeat_count(n: &Value) -> usize {
    match Num::of(n) {
        Some(Num::Int(i)) if i > 0 => usize::try_from(i).unwrap_or(usize::MAX),
        _ => 0,
    }
}

pub(super) fn arithmetic(op: BinOp, x: Num, y: Num) -> Result<Value, EvalError> {
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

pub(super) fn py_eq(a: &Value, b: &Value, budget: &mut Budget) -> Result<bool, EvalError> {
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
pub(super) fn py_cmp(
    a: &Value,
    b: &Value,
    budget: &mut Budget,
) -> Result<Option<Ordering>, EvalError> {
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

pub(super) fn contains(
    container: &Value,
    item: &Value,
    budget: &mut Budget,
) -> Result<bool, EvalError> {
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

pub(super) fn compare(
    op: CmpOp,
    a: &Value,
    b: &Value,
    budget: &mut Budget,
) -> Result<bool, EvalError> {
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
pub(super) fn same(a: &Value, b: &Value, budget: &mut Budget) -> Result<bool, EvalError> {
    if std::mem::discriminant(a) != std::mem::discriminant(b) {
        return Ok(false);
    }
    py_eq(a, b, budget)
}

/// A Python index (negative counts from the end); `None` when out of range.
pub(super) fn resolve_index(
    index: &Value,
    len: usize,
    what: &str,
) -> Result<Option<usize>, EvalError> {
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

pub(super) fn subscript(
    target: &Value,
    index: &Value,
    budget: &mut Budget,
) -> Result<Value, EvalError> {
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

pub(super) fn index_repr(v: &Value) -> String {
    let mut out = String::new();
    v.write_display(&mut out, true);
    out.chars().take(80).collect()
}

/// Clamps an optional slice bound to `0..=len`, as Python does.
pub(super) fn slice_bound(bound: &Value, len: usize, default: usize) -> Result<usize, EvalError> {
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

pub(super) fn slice(
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
pub(super) fn iterate(value: &Value, budget: &mut Budget) -> Result<Vec<Value>, EvalError> {
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

pub(super) fn call(
    builtin: Builtin,
    args: &[Value],
    budget: &mut Budget,
) -> Result<Value, EvalError> {
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
pub(super) fn bounded_display(v: &Value, budget: &mut Budget) -> Result<String, EvalError> {
    let text = v.to_display();
    budget.charge(text.len() as u64)?;
    check_str_len(text.len())?;
    Ok(text)
}

/// A stable merge sort with Python ordering. Written out rather than `sort_by`, which may
/// panic when the order is not total (NaN) and cannot stop at the first comparison error.
pub(super) fn sort(mut items: Vec<Value>, budget: &mut Budget) -> Result<Vec<Value>, EvalError> {
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

pub(super) fn to_int(v: &Value) -> Result<Value, EvalError> {
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

pub(super) fn to_float(v: &Value) -> Result<Value, EvalError> {
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

pub(super) fn no_method(target: &Value, method: Method) -> EvalError {
    let name = METHODS
        .iter()
        .find(|(_, m, ..)| *m == method)
        .map_or("?", |(n, ..)| *n);
    EvalError(format!(
        "'{}' object has no method '{name}'",
        target.type_name()
    ))
}

pub(super) fn str_arg<'a>(args: &'a [Value], i: usize, method: &str) -> Result<&'a str, EvalError> {
    match args.get(i) {
        Some(Value::Str(s)) => Ok(s),
        Some(other) => err(format!(
            "{method}() argument must be str, not {}",
            other.type_name()
        )),
        None => err(format!("{method}() is missing an argument")),
    }
}

pub(super) fn call_method(
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
pub(super) fn str_method(
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
pub(super) fn split(s: &str, args: &[Value]) -> Result<Value, EvalError> {
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

//! When a poll fires: a `stop_on` [`Expression`] holding, or — without one — the output
//! changing from the previous poll (never on the first poll, which only sets the baseline).

use super::expr::{Expression, ParseError, Vars};
use super::poll::MAX_OUTPUT_CHARS;

/// A watch's stop condition.
#[derive(Debug, Clone)]
pub enum Condition {
    /// No `stop_on`: fire when the output differs from the previous poll's.
    OutputChanges,
    /// Fire when the expression is true.
    Expression(Expression),
}

/// Why a poll fired (or, for [`Trigger::MaxPolls`], why the watch ended anyway).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    /// The `stop_on` expression held.
    ConditionMet,
    /// Change detection: the output differs from the previous poll.
    OutputChanged,
    /// The `stop_on` expression failed at run time (a missing key, a type mismatch). This
    /// ends the watch, so the model sees the problem instead of a silent poll loop.
    ConditionError(String),
    /// The poll budget is spent.
    MaxPolls,
}

impl Trigger {
    /// A short phrase for the notice: `condition met`, `output changed`, ….
    pub fn describe(&self) -> String {
        match self {
            Self::ConditionMet => "condition met".into(),
            Self::OutputChanged => "output changed".into(),
            Self::ConditionError(e) => format!("condition error: {e}"),
            Self::MaxPolls => "max polls reached".into(),
        }
    }
}

impl Condition {
    /// The condition of a watch row: `None` or blank means change detection.
    pub fn parse(stop_on: Option<&str>) -> Result<Self, ParseError> {
        match stop_on.map(str::trim).filter(|s| !s.is_empty()) {
            None => Ok(Self::OutputChanges),
            Some(source) => Expression::parse(source).map(Self::Expression),
        }
    }

    /// Whether this poll fires, and why. `prev_output` is the previous poll's output
    /// (`None` on the first poll).
    pub fn evaluate(
        &self,
        output: &str,
        exit_code: i64,
        prev_output: Option<&str>,
    ) -> Option<Trigger> {
        let changed = prev_output.is_none_or(|prev| head(prev) != head(output));
        match self {
            Self::OutputChanges => {
                (prev_output.is_some() && changed).then_some(Trigger::OutputChanged)
            }
            Self::Expression(expr) => {
                let vars = Vars::new(output, exit_code, prev_output, changed);
                match expr.is_true(&vars) {
                    Ok(true) => Some(Trigger::ConditionMet),
                    Ok(false) => None,
                    Err(e) => Some(Trigger::ConditionError(e.to_string())),
                }
            }
        }
    }
}

/// The part of an output polls compare: the first [`MAX_OUTPUT_CHARS`] characters (a
/// truncation marker after them is not evidence of change).
fn head(text: &str) -> &str {
    match text.char_indices().nth(MAX_OUTPUT_CHARS) {
        Some((at, _)) => &text[..at],
        None => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn change_detection_never_fires_on_the_first_poll() {
        let c = Condition::parse(None).unwrap();
        assert_eq!(c.evaluate("a", 0, None), None);
        assert_eq!(c.evaluate("a", 0, Some("a")), None);
        assert_eq!(c.evaluate("b", 0, Some("a")), Some(Trigger::OutputChanged));
        assert!(matches!(
            Condition::parse(Some("  ")).unwrap(),
            Condition::OutputChanges
        ));
    }

    #[test]
    fn expressions_fire_and_errors_are_reported() {
        let c = Condition::parse(Some(r#""done" in output"#)).unwrap();
        assert_eq!(c.evaluate("pending", 0, None), None);
        assert_eq!(c.evaluate("all done", 0, None), Some(Trigger::ConditionMet));
        let c = Condition::parse(Some(r#"data["state"] == "MERGED""#)).unwrap();
        assert_eq!(
            c.evaluate(r#"{"state": "MERGED"}"#, 0, None),
            Some(Trigger::ConditionMet)
        );
        match c.evaluate("not json", 0, None) {
            Some(Trigger::ConditionError(e)) => assert!(e.contains("NoneType"), "{e}"),
            other => panic!("{other:?}"),
        }
        let c = Condition::parse(Some("changed and exit_code == 0")).unwrap();
        assert_eq!(c.evaluate("x", 0, None), Some(Trigger::ConditionMet));
        assert_eq!(c.evaluate("x", 0, Some("x")), None);
        assert!(Condition::parse(Some("import os")).is_err());
    }

    #[test]
    fn changes_past_the_cap_do_not_count() {
        let base = "a".repeat(MAX_OUTPUT_CHARS);
        let c = Condition::parse(None).unwrap();
        let prev = format!("{base}\n[truncated at 65536 chars]");
        assert_eq!(c.evaluate(&format!("{base}zzz"), 0, Some(&prev)), None);
    }
}

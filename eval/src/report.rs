//! The run's report: every variant's results, the A/B comparison when there are two, the
//! threshold verdict; as JSON and as a plain-text table.

use std::fmt::Write;

use serde::Serialize;

use crate::runner::VariantReport;

/// A whole run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub suite: String,
    /// The least pass rate each variant must reach.
    pub threshold: f64,
    pub variants: Vec<VariantReport>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub comparison: Option<Comparison>,
    /// Every variant reached the threshold.
    pub passed: bool,
}

/// A against B.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Comparison {
    pub a: String,
    pub b: String,
    /// Cases that pass with B and fail with A.
    pub improved: Vec<String>,
    /// Cases that pass with A and fail with B.
    pub regressed: Vec<String>,
    /// Cases with the same outcome on both sides.
    pub unchanged: usize,
    /// B's pass rate minus A's.
    pub pass_rate_delta: f64,
    /// B's mean score minus A's.
    pub mean_score_delta: f64,
    /// B's tokens minus A's.
    pub tokens_delta: i64,
    pub cases: Vec<CaseDiff>,
}

/// One case on both sides.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CaseDiff {
    pub id: String,
    pub a_passed: bool,
    pub b_passed: bool,
    pub a_score: f64,
    pub b_score: f64,
}

impl Report {
    /// The report of `variants` (one, or two for A/B) run over `suite` with `threshold`.
    pub fn new(suite: &str, threshold: f64, variants: Vec<VariantReport>) -> Self {
        let comparison = match variants.as_slice() {
            [a, b] => Some(compare(a, b)),
            _ => None,
        };
        let passed = variants.iter().all(|v| v.pass_rate >= threshold);
        Self {
            suite: suite.to_string(),
            threshold,
            variants,
            comparison,
            passed,
        }
    }

    /// The report as pretty JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\": \"{e}\"}}"))
    }

    /// The report as a table: a row per case and a column per variant, the failed checks
    /// under their case, totals, the comparison and the verdict.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let id_width = self
            .variants
            .first()
            .map(|v| {
                v.cases
                    .iter()
                    .map(|c| c.id.chars().count())
                    .max()
                    .unwrap_or(4)
            })
            .unwrap_or(4)
            .max(5);
        let _ = writeln!(out, "suite: {}", self.suite);
        for v in &self.variants {
            let _ = writeln!(
                out,
                "  {}: model {}{}",
                v.label,
                v.model,
                v.system_prompt
                    .as_deref()
                    .map(|p| format!(", system prompt {}", crate::checks::excerpt(p)))
                    .unwrap_or_default()
            );
        }
        let _ = write!(out, "\n{:id_width$}", "case");
        for v in &self.variants {
            let _ = write!(out, "  {:>14}", v.label);
        }
        out.push('\n');
        let Some(first) = self.variants.first() else {
            return out;
        };
        for (i, case) in first.cases.iter().enumerate() {
            let _ = write!(out, "{:id_width$}", case.id);
            for v in &self.variants {
                let cell = v.cases.get(i).map_or_else(String::new, |c| {
                    format!(
                        "{} {:>3.0}%",
                        if c.passed { "pass" } else { "FAIL" },
                        c.score * 100.0
                    )
                });
                let _ = write!(out, "  {cell:>14}");
            }
            out.push('\n');
            for v in &self.variants {
                let Some(c) = v.cases.get(i) else { continue };
                let tag = if self.variants.len() > 1 {
                    format!("[{}] ", v.label)
                } else {
                    String::new()
                };
                if let Some(error) = &c.error {
                    let _ = writeln!(out, "    {tag}error: {error}");
                }
                for check in c.checks.iter().filter(|k| !k.passed) {
                    let _ = writeln!(out, "    {tag}{}: {}", check.kind, check.detail);
                }
            }
        }
        let _ = write!(out, "{:id_width$}", "total");
        for v in &self.variants {
            let cell = format!("{}/{} {:.0}%", v.passed, v.total, v.pass_rate * 100.0);
            let _ = write!(out, "  {cell:>14}");
        }
        out.push('\n');
        if let Some(c) = &self.comparison {
            let _ = writeln!(
                out,
                "\n{} vs {}: pass rate {:+.0} points, mean score {:+.2}, tokens {:+}",
                c.b,
                c.a,
                c.pass_rate_delta * 100.0,
                c.mean_score_delta,
                c.tokens_delta
            );
            let _ = writeln!(
                out,
                "  improved ({}): {}",
                c.improved.len(),
                list(&c.improved)
            );
            let _ = writeln!(
                out,
                "  regressed ({}): {}",
                c.regressed.len(),
                list(&c.regressed)
            );
        }
        let _ = writeln!(
            out,
            "\nthreshold {:.0}%: {}",
            self.threshold * 100.0,
            if self.passed { "met" } else { "MISSED" }
        );
        out
    }
}

fn list(ids: &[String]) -> String {
    if ids.is_empty() {
        "-".into()
    } else {
        ids.join(", ")
    }
}

/// A against B, case by case (cases are matched by id).
pub fn compare(a: &VariantReport, b: &VariantReport) -> Comparison {
    let mut cases = Vec::new();
    let (mut improved, mut regressed, mut unchanged) = (Vec::new(), Vec::new(), 0);
    for ca in &a.cases {
        let Some(cb) = b.cases.iter().find(|c| c.id == ca.id) else {
            continue;
        };
        match (ca.passed, cb.passed) {
            (false, true) => improved.push(ca.id.clone()),
            (true, false) => regressed.push(ca.id.clone()),
            _ => unchanged += 1,
        }
        cases.push(CaseDiff {
            id: ca.id.clone(),
            a_passed: ca.passed,
            b_passed: cb.passed,
            a_score: ca.score,
            b_score: cb.score,
        });
    }
    Comparison {
        a: a.label.clone(),
        b: b.label.clone(),
        improved,
        regressed,
        unchanged,
        pass_rate_delta: b.pass_rate - a.pass_rate,
        mean_score_delta: b.mean_score - a.mean_score,
        tokens_delta: b.tokens as i64 - a.tokens as i64,
        cases,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checks::CheckResult;
    use crate::runner::{CaseResult, ratio};

    fn case(id: &str, passed: bool) -> CaseResult {
        CaseResult {
            id: id.into(),
            passed,
            score: if passed { 1.0 } else { 0.5 },
            error: None,
            attempts: 1,
            duration_ms: 1,
            replies: vec!["r".into()],
            tool_calls: Vec::new(),
            checks: vec![CheckResult::new(
                "contains",
                passed,
                if passed { "ok" } else { "\"x\" not in reply" },
            )],
            tokens: 10,
        }
    }

    fn variant(label: &str, cases: Vec<CaseResult>) -> VariantReport {
        let passed = cases.iter().filter(|c| c.passed).count();
        VariantReport {
            label: label.into(),
            model: format!("m-{label}"),
            system_prompt: None,
            seed: None,
            passed,
            total: cases.len(),
            pass_rate: ratio(passed, cases.len()),
            mean_score: cases.iter().map(|c| c.score).sum::<f64>() / cases.len() as f64,
            tokens: cases.iter().map(|c| c.tokens).sum(),
            cases,
        }
    }

    #[test]
    fn a_b_reports_improvements_regressions_and_totals() {
        let a = variant(
            "A",
            vec![case("one", true), case("two", false), case("three", true)],
        );
        let b = variant(
            "B",
            vec![case("one", true), case("two", true), case("three", false)],
        );
        let r = Report::new("s", 0.6, vec![a, b]);
        let c = r.comparison.as_ref().unwrap();
        assert_eq!(c.improved, vec!["two"]);
        assert_eq!(c.regressed, vec!["three"]);
        assert_eq!(c.unchanged, 1);
        assert_eq!(c.pass_rate_delta, 0.0);
        assert!(r.passed, "2/3 on both sides meets 60%");
        let table = r.table();
        assert!(table.contains("improved (1): two"), "{table}");
        assert!(table.contains("regressed (1): three"), "{table}");
        assert!(
            table.contains("[B] contains: \"x\" not in reply"),
            "{table}"
        );
        assert!(table.contains("threshold 60%: met"), "{table}");
        let json: serde_json::Value = serde_json::from_str(&r.to_json()).unwrap();
        assert_eq!(json["comparison"]["improved"][0], "two");
        assert_eq!(json["variants"][1]["model"], "m-B");
    }

    #[test]
    fn the_threshold_applies_to_every_variant() {
        let r = Report::new(
            "s",
            1.0,
            vec![variant("A", vec![case("one", true), case("two", false)])],
        );
        assert!(!r.passed);
        assert!(r.comparison.is_none());
        assert!(r.table().contains("threshold 100%: MISSED"));
    }
}

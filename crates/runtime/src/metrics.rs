//! The one Prometheus text writer (exposition format 0.0.4) of every service's `GET /metrics`.
//!
//! Written by hand rather than with `prometheus-client`: that crate speaks OpenMetrics
//! (`# EOF`, counter families named without `_total`, its own float format), which cannot
//! reproduce the original's metric names and `%.6g` numbers byte for byte. Label values and
//! HELP texts are escaped, so the output passes `promtool check metrics`.
//!
//! The writer knows the format only: each service keeps its metric names, HELP texts and
//! labels (and the caps that keep label sets bounded) next to the state they describe.

use std::fmt::Write as _;

/// The `Content-Type` of the exposition.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// A cumulative histogram over fixed bucket bounds.
#[derive(Debug, Clone)]
pub struct Histogram {
    bounds: &'static [f64],
    /// `cumulative[i]` = observations `<= bounds[i]`.
    cumulative: Vec<u64>,
    count: u64,
    sum: f64,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            cumulative: vec![0; bounds.len()],
            count: 0,
            sum: 0.0,
        }
    }

    pub fn observe(&mut self, value: f64) {
        for (bound, n) in self.bounds.iter().zip(self.cumulative.iter_mut()) {
            if value <= *bound {
                *n += 1;
            }
        }
        self.count += 1;
        self.sum += value;
    }

    pub fn count(&self) -> u64 {
        self.count
    }
}

/// A text exposition being written: families (`# HELP` + `# TYPE`) followed by their samples.
#[derive(Debug, Default)]
pub struct Exposition {
    out: String,
}

impl Exposition {
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            out: String::with_capacity(capacity),
        }
    }

    /// Starts a family: `kind` is `counter`, `gauge` or `histogram`.
    pub fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.out, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.out, "# TYPE {name} {kind}");
    }

    /// One sample line; `value` is written as given (see [`fmt_g`] for floats).
    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: impl std::fmt::Display) {
        self.out.push_str(name);
        if !labels.is_empty() {
            self.out.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.out.push(',');
                }
                let _ = write!(self.out, "{k}=\"{}\"", escape_label(v));
            }
            self.out.push('}');
        }
        let _ = writeln!(self.out, " {value}");
    }

    /// A counter family with one unlabelled sample.
    pub fn counter(&mut self, name: &str, help: &str, value: u64) {
        self.family(name, "counter", help);
        self.sample(name, &[], value);
    }

    /// A gauge family with one unlabelled sample, written with [`fmt_g`].
    pub fn gauge(&mut self, name: &str, help: &str, value: f64) {
        self.family(name, "gauge", help);
        self.sample(name, &[], fmt_g(value));
    }

    /// The `_bucket` (with `le`, `+Inf` last), `_sum` and `_count` samples of one histogram.
    pub fn histogram(&mut self, name: &str, labels: &[(&str, &str)], h: &Histogram) {
        let bucket = format!("{name}_bucket");
        for (bound, n) in h.bounds.iter().zip(&h.cumulative) {
            let le = fmt_g(*bound);
            let mut with_le = labels.to_vec();
            with_le.push(("le", &le));
            self.sample(&bucket, &with_le, n);
        }
        let mut with_le = labels.to_vec();
        with_le.push(("le", "+Inf"));
        self.sample(&bucket, &with_le, h.count);
        self.sample(&format!("{name}_sum"), labels, fmt_g(h.sum));
        self.sample(&format!("{name}_count"), labels, h.count);
    }

    /// The text written so far.
    pub fn as_str(&self) -> &str {
        &self.out
    }

    /// The finished exposition.
    pub fn finish(self) -> String {
        self.out
    }
}

/// A label value with `\`, `"` and newline escaped, as the text format requires.
pub fn escape_label(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
    out
}

/// A HELP text with `\` and newline escaped.
fn escape_help(text: &str) -> String {
    text.replace('\\', "\\\\").replace('\n', "\\n")
}

/// A float as C's `%.6g` writes it (the original's format): six significant digits,
/// trailing zeros dropped, exponent form below 1e-4 and from 1e6.
pub fn fmt_g(value: f64) -> String {
    if value.is_nan() {
        return "NaN".into();
    }
    if value.is_infinite() {
        return if value > 0.0 { "+Inf" } else { "-Inf" }.into();
    }
    if value == 0.0 {
        return "0".into();
    }
    let sci = format!("{value:.5e}");
    let (mantissa, exp) = sci.split_once('e').unwrap_or((&sci, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    if !(-4..6).contains(&exp) {
        let sign = if exp < 0 { '-' } else { '+' };
        return format!("{}e{sign}{:02}", trim_zeros(mantissa), exp.abs());
    }
    let decimals = usize::try_from(5 - exp).unwrap_or(0);
    trim_zeros(&format!("{value:.decimals$}")).to_string()
}

fn trim_zeros(number: &str) -> &str {
    if number.contains('.') {
        number.trim_end_matches('0').trim_end_matches('.')
    } else {
        number
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_are_written_like_percent_6g() {
        for (v, want) in [
            (0.0, "0"),
            (1.0, "1"),
            (0.005, "0.005"),
            (10.0, "10"),
            (5.62, "5.62"),
            (1.0 / 3.0, "0.333333"),
            (123_456.7, "123457"),
            (1_234_567.0, "1.23457e+06"),
            (0.000_012_5, "1.25e-05"),
            (-2.5, "-2.5"),
            (f64::INFINITY, "+Inf"),
        ] {
            assert_eq!(fmt_g(v), want, "{v}");
        }
    }

    #[test]
    fn label_values_are_escaped() {
        assert_eq!(escape_label("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
        let mut x = Exposition::default();
        x.sample("m", &[("name", "x\"y\nz")], "1");
        assert_eq!(x.as_str(), "m{name=\"x\\\"y\\nz\"} 1\n");
    }

    #[test]
    fn families_counters_and_gauges() {
        let mut x = Exposition::with_capacity(64);
        x.counter("c_total", "Things\\done.\nTwice", 3);
        x.gauge("g", "A gauge.", 0.25);
        x.family("l", "gauge", "Labelled.");
        x.sample("l", &[("a", "1"), ("b", "2")], 7);
        assert_eq!(
            x.finish(),
            "# HELP c_total Things\\\\done.\\nTwice\n# TYPE c_total counter\nc_total 3\n\
             # HELP g A gauge.\n# TYPE g gauge\ng 0.25\n\
             # HELP l Labelled.\n# TYPE l gauge\nl{a=\"1\",b=\"2\"} 7\n"
        );
    }

    #[test]
    fn histograms_are_cumulative_with_inf_sum_and_count() {
        let mut h = Histogram::new(&[0.1, 1.0]);
        h.observe(0.05);
        h.observe(0.5);
        h.observe(3.0);
        assert_eq!(h.count(), 3);
        let mut x = Exposition::default();
        x.histogram("h", &[("method", "GET")], &h);
        assert_eq!(
            x.as_str(),
            "h_bucket{method=\"GET\",le=\"0.1\"} 1\n\
             h_bucket{method=\"GET\",le=\"1\"} 2\n\
             h_bucket{method=\"GET\",le=\"+Inf\"} 3\n\
             h_sum{method=\"GET\"} 3.55\n\
             h_count{method=\"GET\"} 3\n"
        );
    }
}

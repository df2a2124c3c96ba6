//! The vocabulary of verdicts and output warnings: risk levels and recommendations, spelled
//! as on the wire (node spec §2.2: `risk_level` low/medium/high/critical on a verdict,
//! none/low/medium/high on an `output_warning`; `recommendation` approve/review/deny).

use std::fmt;

/// How risky a tool call or a tool result is. Ordered: `None < Low < … < Critical`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum RiskLevel {
    /// Nothing found (output guard only; a verdict is at least `Low`).
    #[default]
    None,
    Low,
    Medium,
    High,
    Critical,
}

impl RiskLevel {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Low => "low",
            Self::Medium => "medium",
            Self::High => "high",
            Self::Critical => "critical",
        }
    }

    /// Parses the wire spelling; `None` for anything else.
    pub fn parse(s: &str) -> Option<Self> {
        [
            Self::None,
            Self::Low,
            Self::Medium,
            Self::High,
            Self::Critical,
        ]
        .into_iter()
        .find(|level| level.as_str() == s)
    }
}

impl fmt::Display for RiskLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a verdict advises the human (or the smart-approval gate) to do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Recommendation {
    Approve,
    Review,
    Deny,
}

impl Recommendation {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Approve => "approve",
            Self::Review => "review",
            Self::Deny => "deny",
        }
    }
}

impl fmt::Display for Recommendation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::RiskLevel;

    #[test]
    fn levels_are_ordered_and_round_trip() {
        assert!(RiskLevel::None < RiskLevel::Low);
        assert!(RiskLevel::High < RiskLevel::Critical);
        for level in ["none", "low", "medium", "high", "critical"] {
            assert_eq!(RiskLevel::parse(level).map(RiskLevel::as_str), Some(level));
        }
        assert_eq!(RiskLevel::parse("severe"), None);
    }
}

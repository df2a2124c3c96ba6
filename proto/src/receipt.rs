//! Effect receipts: what became of each call of a tool batch that did not simply finish
//! (a cancel, a denial, an approval timeout, a node that stopped while it ran).
//!
//! A receipt is typed ([`EffectStatus`]) and said twice: in the tool result the model reads
//! ([`receipt_text`], so a resumed or replayed conversation tells the truth) and on the
//! wire, as `turn_complete.receipts` ([`Receipt`]), so a client or a queue producer knows
//! whether a side effect happened without parsing text. This is our extension: the
//! original only said `Cancelled by user.`.

use serde::{Deserialize, Serialize};

use crate::tolerant::wire_struct;

/// What a call of an interrupted batch did to the world.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EffectStatus {
    /// It never started (denied, cancelled or timed out before it ran, or it failed to
    /// prepare): nothing happened.
    None,
    /// It started, printed output and was stopped while running: part of its work may be
    /// done.
    Partial,
    /// It started and the tool undid its effect. No built-in tool can say so today; the
    /// variant is part of the contract for tools that can.
    RolledBack,
    /// It finished; its real result is kept.
    Completed,
    /// It started and its outcome is not known: it was running when it was cancelled
    /// without printing anything, or when the node stopped. A status this build does not
    /// know decodes as `unknown`, the cautious reading.
    #[default]
    #[serde(other)]
    Unknown,
}

impl EffectStatus {
    /// The wire name (`none`, `unknown`, `partial`, `rolled_back`, `completed`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::None => "none",
            Self::Unknown => "unknown",
            Self::Partial => "partial",
            Self::RolledBack => "rolled_back",
            Self::Completed => "completed",
        }
    }
}

impl std::fmt::Display for EffectStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

wire_struct! {
    /// One call's receipt (`turn_complete.receipts[]`).
    pub struct Receipt {
        pub call_id: String = String::new(),
        pub func_name: String = String::new(),
        pub status: EffectStatus = EffectStatus::Unknown,
    }
}

/// Why a batch was interrupted, as far as the wording of its receipts goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Interruption {
    /// Cancelled, denied or timed out while the node kept running.
    Stopped,
    /// The node stopped (a crash, a kill) while the batch was open; found on resume.
    NodeStopped,
}

/// The reason a resumed conversation gives for the calls of a batch the node stopped in.
pub const NODE_STOPPED: &str = "Interrupted: the node stopped during this tool batch.";

/// The tool result of a call that has a receipt instead of (or, for `completed`, never
/// in place of) a real result: `reason` (e.g. `Cancelled by user.`), then the effect.
///
/// ```
/// use turnstone_proto::receipt::{EffectStatus, Interruption, receipt_text};
///
/// assert_eq!(
///     receipt_text("Cancelled by user.", EffectStatus::None, Interruption::Stopped),
///     "Cancelled by user. Effect: none \u{2014} it never started."
/// );
/// ```
pub fn receipt_text(reason: &str, status: EffectStatus, how: Interruption) -> String {
    let reason = reason.trim_end();
    let sep = if reason.ends_with(['.', '!', '?']) {
        " "
    } else {
        ". "
    };
    format!("{reason}{sep}{}", effect_sentence(status, how))
}

/// The status of a tool result that ends with a receipt sentence ([`receipt_text`]), for
/// views of a stored conversation (the history a client replays). `None` for any other
/// text: only the exact sentences this module writes match.
pub fn status_of(text: &str) -> Option<EffectStatus> {
    const WRITTEN: [EffectStatus; 4] = [
        EffectStatus::None,
        EffectStatus::Unknown,
        EffectStatus::Partial,
        EffectStatus::RolledBack,
    ];
    WRITTEN.into_iter().find(|status| {
        [Interruption::Stopped, Interruption::NodeStopped]
            .into_iter()
            .any(|how| text.ends_with(&effect_sentence(*status, how)))
    })
}

/// `Effect: {status} — {what it means}`.
fn effect_sentence(status: EffectStatus, how: Interruption) -> String {
    let effect = match (status, how) {
        (EffectStatus::None, _) => "it never started.",
        (EffectStatus::Unknown, Interruption::Stopped) => {
            "it was running when it was stopped and printed nothing; check before repeating it."
        }
        (EffectStatus::Unknown, Interruption::NodeStopped) => {
            "it was running when the node stopped; check before repeating it."
        }
        (EffectStatus::Partial, _) => {
            "it was stopped while running, after it had printed output; part of its work may \
             be done — check before repeating it."
        }
        (EffectStatus::RolledBack, _) => "it started and the tool undid its effect.",
        (EffectStatus::Completed, _) => "it finished.",
    };
    format!("Effect: {status} \u{2014} {effect}")
}

/// The prefix of the session setting that marks an open tool batch durably (the engine
/// writes it, a resume reads it): `tools_started:{first call id}` holds the JSON list of
/// the batch's call ids that started. It is written as `[]` when the batch opens, rewritten
/// (and committed) before each call runs, and removed once the batch's results are stored;
/// a batch the node stopped in keeps it, so its calls read as `unknown` (started) or
/// `none` (never started) instead of being guessed at.
pub const STARTED_CONFIG_PREFIX: &str = "tools_started:";

/// The marker key of the batch whose first call is `first_call_id`.
pub fn started_config_key(first_call_id: &str) -> String {
    format!("{STARTED_CONFIG_PREFIX}{first_call_id}")
}

/// The started call ids of a stored marker value (`None` when it is not a JSON list of
/// strings: an unreadable marker says nothing, and the calls read as `unknown`).
pub fn parse_started(value: &str) -> Option<std::collections::HashSet<String>> {
    serde_json::from_str::<Vec<String>>(value)
        .ok()
        .map(|ids| ids.into_iter().collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statuses_have_snake_case_names_and_unknown_ones_read_as_unknown() {
        for status in [
            EffectStatus::None,
            EffectStatus::Unknown,
            EffectStatus::Partial,
            EffectStatus::RolledBack,
            EffectStatus::Completed,
        ] {
            let json = serde_json::to_string(&status).unwrap();
            assert_eq!(json, format!("\"{}\"", status.as_str()));
            assert_eq!(serde_json::from_str::<EffectStatus>(&json).unwrap(), status);
        }
        let later: Receipt =
            serde_json::from_str(r#"{"call_id":"c","status":"half_done","extra":1}"#).unwrap();
        assert_eq!(later.status, EffectStatus::Unknown);
        assert_eq!(later.call_id, "c");
    }

    #[test]
    fn texts_name_the_status_after_the_reason() {
        let t = receipt_text(
            "Denied by user: no",
            EffectStatus::None,
            Interruption::Stopped,
        );
        assert_eq!(
            t,
            "Denied by user: no. Effect: none \u{2014} it never started."
        );
        let t = receipt_text(
            NODE_STOPPED,
            EffectStatus::Unknown,
            Interruption::NodeStopped,
        );
        assert!(
            t.contains("Effect: unknown") && t.contains("node stopped"),
            "{t}"
        );
        let t = receipt_text(
            "Cancelled by user.",
            EffectStatus::Partial,
            Interruption::Stopped,
        );
        assert!(t.starts_with("Cancelled by user. Effect: partial"), "{t}");
        assert_eq!(status_of(&t), Some(EffectStatus::Partial));
        assert_eq!(status_of("Effect: partial"), None);
        assert_eq!(status_of("hello"), None);
    }

    #[test]
    fn started_markers_round_trip_and_bad_ones_say_nothing() {
        assert_eq!(started_config_key("c1"), "tools_started:c1");
        let ids = parse_started(r#"["a","b"]"#).unwrap();
        assert!(ids.contains("a") && ids.contains("b") && ids.len() == 2);
        assert!(parse_started("[]").unwrap().is_empty());
        assert!(parse_started("{").is_none());
        assert!(parse_started("[1]").is_none());
    }
}

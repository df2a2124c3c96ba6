//! Prompt-injection markers in tool output: text written to steer the model (override
//! phrases, chat-template and role tags, "SYSTEM PROMPT:" banners, persona changes,
//! requests to send secrets somewhere). Flagged, never removed: the model and the human
//! see the text and the warning.

use std::sync::LazyLock;

use regex::RegexSet;

/// One family of markers: its flag (besides `prompt_injection`), annotation and patterns.
struct Marker {
    flag: &'static str,
    annotation: &'static str,
    patterns: &'static [&'static str],
}

const MARKERS: &[Marker] = &[
    Marker {
        flag: "prompt_injection",
        annotation: "Output contains phrases that attempt to override agent instructions.",
        patterns: &[
            r"(?i)\bignore\s+(?:(?:all|any|the|your|my|these|of)\s+)*(?:previous|prior|earlier|above|preceding|foregoing|existing|system|original)\s+(?:instructions?|prompts?|rules|directions|directives|guidelines|context|messages)",
            r"(?i)\bdisregard\s+(?:(?:all|any|the|your)\s+)*(?:previous|prior|earlier|above|preceding|system|original)\s+(?:instructions?|prompts?|rules|guidelines|directions)",
            r"(?i)\bforget\s+(?:(?:all|everything|about)\s+)?(?:your|the|previous|prior)\s+(?:instructions|rules|guidelines|training|prompt|system\s+prompt)",
            r"(?i)\bnew\s+(?:system\s+)?instructions\s*:",
            r"(?i)\byou\s+are\s+now\s+(?:a|an|my|dan|jailbroken|unrestricted|no\s+longer)\b",
            r"(?i)\boverride\s+(?:your|all|the)\s+(?:previous\s+)?(?:instructions|rules|safety|guidelines)",
        ],
    },
    Marker {
        flag: "role_injection",
        annotation: "Output contains role/message injection markers.",
        patterns: &[
            r"<\|(?:im_start|im_end|im_sep|system|endoftext|start_header_id|end_header_id|eot_id)\|>",
            r"\[/?INST\]",
            r"<</?SYS>>",
            r"(?i)</?(?:system|tool_result|function_results?|function_output|tool_output|system-reminder)>",
            r#"\{\s*"role"\s*:\s*"(?:system|developer)""#,
        ],
    },
    Marker {
        flag: "instruction_override",
        annotation: "Output contains instruction-override keywords (MANDATORY, OVERRIDE, etc.).",
        patterns: &[
            r"(?i)\bsystem\s+prompt\s*:",
            r"\bSYSTEM\s+(?:OVERRIDE|MESSAGE|NOTICE)\s*:",
            r"\bIMPORTANT\s+(?:NEW\s+)?INSTRUCTIONS?\s*:",
            r"\[SYSTEM\]",
            r"\bMANDATORY\s*:",
            r"\bOVERRIDE\s*:",
            r"(?i)\bdeveloper\s+mode\s+(?:enabled|activated|on)\b",
        ],
    },
    Marker {
        flag: "meta_injection",
        annotation: "Output attempts to redefine the agent's identity or persona.",
        patterns: &[
            r"(?i)\b(?:pretend|act\s+as\s+if)\s+(?:that\s+)?you\s+are\b",
            r"(?i)\byour\s+new\s+(?:role|identity|persona|instructions|task|goal)\s+(?:is|are)\b",
            r"(?i)\bfrom\s+now\s+on,?\s+you\s+(?:are|will|must|should)\b",
            r"(?i)\bI\s+am\s+your\s+(?:new\s+)?(?:admin|administrator|operator|developer|creator|owner)\b",
        ],
    },
    Marker {
        flag: "exfiltration_request",
        annotation: "Output asks the agent to send credentials or secrets somewhere.",
        patterns: &[
            r"(?i)\b(?:send|post|upload|exfiltrate|forward|leak|email|transmit|paste)\s+(?:(?:the|all|your|any|of|these)\s+)*(?:api[\s_-]?keys?|credentials|secrets|passwords|tokens|private\s+keys?|ssh\s+keys?|env(?:ironment)?\s+variables|\.env\s+files?)\b",
        ],
    },
];

struct Compiled {
    set: RegexSet,
    /// The marker family of each pattern in the set.
    family: Vec<usize>,
}

static COMPILED: LazyLock<Option<Compiled>> = LazyLock::new(|| {
    let mut sources = Vec::new();
    let mut family = Vec::new();
    for (index, marker) in MARKERS.iter().enumerate() {
        for pattern in marker.patterns {
            sources.push(pattern.replace(r"\b", r"(?-u:\b)"));
            family.push(index);
        }
    }
    let set = RegexSet::new(&sources).ok()?;
    Some(Compiled { set, family })
});

#[cfg(test)]
pub(crate) fn all_patterns_compile() -> bool {
    COMPILED.is_some()
}

/// The `(flag, annotation)` of every marker family found in `text`, in table order.
pub(crate) fn find_injection(text: &str) -> Vec<(&'static str, &'static str)> {
    let Some(compiled) = COMPILED.as_ref() else {
        return Vec::new();
    };
    let mut families: Vec<usize> = compiled
        .set
        .matches(text)
        .iter()
        .filter_map(|i| compiled.family.get(i).copied())
        .collect();
    families.sort_unstable();
    families.dedup();
    families
        .into_iter()
        .filter_map(|i| MARKERS.get(i))
        .map(|m| (m.flag, m.annotation))
        .collect()
}

//! Tool-payload inspection and budget accounting (seed 004 "Inspect the model-client request
//! tool payload", seed 002 §7.5).
//!
//! A [`ToolPayload`] describes the exact tool array of a prepared request — names, byte count
//! and SHA-256 digest of its JSON, resident vs deferred, provenance — bounded in size. It is
//! kept beside a conversation, never in it.

use serde::Serialize;

use super::surface::{Residency, ToolSurface, wire_entry};
use crate::registry::{FunctionSpec, Provenance};

/// Most tools and deferred names listed one by one; the rest are counted.
pub const MAX_LISTED: usize = 256;

/// Tokens estimated for `bytes` of JSON or text (≈ 4 bytes a token, rounded up).
pub fn estimate_tokens(bytes: usize) -> u64 {
    bytes.div_ceil(4) as u64
}

/// What a resident tool costs per request: its whole array entry (description, parameters
/// schema and the function wrapper).
pub fn resident_cost(spec: &FunctionSpec) -> u64 {
    estimate_tokens(serde_json::to_vec(&wire_entry(spec)).map_or(0, |v| v.len()))
}

/// What a deferred tool costs per request: its catalog line (the bare name and a newline).
pub fn deferred_cost(name: &str) -> u64 {
    estimate_tokens(name.len() + 1)
}

/// Tool token accounting of one request.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct ToolBudget {
    /// The tool array: every entry priced by schema + description.
    pub resident_tokens: u64,
    /// The catalog lines of deferred tools.
    pub deferred_tokens: u64,
    /// The catalog's header (0 when nothing is deferred).
    pub catalog_overhead_tokens: u64,
    pub total_tokens: u64,
}

/// One entry of the array.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PayloadTool {
    pub name: String,
    /// `builtin`, `mcp:<server>` or `synthetic`.
    pub provenance: Provenance,
    /// `resident` or `loaded` (a deferred tool loaded by `tool_search`).
    pub residency: Residency,
    /// Bytes of this entry's JSON.
    pub bytes: usize,
}

/// One deferred tool (in the catalog, not in the array).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PayloadDeferred {
    pub name: String,
    pub provenance: Provenance,
}

/// The exact tool array of a prepared request, for inspection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct ToolPayload {
    /// Registry generation the array was expanded from.
    pub generation: u64,
    /// Tools in the array.
    pub tool_count: usize,
    /// Byte length of the array's compact JSON (OpenAI function format, as the model
    /// client sends it).
    pub bytes: usize,
    /// SHA-256 of those bytes, lowercase hex.
    pub sha256: String,
    /// The array entries in order (at most [`MAX_LISTED`]).
    pub tools: Vec<PayloadTool>,
    /// Entries not listed because of the bound.
    pub tools_omitted: usize,
    /// Deferred tools (catalog) in order (at most [`MAX_LISTED`]).
    pub deferred: Vec<PayloadDeferred>,
    pub deferred_count: usize,
    pub deferred_omitted: usize,
    /// Whether `tool_search` is in the array.
    pub search_active: bool,
    /// Bytes of the catalog block appended to the system prompt (0 when none).
    pub catalog_bytes: usize,
    pub budget: ToolBudget,
}

impl ToolPayload {
    pub(crate) fn of(surface: &ToolSurface) -> Self {
        let entries: Vec<(String, Vec<u8>, Provenance, Residency)> = surface
            .array()
            .iter()
            .map(|t| {
                let bytes = serde_json::to_vec(&wire_entry(&t.spec())).unwrap_or_default();
                (
                    t.name().to_owned(),
                    bytes,
                    t.provenance.clone(),
                    t.residency,
                )
            })
            .collect();
        // The array's JSON is `[` + entries joined by `,` + `]`: the same bytes serde_json
        // writes for the whole array, without serialising it twice.
        let mut array =
            Vec::with_capacity(entries.iter().map(|e| e.1.len() + 1).sum::<usize>() + 2);
        array.push(b'[');
        for (i, (_, bytes, _, _)) in entries.iter().enumerate() {
            if i > 0 {
                array.push(b',');
            }
            array.extend_from_slice(bytes);
        }
        array.push(b']');
        let tools_omitted = entries.len().saturating_sub(MAX_LISTED);
        let deferred = surface.deferred();
        Self {
            generation: surface.generation(),
            tool_count: entries.len(),
            bytes: array.len(),
            sha256: sha256_hex(&array),
            tools: entries
                .iter()
                .take(MAX_LISTED)
                .map(|(name, bytes, provenance, residency)| PayloadTool {
                    name: name.clone(),
                    provenance: provenance.clone(),
                    residency: *residency,
                    bytes: bytes.len(),
                })
                .collect(),
            tools_omitted,
            deferred: deferred
                .iter()
                .take(MAX_LISTED)
                .map(|t| PayloadDeferred {
                    name: t.name().to_owned(),
                    provenance: t.provenance.clone(),
                })
                .collect(),
            deferred_count: deferred.len(),
            deferred_omitted: deferred.len().saturating_sub(MAX_LISTED),
            search_active: surface.search_active(),
            catalog_bytes: surface.catalog_text().map_or(0, |c| c.len()),
            budget: surface.budget(),
        }
    }

    /// Names of the array entries listed.
    pub fn names(&self) -> Vec<String> {
        self.tools.iter().map(|t| t.name.clone()).collect()
    }
}

/// SHA-256 of `bytes` as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    let digest = aws_lc_rs::digest::digest(&aws_lc_rs::digest::SHA256, bytes);
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sha256_known_vectors() {
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            sha256_hex(b"abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
    }

    #[test]
    fn token_estimates() {
        assert_eq!(estimate_tokens(0), 0);
        assert_eq!(estimate_tokens(1), 1);
        assert_eq!(estimate_tokens(8), 2);
        assert_eq!(deferred_cost("abc"), 1);
        assert_eq!(deferred_cost("mcp__github__search"), 5);
    }
}

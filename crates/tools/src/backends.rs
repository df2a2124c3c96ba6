//! Storage seams of the tools that need a database: `memory` ([`MemoryBackend`]), `recall`
//! ([`HistoryBackend`]) and `skill` ([`SkillBackend`]).
//!
//! This crate must not know the store (or sessions): the node implements these traits over
//! its store and workstream manager and registers the tools at start-up. The records here
//! are the tools' own view — typed where the model's arguments are typed (memory type and
//! scope), plain text where the tools only display a value.

use std::fmt;

use async_trait::async_trait;

/// A backend failure, as text for the model (`Error: …` is added by the tool).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct BackendError(pub String);

impl BackendError {
    pub fn new(message: impl Into<String>) -> Self {
        Self(message.into())
    }
}

macro_rules! word_enum {
    ($(#[$meta:meta])* $name:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name { $($variant),+ }

        impl $name {
            /// Every value, in schema order.
            pub const ALL: &'static [$name] = &[$($name::$variant),+];

            pub fn as_str(self) -> &'static str {
                match self { $($name::$variant => $text),+ }
            }

            /// The value of this exact (lower-case) word.
            pub fn parse(text: &str) -> Option<Self> {
                match text { $($text => Some($name::$variant),)+ _ => None }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
    };
}

word_enum!(
    /// What a memory is about (`project` is the general-purpose type, the seed's `general`).
    MemoryType { User => "user", Project => "project", Feedback => "feedback", Reference => "reference" }
);

word_enum!(
    /// Where a memory lives. `workstream` memories belong to one workstream (`scope_id` = its
    /// id); `user` memories to one user.
    MemoryScope { Global => "global", Workstream => "workstream", User => "user" }
);

/// A scope and the id it is keyed by (empty for `global`): the unit a name is unique in.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MemoryScopeRef {
    pub scope: MemoryScope,
    pub scope_id: String,
}

impl MemoryScopeRef {
    pub fn global() -> Self {
        Self {
            scope: MemoryScope::Global,
            scope_id: String::new(),
        }
    }

    pub fn workstream(ws_id: impl Into<String>) -> Self {
        Self {
            scope: MemoryScope::Workstream,
            scope_id: ws_id.into(),
        }
    }
}

/// A memory to save: inserted, or updated in place when `(name, scope)` exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewMemory {
    pub name: String,
    pub content: String,
    pub description: String,
    pub mem_type: MemoryType,
    pub scope: MemoryScopeRef,
}

/// A stored memory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryEntry {
    pub name: String,
    pub description: String,
    pub mem_type: MemoryType,
    pub scope: MemoryScopeRef,
    pub content: String,
    /// ISO timestamps.
    pub created: String,
    pub updated: String,
    /// Reads counted by `get`.
    pub access_count: i64,
}

/// Which memories a `search` or `list` covers: a type (any when `None`) in any of `scopes`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MemoryQuery {
    pub mem_type: Option<MemoryType>,
    /// Must not be empty: the tool always names the scopes the session can see.
    pub scopes: Vec<MemoryScopeRef>,
}

/// Structured memories (the `memory` tool's storage).
#[async_trait]
pub trait MemoryBackend: Send + Sync {
    async fn save(&self, memory: NewMemory) -> Result<MemoryEntry, BackendError>;
    /// Reads one memory (and counts the access).
    async fn get(
        &self,
        name: &str,
        scope: &MemoryScopeRef,
    ) -> Result<Option<MemoryEntry>, BackendError>;
    /// Memories containing every word of `query` in name, description or content, best
    /// first.
    async fn search(
        &self,
        query: &str,
        filter: &MemoryQuery,
        limit: usize,
    ) -> Result<Vec<MemoryEntry>, BackendError>;
    /// `false` when there was no such memory.
    async fn delete(&self, name: &str, scope: &MemoryScopeRef) -> Result<bool, BackendError>;
    /// Most recently updated first.
    async fn list(
        &self,
        filter: &MemoryQuery,
        limit: usize,
    ) -> Result<Vec<MemoryEntry>, BackendError>;
}

/// One message of conversation history that matched a search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HistoryHit {
    /// ISO timestamp of the message.
    pub timestamp: String,
    /// The workstream it belongs to.
    pub ws_id: String,
    /// `user`, `assistant`, `tool_call` or `tool_result`.
    pub role: String,
    pub tool_name: Option<String>,
    /// The matching excerpt (matches marked with `[` `]`).
    pub snippet: String,
}

/// Full-text search of conversation history across sessions (the `recall` tool's storage).
#[async_trait]
pub trait HistoryBackend: Send + Sync {
    /// Messages containing every word of `query`, newest first, at most `limit`.
    async fn search(&self, query: &str, limit: usize) -> Result<Vec<HistoryHit>, BackendError>;
}

/// What the `skill` tool shows of a skill.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SkillSummary {
    pub name: String,
    pub description: String,
    pub category: String,
    pub tags: Vec<String>,
    /// `named`, `default` or `search`.
    pub activation: String,
    /// The security scan's risk level (`safe`, `low`, `medium`, `high`, `critical`); empty
    /// when never scanned.
    pub risk_level: String,
}

impl SkillSummary {
    /// The risk level to show: the scan's, or `unscanned`.
    pub fn risk(&self) -> &str {
        if self.risk_level.is_empty() {
            "unscanned"
        } else {
            &self.risk_level
        }
    }

    /// Whether the scan rated the skill `high` or `critical`.
    pub fn is_risky(&self) -> bool {
        matches!(
            self.risk_level.to_ascii_lowercase().as_str(),
            "high" | "critical"
        )
    }
}

/// Enabled skills, and activation of one on a workstream (the `skill` tool's storage).
#[async_trait]
pub trait SkillBackend: Send + Sync {
    /// Enabled skills that may match `query` (any word in name, description, tags or
    /// category; all enabled skills for a query without words), at most `limit`. The tool
    /// ranks them.
    async fn candidates(
        &self,
        query: &str,
        limit: usize,
    ) -> Result<Vec<SkillSummary>, BackendError>;
    /// The enabled skill of this name.
    async fn get(&self, name: &str) -> Result<Option<SkillSummary>, BackendError>;
    /// Makes the enabled skill `name` the active skill of workstream `ws_id` (replacing any
    /// other) and persists the choice. An unknown or disabled skill is an error
    /// (`Skill not found or disabled: <name>`).
    async fn activate(&self, ws_id: &str, name: &str) -> Result<SkillSummary, BackendError>;
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    // The seams are object-safe and shareable.
    #[allow(dead_code)]
    fn object_safe(
        _: Arc<dyn MemoryBackend>,
        _: Arc<dyn HistoryBackend>,
        _: Arc<dyn SkillBackend>,
    ) {
    }

    #[test]
    fn words_round_trip() {
        for t in MemoryType::ALL {
            assert_eq!(MemoryType::parse(t.as_str()), Some(*t));
        }
        for s in MemoryScope::ALL {
            assert_eq!(MemoryScope::parse(s.as_str()), Some(*s));
        }
        assert_eq!(MemoryType::parse("general"), None);
        assert_eq!(MemoryScope::parse("Global"), None);
    }

    #[test]
    fn risk_levels() {
        let mut s = SkillSummary {
            name: "x".into(),
            description: String::new(),
            category: String::new(),
            tags: Vec::new(),
            activation: "named".into(),
            risk_level: String::new(),
        };
        assert_eq!(s.risk(), "unscanned");
        assert!(!s.is_risky());
        s.risk_level = "CRITICAL".into();
        assert!(s.is_risky());
        s.risk_level = "medium".into();
        assert!(!s.is_risky());
    }
}

//! The tools that need storage — `memory`, `recall`, `skill` — wired to the node: their
//! backends ([`turnstone_tools::backends`]) implemented over the node's store, and
//! [`register`], which adds the three tools to the engine's live registry once persistence
//! is open.
//!
//! The terminal client registers the same tools over its own store with
//! [`register_with`] and [`ManagerWorkstreams`].
//!
//! The `skill` backend activates a skill on a live workstream, so it reaches the node's
//! workstream manager through a [`Weak`] reference (the node owns the engine that owns the
//! registry that owns the tool: a strong reference would be a cycle).

use std::sync::{Arc, Weak};

use async_trait::async_trait;
use turnstone_store::{
    Memory, MemoryFilter, MemoryInput, MemoryScope as StoreScope, MemoryType as StoreType,
    ScopeRef, Skill, Store, StoreError,
};
use turnstone_tools::{
    BackendError, HistoryBackend, HistoryHit, MemoryBackend, MemoryEntry, MemoryQuery, MemoryScope,
    MemoryScopeRef, MemoryTool, MemoryType, NewMemory, Provenance, RecallTool, RegistryError,
    SkillBackend, SkillSummary, SkillTool, ToolRegistry,
};

use turnstone_engine::{Engine, Manager, WorkstreamHandle};

use crate::server::Node;

/// Adds `memory`, `recall` and `skill` (backed by `store`; `skill load` activates on
/// `node`'s workstreams) to `registry`. Workstreams see them from their next turn on.
pub fn register(
    registry: &ToolRegistry,
    store: Arc<dyn Store>,
    node: Weak<Node>,
) -> Result<(), RegistryError> {
    register_with(registry, store, Arc::new(NodeWorkstreams(node)))
}

/// Finds the live workstream `skill load` activates a skill on, and its engine: the
/// node's workstreams, or the terminal client's manager.
pub trait SkillHost: Send + Sync {
    /// The workstream `ws_id` and the engine it runs on; `Err` says why not.
    fn workstream(&self, ws_id: &str) -> Result<(WorkstreamHandle, Arc<Engine>), BackendError>;
}

/// The node's workstreams (a [`Weak`] reference: see the module docs).
struct NodeWorkstreams(Weak<Node>);

impl SkillHost for NodeWorkstreams {
    fn workstream(&self, ws_id: &str) -> Result<(WorkstreamHandle, Arc<Engine>), BackendError> {
        let node = self
            .0
            .upgrade()
            .ok_or_else(|| BackendError("the node is shutting down".into()))?;
        let ws = node
            .workstream(ws_id)
            .ok_or_else(|| BackendError(format!("Unknown workstream: {ws_id}")))?;
        Ok((ws, node.manager.engine().clone()))
    }
}

/// A manager's workstreams (the terminal client's; a [`Weak`] reference, as the manager
/// owns the engine that owns the tool).
#[derive(Debug, Clone)]
pub struct ManagerWorkstreams(pub Weak<Manager>);

impl SkillHost for ManagerWorkstreams {
    fn workstream(&self, ws_id: &str) -> Result<(WorkstreamHandle, Arc<Engine>), BackendError> {
        let manager = self
            .0
            .upgrade()
            .ok_or_else(|| BackendError("shutting down".into()))?;
        let ws = manager
            .get(ws_id)
            .ok_or_else(|| BackendError(format!("Unknown workstream: {ws_id}")))?;
        Ok((ws, manager.engine().clone()))
    }
}

/// Adds `memory`, `recall` and `skill` (backed by `store`; `skill load` activates on the
/// workstreams `host` finds) to `registry`. Workstreams see them from their next turn on.
pub fn register_with(
    registry: &ToolRegistry,
    store: Arc<dyn Store>,
    host: Arc<dyn SkillHost>,
) -> Result<(), RegistryError> {
    registry.add(
        Arc::new(MemoryTool::new(Arc::new(StoreMemories(store.clone())))?),
        Provenance::Builtin,
    )?;
    registry.add(
        Arc::new(RecallTool::new(Arc::new(StoreHistory(store.clone())))?),
        Provenance::Builtin,
    )?;
    registry.add(
        Arc::new(SkillTool::new(Arc::new(StoreSkills { store, host }))?),
        Provenance::Builtin,
    )?;
    tracing::info!("memory, recall and skill tools registered");
    Ok(())
}

/// [`register`] for a node with persistence (a no-op without it).
pub fn register_for(node: &Arc<Node>) -> Result<(), RegistryError> {
    let Some(p) = &node.persistence else {
        return Ok(());
    };
    register(
        node.manager.engine().registry(),
        p.store.clone(),
        Arc::downgrade(node),
    )
}

fn backend_error(e: StoreError) -> BackendError {
    match e {
        StoreError::InvalidInput(m) => BackendError(m),
        other => {
            tracing::warn!(error = %other, "tool storage failed");
            BackendError(format!("storage error: {other}"))
        }
    }
}

fn store_type(t: MemoryType) -> StoreType {
    match t {
        MemoryType::User => StoreType::User,
        MemoryType::Project => StoreType::Project,
        MemoryType::Feedback => StoreType::Feedback,
        MemoryType::Reference => StoreType::Reference,
    }
}

fn tool_type(t: StoreType) -> MemoryType {
    match t {
        StoreType::User => MemoryType::User,
        StoreType::Project => MemoryType::Project,
        StoreType::Feedback => MemoryType::Feedback,
        StoreType::Reference => MemoryType::Reference,
    }
}

fn store_scope(s: &MemoryScopeRef) -> ScopeRef {
    let scope = match s.scope {
        MemoryScope::Global => StoreScope::Global,
        MemoryScope::Workstream => StoreScope::Workstream,
        MemoryScope::User => StoreScope::User,
    };
    ScopeRef::new(scope, s.scope_id.clone())
}

/// The tool's view of a stored memory; `None` for a scope the tools do not expose
/// (coordinator, project), which a tool query never selects.
fn entry(m: Memory) -> Option<MemoryEntry> {
    let scope = match m.scope {
        StoreScope::Global => MemoryScope::Global,
        StoreScope::Workstream => MemoryScope::Workstream,
        StoreScope::User => MemoryScope::User,
        StoreScope::Coordinator | StoreScope::Project => return None,
    };
    Some(MemoryEntry {
        name: m.name,
        description: m.description,
        mem_type: tool_type(m.mem_type),
        scope: MemoryScopeRef {
            scope,
            scope_id: m.scope_id,
        },
        content: m.content,
        created: m.created,
        updated: m.updated,
        access_count: m.access_count,
    })
}

/// The tool's view of the memories a search or listing found.
fn entries(found: Result<Vec<Memory>, StoreError>) -> Result<Vec<MemoryEntry>, BackendError> {
    let found = found.map_err(backend_error)?;
    Ok(found.into_iter().filter_map(entry).collect())
}

fn filter(query: &MemoryQuery) -> MemoryFilter {
    MemoryFilter {
        mem_type: query.mem_type.map(store_type),
        scopes: query.scopes.iter().map(store_scope).collect(),
    }
}

/// [`MemoryBackend`] over the store's structured memories.
struct StoreMemories(Arc<dyn Store>);

#[async_trait]
impl MemoryBackend for StoreMemories {
    async fn save(&self, memory: NewMemory) -> Result<MemoryEntry, BackendError> {
        let saved = self
            .0
            .save_memory(MemoryInput {
                name: memory.name,
                content: memory.content,
                description: memory.description,
                mem_type: store_type(memory.mem_type),
                scope: store_scope(&memory.scope),
            })
            .await
            .map_err(backend_error)?;
        entry(saved).ok_or_else(|| BackendError("saved in a scope the tools do not show".into()))
    }

    async fn get(
        &self,
        name: &str,
        scope: &MemoryScopeRef,
    ) -> Result<Option<MemoryEntry>, BackendError> {
        let found = self
            .0
            .get_memory(name, &store_scope(scope))
            .await
            .map_err(backend_error)?;
        Ok(found.and_then(entry))
    }

    async fn search(
        &self,
        query: &str,
        filter_by: &MemoryQuery,
        limit: usize,
    ) -> Result<Vec<MemoryEntry>, BackendError> {
        if filter_by.scopes.is_empty() {
            return Ok(Vec::new());
        }
        entries(
            self.0
                .search_memories(query, &filter(filter_by), limit)
                .await,
        )
    }

    async fn delete(&self, name: &str, scope: &MemoryScopeRef) -> Result<bool, BackendError> {
        self.0
            .delete_memory(name, &store_scope(scope))
            .await
            .map_err(backend_error)
    }

    async fn list(
        &self,
        filter_by: &MemoryQuery,
        limit: usize,
    ) -> Result<Vec<MemoryEntry>, BackendError> {
        if filter_by.scopes.is_empty() {
            return Ok(Vec::new());
        }
        entries(self.0.list_memories(&filter(filter_by), limit).await)
    }
}

/// [`HistoryBackend`] over the store's full-text search.
struct StoreHistory(Arc<dyn Store>);

#[async_trait]
impl HistoryBackend for StoreHistory {
    async fn search(&self, query: &str, limit: usize) -> Result<Vec<HistoryHit>, BackendError> {
        let hits = self.0.search(query, limit).await.map_err(backend_error)?;
        Ok(hits
            .into_iter()
            .map(|h| HistoryHit {
                timestamp: h.timestamp,
                ws_id: h.ws_id,
                role: h.role,
                tool_name: h.tool_name,
                snippet: h.snippet,
            })
            .collect())
    }
}

/// The `skill` tool's view of a stored skill.
pub fn skill_summary(skill: &Skill) -> SkillSummary {
    SkillSummary {
        name: skill.spec.name.clone(),
        description: skill.spec.description.clone(),
        category: skill.spec.category.clone(),
        tags: skill.spec.tags.clone(),
        activation: skill.spec.activation.clone(),
        risk_level: skill.spec.scan_status.clone(),
    }
}

/// [`SkillBackend`] over the store's skills and the workstreams of a [`SkillHost`].
struct StoreSkills {
    store: Arc<dyn Store>,
    host: Arc<dyn SkillHost>,
}

#[async_trait]
impl SkillBackend for StoreSkills {
    async fn candidates(
        &self,
        query: &str,
        limit: usize,
    ) -> Result<Vec<SkillSummary>, BackendError> {
        let skills = self
            .store
            .skill_candidates(query, limit)
            .await
            .map_err(backend_error)?;
        Ok(skills.iter().map(skill_summary).collect())
    }

    async fn get(&self, name: &str) -> Result<Option<SkillSummary>, BackendError> {
        let skill = self.store.get_skill(name).await.map_err(backend_error)?;
        Ok(skill.filter(|s| s.spec.enabled).as_ref().map(skill_summary))
    }

    async fn activate(&self, ws_id: &str, name: &str) -> Result<SkillSummary, BackendError> {
        let (ws, engine) = self.host.workstream(ws_id)?;
        let skill = crate::server::skills::activate_in(self.store.as_ref(), &engine, &ws, name)
            .await
            .map_err(|e| BackendError(e.to_string()))?;
        Ok(skill_summary(&skill))
    }
}

//! Per-workstream model selection: a workstream may run on another alias of the engine's
//! model registry ([`crate::EngineConfig::models`]) than the engine's own model — `/model
//! <alias>`, or `workstreams/new` with `"model"`. The choice applies from the workstream's
//! next model request (normally the next turn), is handed to the journal as the session setting
//! `model` (the alias), and is restored on resume with
//! [`WorkstreamHandle::restore_model`].
//!
//! The registry's default alias *is* the engine's own provider: selecting it clears the
//! override. Every other alias gets one [`Resilient`] client (its fallback chain, the
//! engine's retry policy, its own breaker), built on first use and shared by every
//! workstream that selects it.

use std::sync::Arc;

use turnstone_llm::{CircuitBreaker, ModelRegistry, Resilient};

use crate::Engine;
use crate::workstream::{Shared, WorkstreamHandle, lock};

/// The session setting that stores a workstream's model alias.
pub const MODEL_CONFIG_KEY: &str = "model";

/// A workstream's model override: a registry alias and what it resolved to.
#[derive(Clone)]
pub struct ModelChoice {
    /// The registry alias.
    pub alias: String,
    /// The model name sent to the backend.
    pub model: String,
    /// The model's context window in tokens.
    pub context_window: u32,
    provider: Resilient,
}

impl std::fmt::Debug for ModelChoice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelChoice")
            .field("alias", &self.alias)
            .field("model", &self.model)
            .field("context_window", &self.context_window)
            .finish()
    }
}

/// Why a model could not be selected; the text is what a user is told.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ModelError {
    /// The engine has no registry: every workstream uses the engine's model.
    #[error("No model aliases are configured; the model stays {0}.")]
    NoRegistry(String),
    /// Not an alias of the registry.
    #[error("Unknown model alias '{alias}'. Available: {known}")]
    Unknown { alias: String, known: String },
}

impl Engine {
    /// The registry's aliases, sorted (empty without a registry).
    pub fn model_aliases(&self) -> Vec<String> {
        self.config()
            .models
            .as_ref()
            .map(|r| r.aliases().into_iter().map(str::to_string).collect())
            .unwrap_or_default()
    }

    /// Resolves `alias` against the registry. `Ok(None)`: it names the engine's own model
    /// (the registry default), so selecting it clears an override.
    pub async fn resolve_model(&self, alias: &str) -> Result<Option<ModelChoice>, ModelError> {
        let alias = alias.trim();
        let Some(registry) = self.config().models.clone() else {
            return Err(ModelError::NoRegistry(self.config().model.clone()));
        };
        let unknown = || ModelError::Unknown {
            alias: alias.to_string(),
            known: registry.aliases().join(", "),
        };
        let entry = registry.get(alias).map_err(|_| unknown())?.entry.clone();
        if alias == registry.default_alias() {
            return Ok(None);
        }
        let provider = self.alias_provider(&registry, alias).ok_or_else(unknown)?;
        let context_window = match entry.capabilities() {
            Some(c) => c.context_window,
            None => match provider.inner.capabilities(&entry.model).await {
                Ok(c) => c.context_window,
                Err(e) => {
                    tracing::warn!(alias, error = %e, "model capabilities unavailable; using the engine's context window");
                    self.context_window()
                }
            },
        };
        Ok(Some(ModelChoice {
            alias: alias.to_string(),
            model: entry.model,
            context_window,
            provider,
        }))
    }

    /// The shared client of a non-default alias, built on first use.
    fn alias_provider(&self, registry: &ModelRegistry, alias: &str) -> Option<Resilient> {
        let mut routes = lock(&self.routes);
        if let Some(p) = routes.get(alias) {
            return Some(p.clone());
        }
        let chain = registry.chain(alias).ok()?;
        let provider = Resilient::new(
            Arc::new(chain),
            self.provider().policy.clone(),
            Arc::new(CircuitBreaker::default()),
        );
        routes.insert(alias.to_string(), provider.clone());
        Some(provider)
    }
}

/// The model choice in force: the active skill's, else the workstream's `/model` choice.
fn current(shared: &Shared) -> Option<ModelChoice> {
    let skill = lock(&shared.overrides).model.clone();
    skill.or_else(|| lock(&shared.model).clone())
}

/// The client a workstream's requests go to.
pub(crate) fn provider(engine: &Engine, shared: &Shared) -> Resilient {
    match current(shared) {
        Some(choice) => choice.provider,
        None => engine.provider().clone(),
    }
}

/// The model name a workstream's requests carry.
pub(crate) fn model_name(engine: &Engine, shared: &Shared) -> String {
    match current(shared) {
        Some(choice) => choice.model,
        None => engine.config().model.clone(),
    }
}

/// The context window of a workstream's model.
pub(crate) fn context_window(engine: &Engine, shared: &Shared) -> u32 {
    match current(shared) {
        Some(choice) => choice.context_window,
        None => engine.context_window(),
    }
}

impl WorkstreamHandle {
    /// The model this workstream's next request uses and its alias (`""` when the engine's
    /// model has none).
    pub fn model(&self) -> (String, String) {
        match current(&self.shared) {
            Some(choice) => (choice.model, choice.alias),
            None => (
                self.engine.config().model.clone(),
                self.engine.config().model_alias.clone(),
            ),
        }
    }

    /// Switches this workstream to the registry alias `alias` from its next request and
    /// hands the choice to the journal (session setting `model`). Returns the model name
    /// and alias now in use.
    pub async fn select_model(&self, alias: &str) -> Result<(String, String), ModelError> {
        let choice = self.engine.resolve_model(alias).await?;
        Ok(self.use_model(choice))
    }

    /// Uses `choice` (from [`Engine::resolve_model`]; `None`: the engine's model) from the
    /// next request and hands it to the journal. Returns the model name and alias. An
    /// active skill's model gives way to this explicit choice.
    pub fn use_model(&self, choice: Option<ModelChoice>) -> (String, String) {
        let stored = choice.as_ref().map(|c| c.alias.clone());
        tracing::info!(ws_id = %self.shared.id, alias = stored.as_deref().unwrap_or("(default)"), "model selected");
        lock(&self.shared.overrides).model = None;
        *lock(&self.shared.model) = choice;
        self.shared
            .config_changed(MODEL_CONFIG_KEY, stored.as_deref());
        self.model()
    }

    /// Restores a resumed session's stored model alias (not journaled again). An alias
    /// that no longer resolves leaves the engine's model, with a warning.
    pub async fn restore_model(&self, alias: &str) {
        let choice = match self.engine.resolve_model(alias).await {
            Ok(choice) => choice,
            Err(e) => {
                tracing::warn!(ws_id = %self.shared.id, alias, error = %e, "stored model not restored; using the engine's model");
                None
            }
        };
        *lock(&self.shared.model) = choice;
    }
}

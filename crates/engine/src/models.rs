//! Per-workstream model selection: a workstream may run on another alias of the engine's
//! model registry ([`crate::EngineConfig::models`]) than the engine's own model — `/model
//! <alias>`, or `workstreams/new` with `"model"`. The choice applies from the workstream's
//! next model request (normally the next turn), is handed to the journal as the session setting
//! `model` (the alias), and is restored on resume with
//! `WorkstreamHandle::restore_model`.
//!
//! The registry's default alias *is* the engine's own provider: selecting it clears the
//! override. Every other alias gets one [`Resilient`] client (its fallback chain, the
//! engine's retry policy, its own breaker), built on first use and shared by every
//! workstream that selects it.

use std::sync::Arc;

use turnstone_llm::{CircuitBreaker, ModelRegistry, Resilient};

use crate::engine::Engine;
use crate::state::ModelChoice;

/// The session setting that stores a workstream's model alias.
pub const MODEL_CONFIG_KEY: &str = "model";

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
        let vision = entry.vision;
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
            vision,
            provider,
        }))
    }

    /// The shared client of a non-default alias, built on first use.
    fn alias_provider(&self, registry: &ModelRegistry, alias: &str) -> Option<Resilient> {
        let mut routes = self.routes.lock();
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

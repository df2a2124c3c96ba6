//! `ts_` API tokens looked up in the store, for the authenticator of either service
//! ([`turnstone_runtime::auth::Authenticator::with_api_tokens`]); the same lookup answers
//! the session generation of a user's JWTs (logout and role changes end sessions).

use std::sync::Arc;
use std::time::SystemTime;

use turnstone_runtime::auth::{
    ApiTokenLookup, ApiTokenLookupError, ApiTokenRecord, Permissions, Scopes,
};
use turnstone_store::{Store, StoreError};

/// `ts_` API tokens looked up in the store.
pub struct StoreApiTokens(pub Arc<dyn Store>);

#[async_trait::async_trait]
impl ApiTokenLookup for StoreApiTokens {
    async fn lookup_api_token(
        &self,
        token_hash: &str,
    ) -> Result<Option<ApiTokenRecord>, ApiTokenLookupError> {
        let failed = |e: StoreError| ApiTokenLookupError(e.to_string());
        let Some(row) = self.0.api_token_by_hash(token_hash).await.map_err(failed)? else {
            return Ok(None);
        };
        // An expiry that cannot be read is treated as already expired.
        let expires_at = row
            .expires
            .as_deref()
            .filter(|e| !e.trim().is_empty())
            .map(|text| turnstone_store::timestamp::parse(text).unwrap_or(SystemTime::UNIX_EPOCH));
        let permissions = self
            .0
            .user_permissions(&row.user_id)
            .await
            .map_err(failed)?;
        let generation = self
            .0
            .session_generation(&row.user_id)
            .await
            .map_err(failed)?;
        Ok(Some(ApiTokenRecord {
            user_id: row.user_id,
            scopes: Scopes::parse(&row.scopes),
            expires_at,
            permissions: Permissions::parse(&permissions.join(",")),
            generation,
        }))
    }

    async fn session_generation(&self, user_id: &str) -> Result<Option<i64>, ApiTokenLookupError> {
        self.0
            .session_generation(user_id)
            .await
            .map_err(|e| ApiTokenLookupError(e.to_string()))
    }
}

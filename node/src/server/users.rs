//! Stored users and API tokens on the node: `ts_` token lookup for the authenticator, password
//! checks for login, one-time setup of the first admin (`POST /v1/api/auth/setup`, spec §3.5),
//! and the user/token/role administration under `/v1/api/admin/` (approve scope and the
//! `admin.users` / `admin.roles` permissions, `NODE_ROUTES`).
//!
//! The logic and the handlers live in `turnstone-accounts`, shared with the console; this
//! module only says where the node's store is. The original administered users only on the
//! console or with `turnstone-admin`; these routes let a standalone node run with stored users
//! and API tokens.

use std::sync::Arc;

use axum::Router;
use turnstone_accounts::AccountsHost;
pub use turnstone_accounts::api_tokens::StoreApiTokens;
pub use turnstone_accounts::passwords::{BCRYPT_COST, password_identity};
pub use turnstone_accounts::users::{NewUserBody, SetupReply};
use turnstone_runtime::auth::Identity;
use turnstone_store::Store;

use super::error::ApiError;
use super::memories::store;
use super::state::Node;

impl AccountsHost for Node {
    fn accounts_store(&self) -> Option<Arc<dyn Store>> {
        self.store()
    }
}

/// Whether any user exists (`false` without storage).
pub async fn has_users(node: &Node) -> bool {
    turnstone_accounts::users::has_users(node.store().as_ref()).await
}

/// Creates the first user (admin role) if there is none; the login reply's identity.
pub async fn setup_first_user(
    node: &Node,
    body: &NewUserBody,
) -> Result<(Identity, SetupReply), ApiError> {
    let store = store(node)?;
    Ok(turnstone_accounts::users::setup_first_user(&store, body).await?)
}

/// The admin routes (relative to `/v1`).
pub fn admin_routes() -> Router<Arc<Node>> {
    turnstone_accounts::admin_routes::<Node>()
}

//! The console's own storage on both backends (SQLite file, fresh PostgreSQL database):
//! users, `ts_` API tokens and roles under `/v1/api/admin/` (the node's handlers through
//! `turnstone-accounts`) — create, list, update, delete, bad input answered 4xx with a
//! message, and the permission of every resource; login with a stored user, `has_users`,
//! logout ending the session, and the login limiter.

use reqwest::Method;
use serde_json::json;

use super::db::{Db, both_backends};
use super::*;

both_backends!(users, tokens, roles, login_and_permissions);

async fn console(db: &Db) -> TestConsole {
    TestConsole::start_with_store(&prefix(), db.store.clone()).await
}

const PASSWORD: &str = "correct horse battery";

/// Creates a user through the admin route (as the full-access token); its id.
async fn create_user(c: &TestConsole, username: &str, role: &str) -> String {
    let (status, body) = c
        .call(
            Method::POST,
            "/v1/api/admin/users",
            Some(
                json!({"username": username, "display_name": format!("{username} person"),
                "password": PASSWORD, "role": role}),
            ),
            Some(TOKEN),
        )
        .await;
    assert_eq!(status, 201, "{body}");
    body["user_id"].as_str().unwrap().to_string()
}

/// Logs a stored user in; the session JWT.
async fn login(c: &TestConsole, username: &str) -> String {
    let (status, body) = c
        .call(
            Method::POST,
            "/v1/api/auth/login",
            Some(json!({"username": username, "password": PASSWORD})),
            None,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    body["jwt"].as_str().unwrap().to_string()
}

async fn users(db: Db) {
    let c = console(&db).await;
    let (_, status) = c.get_as("/v1/api/auth/status", None).await;
    assert_eq!(status["has_users"], false);
    assert_eq!(status["setup_required"], true);

    let ada = create_user(&c, "ada", "admin").await;
    let (_, status) = c.get_as("/v1/api/auth/status", None).await;
    assert_eq!(status["has_users"], true);
    assert_eq!(status["setup_required"], false);

    let (code, list) = c.get("/v1/api/admin/users").await;
    assert_eq!(code, 200);
    let row = &list["users"][0];
    assert_eq!(row["username"], "ada");
    assert_eq!(row["roles"], json!(["builtin-admin"]));
    assert!(row.get("password_hash").is_none(), "{row}");

    // Update: display name, then password (the old one stops working).
    let path = format!("/v1/api/admin/users/{ada}");
    let (code, row) = c
        .call(
            Method::PUT,
            &path,
            Some(json!({"display_name": "Ada L."})),
            Some(TOKEN),
        )
        .await;
    assert_eq!((code, row["display_name"].as_str()), (200, Some("Ada L.")));

    // Bad input: 4xx with the reason.
    assert_error(
        c.call(Method::PUT, &path, Some(json!({})), Some(TOKEN))
            .await,
        400,
        "Nothing to change",
    );
    assert_error(
        c.call(
            Method::PUT,
            &path,
            Some(json!({"password": "short"})),
            Some(TOKEN),
        )
        .await,
        400,
        "at least 8",
    );
    assert_error(
        c.call(
            Method::PUT,
            "/v1/api/admin/users/nobody",
            Some(json!({"display_name": "x"})),
            Some(TOKEN),
        )
        .await,
        404,
        "User not found",
    );
    let bad = |username: &str, role: &str| json!({"username": username, "display_name": "X", "password": PASSWORD, "role": role});
    assert_error(
        c.call(
            Method::POST,
            "/v1/api/admin/users",
            Some(bad("no spaces", "viewer")),
            Some(TOKEN),
        )
        .await,
        400,
        "Invalid username",
    );
    assert_error(
        c.call(
            Method::POST,
            "/v1/api/admin/users",
            Some(bad("ada", "viewer")),
            Some(TOKEN),
        )
        .await,
        400,
        "taken",
    );
    assert_error(
        c.call(
            Method::POST,
            "/v1/api/admin/users",
            Some(bad("bob", "wizard")),
            Some(TOKEN),
        )
        .await,
        400,
        "Unknown role 'wizard'",
    );
    assert_error(
        c.call(
            Method::POST,
            "/v1/api/admin/users",
            Some(json!([1, 2])),
            Some(TOKEN),
        )
        .await,
        400,
        "",
    );

    // Delete: once, then 404.
    let (code, _) = c.call(Method::DELETE, &path, None, Some(TOKEN)).await;
    assert_eq!(code, 200);
    assert_error(
        c.call(Method::DELETE, &path, None, Some(TOKEN)).await,
        404,
        "User not found",
    );
    let (_, list) = c.get("/v1/api/admin/users").await;
    assert_eq!(list["users"], json!([]));
}

async fn tokens(db: Db) {
    let c = console(&db).await;
    let ada = create_user(&c, "ada", "operator").await;
    let (code, created) = c
        .call(
            Method::POST,
            "/v1/api/admin/tokens",
            Some(json!({"username": "ada", "name": "ci", "scopes": "write,read"})),
            Some(TOKEN),
        )
        .await;
    assert_eq!(code, 201, "{created}");
    let raw = created["token"].as_str().unwrap().to_string();
    assert!(raw.starts_with("ts_"), "{raw}");
    assert_eq!(created["scopes"], "read,write");
    assert_eq!(created["user_id"], ada.as_str());

    // The token signs in to the console (a user identity with the operator's scopes).
    let (code, who) = c.get_as("/v1/api/auth/whoami", Some(&raw)).await;
    assert_eq!((code, who["user_id"].as_str()), (200, Some(ada.as_str())));
    let (code, _) = c.get_as("/v1/api/cluster/overview", Some(&raw)).await;
    assert_eq!(code, 200);

    let (code, list) = c.get(&format!("/v1/api/admin/tokens?user_id={ada}")).await;
    assert_eq!(code, 200);
    assert_eq!(list["tokens"].as_array().unwrap().len(), 1);
    assert!(
        list["tokens"][0].get("token").is_none(),
        "never shown again"
    );
    assert_eq!(list["tokens"][0]["token_prefix"], &raw[..8]);

    for (body, needle) in [
        (
            json!({"username": "ada", "scopes": "root"}),
            "Unknown scope 'root'",
        ),
        (json!({"username": "ada", "user_id": ada}), "exactly one"),
        (json!({"username": "ada", "expires_days": 0}), "at least 1"),
    ] {
        assert_error(
            c.call(
                Method::POST,
                "/v1/api/admin/tokens",
                Some(body),
                Some(TOKEN),
            )
            .await,
            400,
            needle,
        );
    }
    assert_error(
        c.call(
            Method::POST,
            "/v1/api/admin/tokens",
            Some(json!({"username": "nobody"})),
            Some(TOKEN),
        )
        .await,
        404,
        "User not found",
    );

    // Delete: the token stops working at once.
    let path = format!(
        "/v1/api/admin/tokens/{}",
        created["token_id"].as_str().unwrap()
    );
    let (code, _) = c.call(Method::DELETE, &path, None, Some(TOKEN)).await;
    assert_eq!(code, 200);
    let (code, _) = c.get_as("/v1/api/cluster/overview", Some(&raw)).await;
    assert_eq!(code, 401);
    assert_error(
        c.call(Method::DELETE, &path, None, Some(TOKEN)).await,
        404,
        "Token not found",
    );
}

async fn roles(db: Db) {
    let c = console(&db).await;
    let (code, list) = c.get("/v1/api/admin/roles").await;
    assert_eq!(code, 200);
    let names: Vec<&str> = list["roles"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["admin", "operator", "viewer"]);

    let (code, role) = c
        .call(
            Method::POST,
            "/v1/api/admin/roles",
            Some(json!({"name": "auditor", "permissions": "read, admin.users"})),
            Some(TOKEN),
        )
        .await;
    assert_eq!(code, 201, "{role}");
    assert_eq!(role["permissions"], "admin.users,read");
    assert_eq!(role["builtin"], false);
    let role_id = role["role_id"].as_str().unwrap().to_string();

    for (body, needle) in [
        (
            json!({"name": "x", "permissions": "read,root"}),
            "Unknown permission 'root'",
        ),
        (json!({"name": "x", "permissions": ""}), "must not be empty"),
        (
            json!({"name": "bad name", "permissions": "read"}),
            "Invalid role name",
        ),
        (json!({"name": "auditor", "permissions": "read"}), "taken"),
    ] {
        assert_error(
            c.call(Method::POST, "/v1/api/admin/roles", Some(body), Some(TOKEN))
                .await,
            400,
            needle,
        );
    }

    let path = format!("/v1/api/admin/roles/{role_id}");
    let (code, updated) = c
        .call(
            Method::PUT,
            &path,
            Some(
                json!({"permissions": "read,admin.users,admin.roles", "display_name": "Auditors"}),
            ),
            Some(TOKEN),
        )
        .await;
    assert_eq!(code, 200, "{updated}");
    assert_eq!(updated["permissions"], "admin.roles,admin.users,read");
    assert_eq!(updated["display_name"], "Auditors");
    assert_error(
        c.call(
            Method::PUT,
            "/v1/api/admin/roles/builtin-admin",
            Some(json!({"permissions": "read"})),
            Some(TOKEN),
        )
        .await,
        400,
        "built in",
    );
    assert_error(
        c.call(
            Method::PUT,
            &path,
            Some(json!({"name": "other"})),
            Some(TOKEN),
        )
        .await,
        400,
        "cannot be changed",
    );
    assert_error(
        c.call(
            Method::DELETE,
            "/v1/api/admin/roles/builtin-viewer",
            None,
            Some(TOKEN),
        )
        .await,
        400,
        "built in",
    );

    // Assigning: a user gets the role; unknown roles are refused and change nothing.
    let vic = create_user(&c, "vic", "viewer").await;
    let roles_path = format!("/v1/api/admin/users/{vic}/roles");
    let (code, user) = c
        .call(
            Method::PUT,
            &roles_path,
            Some(json!({"roles": [role_id]})),
            Some(TOKEN),
        )
        .await;
    assert_eq!(code, 200, "{user}");
    assert_eq!(user["roles"], json!([role_id]));
    assert_error(
        c.call(
            Method::PUT,
            &roles_path,
            Some(json!({"roles": ["nope"]})),
            Some(TOKEN),
        )
        .await,
        400,
        "unknown role",
    );
    assert_error(
        c.call(
            Method::PUT,
            "/v1/api/admin/users/nobody/roles",
            Some(json!({"roles": ["viewer"]})),
            Some(TOKEN),
        )
        .await,
        404,
        "User not found",
    );

    // Deleting the role takes it from the user.
    let (code, _) = c.call(Method::DELETE, &path, None, Some(TOKEN)).await;
    assert_eq!(code, 200);
    let (_, list) = c.get("/v1/api/admin/users").await;
    assert_eq!(list["users"][0]["roles"], json!([]));
    assert_error(
        c.call(Method::DELETE, &path, None, Some(TOKEN)).await,
        404,
        "Role not found",
    );
}

async fn login_and_permissions(db: Db) {
    let c = console(&db).await;
    create_user(&c, "ada", "admin").await;
    let vic = create_user(&c, "vic", "viewer").await;
    let (_, role) = c
        .call(
            Method::POST,
            "/v1/api/admin/roles",
            Some(json!({"name": "user-admins", "permissions": "read,admin.users"})),
            Some(TOKEN),
        )
        .await;
    let una = create_user(&c, "una", "viewer").await;
    let (code, _) = c
        .call(
            Method::PUT,
            &format!("/v1/api/admin/users/{una}/roles"),
            Some(json!({"roles": [role["role_id"]]})),
            Some(TOKEN),
        )
        .await;
    assert_eq!(code, 200);

    // Login with stored users: the reply carries the scopes their roles give.
    let (code, reply) = c
        .call(
            Method::POST,
            "/v1/api/auth/login",
            Some(json!({"username": "ada", "password": PASSWORD})),
            None,
        )
        .await;
    assert_eq!(code, 200, "{reply}");
    assert_eq!(reply["scopes"], "approve,read,write");
    assert_eq!(reply["role"], "full");
    let ada_jwt = reply["jwt"].as_str().unwrap().to_string();
    let vic_jwt = login(&c, "vic").await;
    let una_jwt = login(&c, "una").await;
    assert_error(
        c.call(
            Method::POST,
            "/v1/api/auth/login",
            Some(json!({"username": "ada", "password": "wrong password"})),
            None,
        )
        .await,
        401,
        "Invalid credentials",
    );

    // Every admin resource: the admin may, the viewer and a read token may not, nobody
    // without credentials; `admin.users` alone opens users and tokens but not roles.
    for path in [
        "/v1/api/admin/users",
        "/v1/api/admin/tokens",
        "/v1/api/admin/roles",
    ] {
        assert_eq!(
            c.get_as(path, Some(&ada_jwt)).await.0,
            200,
            "{path} as admin"
        );
        assert_eq!(
            c.get_as(path, Some(&vic_jwt)).await.0,
            403,
            "{path} as viewer"
        );
        assert_eq!(
            c.get_as(path, Some(READ_TOKEN)).await.0,
            403,
            "{path} read token"
        );
        assert_eq!(c.get_as(path, None).await.0, 401, "{path} anonymous");
        let want = if path.ends_with("roles") { 403 } else { 200 };
        assert_eq!(
            c.get_as(path, Some(&una_jwt)).await.0,
            want,
            "{path} as una"
        );
    }
    let denied = c
        .call(
            Method::PUT,
            &format!("/v1/api/admin/users/{vic}/roles"),
            Some(json!({"roles": ["admin"]})),
            Some(&una_jwt),
        )
        .await;
    assert_error(denied, 403, "admin.roles");
    let denied = c
        .call(
            Method::POST,
            "/v1/api/admin/users",
            Some(json!({"username": "mal", "display_name": "M", "password": PASSWORD})),
            Some(&vic_jwt),
        )
        .await;
    assert_eq!(denied.0, 403, "{}", denied.1);

    // Logout ends the session: the JWT stops working.
    let resp = c
        .http
        .post(c.url("/v1/api/auth/logout"))
        .bearer_auth(&ada_jwt)
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(c.get_as("/v1/api/admin/users", Some(&ada_jwt)).await.0, 401);

    // The limiter: five failures for one name from one address, then 429 with Retry-After
    // (also for the right password).
    for _ in 0..5 {
        let (code, _) = c
            .call(
                Method::POST,
                "/v1/api/auth/login",
                Some(json!({"username": "vic", "password": "not the password"})),
                None,
            )
            .await;
        assert_eq!(code, 401);
    }
    let resp = c
        .http
        .post(c.url("/v1/api/auth/login"))
        .json(&json!({"username": "vic", "password": PASSWORD}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 429);
    assert!(resp.headers().contains_key("retry-after"));
}

/// With the nodes' PostgreSQL the console and a node share users and tokens: a user and a
/// `ts_` token made in the console sign in on the node (a real `turnstone-server`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_the_nodes_postgres_console_users_and_tokens_work_on_a_node() {
    let db = super::db::postgres().await;
    let c = console(&db).await;
    let ada = create_user(&c, "ada", "operator").await;
    let (code, token) = c
        .call(
            Method::POST,
            "/v1/api/admin/tokens",
            Some(json!({"user_id": ada, "name": "ci", "scopes": "read,write"})),
            Some(TOKEN),
        )
        .await;
    assert_eq!(code, 201, "{token}");
    let raw = token["token"].as_str().unwrap().to_string();

    let node = NodeServer::start_with(
        "node-pg",
        turnstone_console::model::CONSOLE_VERSION,
        10,
        &["--db-backend", "postgresql"],
        &[("TURNSTONE_DB_URL", db.url.as_deref().unwrap())],
    )
    .await;
    let url = node.url.clone();
    let http = reqwest::Client::new();
    let signed_in = http
        .post(format!("{url}/v1/api/auth/login"))
        .json(&json!({"username": "ada", "password": PASSWORD}))
        .send()
        .await
        .unwrap();
    assert_eq!(signed_in.status(), 200);
    let reply: Value = signed_in.json().await.unwrap();
    assert_eq!(reply["user_id"], ada.as_str(), "{reply}");
    let listed = http
        .get(format!("{url}/v1/api/workstreams"))
        .bearer_auth(&raw)
        .send()
        .await
        .unwrap();
    assert_eq!(
        listed.status(),
        200,
        "the console's ts_ token works on the node"
    );
    // And the other way: a user the node's admin routes make signs in on the console.
    let made = http
        .post(format!("{url}/v1/api/admin/users"))
        .bearer_auth(NODE_TOKEN)
        .json(&json!({"username": "bob", "display_name": "Bob", "password": PASSWORD}))
        .send()
        .await
        .unwrap();
    assert_eq!(made.status(), 201);
    login(&c, "bob").await;
    drop(node);
}

/// `/openapi.json` and `/docs` are public and describe the console's own routes.
#[tokio::test]
async fn the_openapi_document_and_docs_page_are_served() {
    let db = super::db::sqlite().await;
    let c = console(&db).await;
    let (code, doc) = c.get_as("/openapi.json", None).await;
    assert_eq!(code, 200);
    assert_eq!(doc["openapi"], "3.1.0");
    assert_eq!(doc["info"]["title"], "turnstone Console API");
    for path in [
        "/v1/api/cluster/overview",
        "/v1/api/admin/users",
        "/v1/api/admin/schedules/{task_id}/runs",
    ] {
        assert!(doc["paths"][path].is_object(), "{path} documented");
    }
    let page = c.http.get(c.url("/docs")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert!(page.text().await.unwrap().contains("/openapi.json"));
}

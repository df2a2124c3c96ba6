//! Users, roles and API tokens.

use turnstone_store::auth::{ROLE_ADMIN, ROLE_VIEWER};
use turnstone_store::{NewApiToken, NewUser, StoreError};

use crate::support::TestDb;

both_backends!(users_roles_and_tokens);
both_backends!(first_user_only_once);

fn new_user(name: &str, roles: &[&str]) -> NewUser {
    NewUser {
        username: name.into(),
        display_name: format!("{name} person"),
        password_hash: "$2b$04$notarealhashbutnonempty".into(),
        roles: roles.iter().map(|r| r.to_string()).collect(),
    }
}

fn new_token(user_id: &str, hash_digit: char) -> NewApiToken {
    NewApiToken {
        token_hash: hash_digit.to_string().repeat(64),
        token_prefix: "ts_abcde".into(),
        user_id: user_id.into(),
        name: "ci".into(),
        scopes: "read,write".into(),
        expires: None,
    }
}

async fn users_roles_and_tokens(db: TestDb) {
    let store = db.open().await;
    assert_eq!(store.count_users().await.unwrap(), 0);
    let admin = store
        .create_user(new_user("ada", &[ROLE_ADMIN]))
        .await
        .unwrap();
    assert_eq!(admin.user_id.len(), 32);
    let viewer = store
        .create_user(new_user("vic", &[ROLE_VIEWER]))
        .await
        .unwrap();
    assert_eq!(store.count_users().await.unwrap(), 2);

    // Duplicate usernames and unknown roles are input errors, and leave nothing behind.
    let dup = store.create_user(new_user("ada", &[])).await.unwrap_err();
    assert!(
        matches!(dup, StoreError::InvalidInput(ref m) if m.contains("taken")),
        "{dup}"
    );
    let bad_role = store
        .create_user(new_user("eve", &["no-such-role"]))
        .await
        .unwrap_err();
    assert!(
        matches!(bad_role, StoreError::InvalidInput(_)),
        "{bad_role}"
    );
    assert_eq!(store.count_users().await.unwrap(), 2, "rolled back");

    let creds = store.user_credentials(" ada ").await.unwrap().unwrap();
    assert_eq!(creds.user, admin);
    assert!(creds.password_hash.starts_with("$2b$"));
    assert!(
        !format!("{creds:?}").contains("$2b$"),
        "hash redacted in Debug"
    );
    assert!(store.user_credentials("nobody").await.unwrap().is_none());

    let perms = store.user_permissions(&admin.user_id).await.unwrap();
    assert!(perms.contains(&"admin.users".to_string()));
    assert!(perms.windows(2).all(|w| w[0] < w[1]), "sorted, unique");
    assert_eq!(
        store.user_permissions(&viewer.user_id).await.unwrap(),
        ["read"]
    );

    let token = store
        .create_api_token(new_token(&admin.user_id, 'a'))
        .await
        .unwrap();
    let found = store
        .api_token_by_hash(&"a".repeat(64))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(found, token);
    assert!(
        store
            .api_token_by_hash(&"b".repeat(64))
            .await
            .unwrap()
            .is_none()
    );
    // A token for a user that does not exist is refused; a malformed hash too.
    assert!(matches!(
        store.create_api_token(new_token("missing", 'c')).await,
        Err(StoreError::NotFound(_))
    ));
    let mut short = new_token(&admin.user_id, 'd');
    short.token_hash = "abc".into();
    assert!(matches!(
        store.create_api_token(short).await,
        Err(StoreError::InvalidInput(_))
    ));
    store
        .create_api_token(new_token(&viewer.user_id, 'e'))
        .await
        .unwrap();
    assert_eq!(store.list_api_tokens(None).await.unwrap().len(), 2);
    assert_eq!(
        store.list_api_tokens(Some(&admin.user_id)).await.unwrap(),
        std::slice::from_ref(&token)
    );
    assert!(store.delete_api_token(&token.token_id).await.unwrap());
    assert!(!store.delete_api_token(&token.token_id).await.unwrap());

    // Deleting a user takes its tokens and roles along.
    assert!(store.delete_user(&viewer.user_id).await.unwrap());
    assert!(
        store
            .api_token_by_hash(&"e".repeat(64))
            .await
            .unwrap()
            .is_none()
    );
    assert!(
        store
            .user_permissions(&viewer.user_id)
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.list_users().await.unwrap(), [admin]);
    store.close().await;
}

async fn first_user_only_once(db: TestDb) {
    let store = db.open().await;
    let first = store
        .create_first_user(new_user("root", &[ROLE_ADMIN]))
        .await
        .unwrap();
    assert!(first.is_some());
    let second = store
        .create_first_user(new_user("other", &[ROLE_ADMIN]))
        .await
        .unwrap();
    assert!(second.is_none(), "setup happens once");
    assert_eq!(store.count_users().await.unwrap(), 1);
    store.close().await;
}

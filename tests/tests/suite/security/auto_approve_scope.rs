//! Item 2: switching approvals off (`auto_approve`, `auto_approve_tools`) needs the approve
//! scope and the `tools.approve` permission over HTTP, and a bridge relays a producer's
//! auto-approve only when it is started with `--allow-producer-auto-approve`.

use std::time::Duration;

use serde_json::{Value, json};
use turnstone_runtime::auth::{AUDIENCE_SERVER, JwtSecret, NewClaims, Permissions, Scopes, mint};

use super::super::cluster::harness::*;

/// A node JWT for `sub` with `scopes` and `permissions`.
fn token(sub: &str, scopes: &str, permissions: &str) -> String {
    let claims = NewClaims::new(sub, Scopes::parse(scopes), "password", AUDIENCE_SERVER)
        .with_permissions(Permissions::parse(permissions));
    mint(&claims, &JwtSecret::new(SECRET), Duration::from_secs(600)).unwrap()
}

#[tokio::test]
async fn auto_approve_over_http_needs_the_approve_scope_and_tools_approve() {
    let node = NodeProc::start("sec-aa-http").await;
    let operator = token("user-op", "write", "read,write,workstreams.create");
    let approver_without_permission = token("user-x", "approve", "read,write,workstreams.create");
    let admin = token(
        "user-admin",
        "approve",
        "approve,tools.approve,workstreams.create",
    );

    for body in [
        json!({"name": "a", "auto_approve": true}),
        json!({"name": "b", "auto_approve_tools": ["bash"]}),
    ] {
        for t in [&operator, &approver_without_permission] {
            let (status, reply) = node
                .post_as(t, "/v1/api/workstreams/new", body.clone())
                .await;
            assert_eq!(status, 403, "{body} → {reply}");
            let error = reply["error"].as_str().unwrap_or_default();
            assert!(
                error.contains("approve") && error.contains("tools.approve"),
                "the refusal says what is missing: {reply}"
            );
        }
    }
    // Without auto-approve the operator may create and send.
    let (status, created) = node
        .post_as(
            &operator,
            "/v1/api/workstreams/new",
            json!({"name": "plain"}),
        )
        .await;
    assert_eq!(status, 200, "{created}");
    let ws = created["ws_id"].as_str().unwrap().to_string();
    for extra in [
        json!({"auto_approve": true}),
        json!({"auto_approve_tools": ["bash"]}),
    ] {
        let mut body = json!({"ws_id": ws, "message": "hi"});
        body.as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        let (status, reply) = node.post_as(&operator, "/v1/api/send", body).await;
        assert_eq!(status, 403, "send {extra} → {reply}");
        assert!(reply["error"].as_str().is_some(), "{reply}");
    }
    // The approve scope with `tools.approve` may.
    let (status, reply) = node
        .post_as(
            &admin,
            "/v1/api/workstreams/new",
            json!({"name": "trusted", "auto_approve": true}),
        )
        .await;
    assert_eq!(status, 200, "{reply}");
}

async fn ack_for(
    s: &mut (impl futures::Stream<Item = redis::Msg> + Unpin),
    correlation_id: &str,
) -> Value {
    next_matching(s, "no ack", |v| {
        v["type"] == "ack" && v["correlation_id"] == correlation_id
    })
    .await
}

#[tokio::test]
async fn a_producers_auto_approve_is_refused_unless_the_bridge_allows_it() {
    let node = NodeProc::start("sec-aa-mq").await;
    let mut mq = Mq::shared("secaa").await;
    let bridge = BridgeProc::start(&node, &mq.url, &mq.prefix).await;
    let ws = mq.create_ws("", json!({"name": "mq"})).await;
    let ps = mq.subscribe(&[&format!("events:{ws}")]).await;
    let mut s = ps.into_on_message();

    mq.push(
        "inbound",
        &json!({"type": "send", "ws_id": ws, "message": "run anything",
                "auto_approve": true, "correlation_id": "secaa0000001"}),
    )
    .await;
    let ack = ack_for(&mut s, "secaa0000001").await;
    assert_eq!(ack["status"], "error", "{ack}");
    assert!(
        ack["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("auto_approve"),
        "{ack}"
    );
    eventually(
        "a dead letter for the refused send",
        Duration::from_secs(10),
        || {
            let mut mq = Mq {
                prefix: mq.prefix.clone(),
                url: mq.url.clone(),
                conn: mq.conn.clone(),
                client: mq.client.clone(),
            };
            async move {
                mq.dead_letters()
                    .await
                    .iter()
                    .any(|d| d["correlation_id"] == "secaa0000001")
            }
        },
    )
    .await;
    let turns = node.turns_by_correlation().await;
    assert!(
        !turns.contains_key("secaa0000001"),
        "no turn ran: {turns:?}"
    );

    // The same bridge configured to relay producers' auto-approve lets it through.
    drop(bridge);
    let _allowing = BridgeProc::start_with(
        &node,
        &mq.url,
        &mq.prefix,
        &["--allow-producer-auto-approve"],
    )
    .await;
    mq.push(
        "inbound",
        &json!({"type": "send", "ws_id": ws, "message": "allowed",
                "auto_approve_tools": ["bash"], "correlation_id": "secaa0000002"}),
    )
    .await;
    let ack = ack_for(&mut s, "secaa0000002").await;
    assert_eq!(ack["status"], "ok", "{ack}");
    mq.cleanup().await;
}

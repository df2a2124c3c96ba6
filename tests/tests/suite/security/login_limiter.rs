//! Item 6: the login limiter reserves an attempt before the password is hashed, so parallel
//! wrong logins are refused with 429 instead of all running bcrypt; and it counts per address
//! and per (address, username), so a stranger elsewhere cannot lock `admin` out.

use std::net::{IpAddr, Ipv4Addr};

use reqwest::Method;
use serde_json::json;

use super::auth_node::{AuthNode, PASSWORD};

#[tokio::test]
async fn thirty_parallel_wrong_logins_are_mostly_refused_and_admin_is_not_locked_out() {
    let node = AuthNode::start().await;
    node.setup_admin().await;
    let attempts = (0..30).map(|_| {
        let http = node.http.clone();
        let url = node.url("/v1/api/auth/login");
        async move {
            http.post(url)
                .json(&json!({"username": "admin", "password": "wrong password"}))
                .send()
                .await
                .unwrap()
                .status()
                .as_u16()
        }
    });
    let statuses = futures::future::join_all(attempts).await;
    let throttled = statuses.iter().filter(|s| **s == 429).count();
    let refused = statuses.iter().filter(|s| **s == 401).count();
    assert_eq!(throttled + refused, 30, "{statuses:?}");
    assert!(
        throttled >= 25,
        "only {throttled} of 30 parallel wrong logins were throttled: {statuses:?}"
    );

    // The same address is throttled for admin, another address is not.
    let (status, _) = node
        .call(
            Method::POST,
            "/v1/api/auth/login",
            None,
            Some(json!({"username": "admin", "password": PASSWORD})),
        )
        .await;
    assert_eq!(status, 429);
    let elsewhere = reqwest::Client::builder()
        .local_address(IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2)))
        .build()
        .unwrap();
    let resp = elsewhere
        .post(node.url("/v1/api/auth/login"))
        .json(&json!({"username": "admin", "password": PASSWORD}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "a stranger locked admin out");
}

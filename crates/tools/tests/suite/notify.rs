//! `notify` against a local webhook receiver: payload, retries, fallback, the per-turn limit.

use std::time::Duration;

use serde_json::{Value, json};
use turnstone_tools::{
    NoOutput, NotifyLimiter, NotifyTarget, NotifyTool, Tool, ToolContext, ToolOutput, WebOptions,
};

use super::web_support::{Hooks, call, hooks};

fn tool(targets: Vec<NotifyTarget>, limiter: &NotifyLimiter) -> NotifyTool {
    NotifyTool::new(&WebOptions {
        enabled: true,
        notify_targets: targets,
        notify_retry_backoff: vec![Duration::from_millis(10), Duration::from_millis(20)],
        notify_limiter: limiter.clone(),
        ..WebOptions::default()
    })
    .unwrap()
}

fn ops(h: &Hooks) -> NotifyTarget {
    NotifyTarget::new("ops", h.url("/hook")).with_header("Authorization", "Bearer s3cret")
}

#[tokio::test]
async fn the_payload_reaches_the_webhook() {
    let h = hooks().await;
    let t = tool(vec![ops(&h)], &NotifyLimiter::default());
    let out = call(
        &t,
        json!({"message": "Build finished", "title": "CI", "channel_type": "discord", "channel_id": "123"}),
        &ToolContext::new("/"),
    )
    .await;
    assert_eq!(out, ToolOutput::ok("Notification sent via 'ops'."));
    let got = h.received();
    assert_eq!(got.len(), 1);
    assert_eq!(
        got[0].body,
        json!({"message": "Build finished", "title": "CI", "channel_type": "discord",
               "channel_id": "123", "source": "turnstone"})
    );
    assert_eq!(got[0].authorization.as_deref(), Some("Bearer s3cret"));
    // The header value never shows in debug output.
    assert!(!format!("{:?}", ops(&h)).contains("s3cret"));
}

#[tokio::test]
async fn failures_are_retried_then_the_next_target_is_tried() {
    let h = hooks().await;
    let ctx = ToolContext::new("/");
    // Two failures, then success: three attempts on one target.
    let t = tool(
        vec![NotifyTarget::new("flaky", h.url("/flaky"))],
        &NotifyLimiter::default(),
    );
    let out = call(&t, json!({"message": "m"}), &ctx).await;
    assert!(!out.is_error, "{}", out.content);
    assert_eq!(h.flaky_attempts(), 3);

    // A target that is down: 1 + 2 retries, then the next target accepts.
    let t = tool(
        vec![NotifyTarget::new("down", h.url("/down")), ops(&h)],
        &NotifyLimiter::default(),
    );
    let out = call(&t, json!({"message": "m"}), &ctx).await;
    assert_eq!(out.content, "Notification sent via 'ops'.");
    assert_eq!(h.count("/down"), 3);

    // An explicit target is the only one tried; a 400 is not retried.
    let t = tool(
        vec![NotifyTarget::new("reject", h.url("/reject")), ops(&h)],
        &NotifyLimiter::default(),
    );
    let out = call(&t, json!({"message": "m", "target": "reject"}), &ctx).await;
    assert!(out.is_error);
    assert!(out.content.contains("reject: HTTP 400"), "{}", out.content);
    assert!(out.content.contains("bad payload"));
    assert_eq!(h.count("/reject"), 1);
    assert_eq!(
        h.count("/hook"),
        1,
        "ops was not tried for an explicit target"
    );
}

/// Prepares all calls first, then executes them (the engine's batch order).
async fn batch(t: &NotifyTool, ctx: &ToolContext, n: usize) -> Vec<ToolOutput> {
    let prepared: Vec<_> = (0..n)
        .map(|i| t.prepare(json!({"message": format!("m{i}")}), ctx).unwrap())
        .collect();
    let mut outs = Vec::new();
    for p in &prepared {
        outs.push(t.execute(p, ctx, &NoOutput).await);
    }
    outs
}

fn sent(outs: &[ToolOutput]) -> usize {
    outs.iter().filter(|o| !o.is_error).count()
}

#[tokio::test]
async fn at_most_five_per_batch_without_turn_signals() {
    let h = hooks().await;
    let limiter = NotifyLimiter::default();
    let t = tool(vec![ops(&h)], &limiter);
    let ctx = ToolContext::new("/");
    let outs = batch(&t, &ctx, 7).await;
    assert_eq!(sent(&outs), 5);
    assert!(
        outs[5]
            .content
            .contains("notification limit reached: 5 of 5"),
        "{}",
        outs[5].content
    );
    assert_eq!(h.count("/hook"), 5);
    // The next batch starts a new count.
    assert_eq!(sent(&batch(&t, &ctx, 2).await), 2);
    // Another workstream has its own count.
    let other = ToolContext::new("/");
    assert_eq!(sent(&batch(&t, &other, 5).await), 5);
    assert_eq!(h.count("/hook"), 12);
}

#[tokio::test]
async fn with_turn_signals_the_limit_is_per_turn() {
    let h = hooks().await;
    let limiter = NotifyLimiter::default();
    let t = tool(vec![ops(&h)], &limiter);
    let ctx = ToolContext::new("/");
    limiter.start_turn(&ctx);
    assert_eq!(sent(&batch(&t, &ctx, 3).await), 3);
    // A second batch in the same turn shares the budget.
    let outs = batch(&t, &ctx, 3).await;
    assert_eq!(sent(&outs), 2);
    assert_eq!(limiter.sent(&ctx), 5);
    limiter.start_turn(&ctx);
    assert_eq!(limiter.sent(&ctx), 0);
    assert_eq!(sent(&batch(&t, &ctx, 1).await), 1);
}

#[tokio::test]
async fn only_successes_count() {
    let h = hooks().await;
    let limiter = NotifyLimiter::default();
    let down = tool(vec![NotifyTarget::new("down", h.url("/down"))], &limiter);
    let ctx = ToolContext::new("/");
    limiter.start_turn(&ctx);
    let outs = batch(&down, &ctx, 6).await;
    assert_eq!(sent(&outs), 0);
    assert!(
        outs.iter().all(|o| o.content.contains("after 3 attempts")),
        "{:?}",
        outs[0]
    );
    assert_eq!(limiter.sent(&ctx), 0);
    let up = tool(vec![ops(&h)], &limiter);
    assert_eq!(sent(&batch(&up, &ctx, 5).await), 5);
}

#[test]
fn bad_arguments_are_refused() {
    let limiter = NotifyLimiter::default();
    let t = tool(
        vec![NotifyTarget::new("ops", "http://127.0.0.1:9/")],
        &limiter,
    );
    let ctx = ToolContext::new("/");
    for (args, expected) in [
        (json!({}), "missing required argument 'message'"),
        (json!({"message": " "}), "must not be empty"),
        (json!({"message": "x".repeat(2001)}), "the limit is 2000"),
        (
            json!({"message": "m", "username": "ann", "channel_id": "1", "channel_type": "discord"}),
            "not both",
        ),
        (
            json!({"message": "m", "channel_type": "discord"}),
            "together",
        ),
        (
            json!({"message": "m", "target": "pager"}),
            "unknown notification target 'pager'; configured targets: ops",
        ),
        (json!({"message": "m", "title": 7}), "must be a string"),
    ] {
        let err = t.prepare(args.clone(), &ctx).unwrap_err();
        assert!(err.contains(expected), "{args}: {err}");
    }
    let none = tool(Vec::new(), &limiter);
    let err = none.prepare(json!({"message": "m"}), &ctx).unwrap_err();
    assert!(
        err.contains("no notification targets are configured"),
        "{err}"
    );
    // Auto-approved, as the seed says; the target names are offered in the schema.
    let p = t
        .prepare(json!({"message": "hello", "title": "T"}), &ctx)
        .unwrap();
    assert!(!p.needs_approval);
    assert_eq!(p.header, "⚙ notify: T: hello");
    assert_eq!(
        t.definition().parameters["properties"]["target"]["enum"],
        json!(["ops"])
    );
    assert_eq!(
        none.definition().parameters["properties"]["target"].get("enum"),
        None::<&Value>
    );
}

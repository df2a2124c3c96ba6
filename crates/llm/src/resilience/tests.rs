//! Breaker state machine and retry behaviour with paused time and an in-test provider.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU32, Ordering};

use async_trait::async_trait;

use super::*;
use crate::types::ModelCapabilities;

/// Answers each call with the next scripted outcome (`Ok` once the script is empty).
#[derive(Default)]
struct Scripted {
    script: Mutex<VecDeque<LlmError>>,
    calls: AtomicU32,
}

impl Scripted {
    fn new(errors: Vec<LlmError>) -> Arc<Self> {
        Arc::new(Self {
            script: Mutex::new(errors.into()),
            calls: AtomicU32::new(0),
        })
    }
    fn calls(&self) -> u32 {
        self.calls.load(Ordering::SeqCst)
    }
    fn next(&self) -> Result<(), LlmError> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        match self.script.lock().pop_front() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

#[async_trait]
impl Provider for Scripted {
    fn name(&self) -> &str {
        "scripted"
    }
    async fn stream(&self, _: &ChatRequest) -> Result<ChatStream, LlmError> {
        self.next()?;
        Ok(Box::pin(futures::stream::empty()))
    }
    async fn complete(&self, _: &ChatRequest) -> Result<Completion, LlmError> {
        self.next()?;
        Ok(Completion {
            content: "done".into(),
            ..Completion::default()
        })
    }
    async fn capabilities(&self, _: &str) -> Result<ModelCapabilities, LlmError> {
        Ok(ModelCapabilities::default())
    }
}

fn server(status: u16) -> LlmError {
    LlmError::Server {
        status,
        retry_after: None,
        body: String::new(),
    }
}

fn resilient(provider: Arc<Scripted>, policy: RetryPolicy) -> Resilient {
    Resilient::new(provider, policy, Arc::new(CircuitBreaker::default()))
}

#[test]
fn policy_delays_and_retry_after_cap() {
    let p = RetryPolicy::default();
    assert_eq!(p.delay_for(1, &server(503)), Duration::from_secs(1));
    assert_eq!(p.delay_for(3, &server(503)), Duration::from_secs(4));
    assert_eq!(p.delay_for(9, &server(503)), Duration::from_secs(4));
    let limited = LlmError::RateLimited {
        retry_after: Some(Duration::from_secs(7)),
        body: String::new(),
    };
    assert_eq!(p.delay_for(1, &limited), Duration::from_secs(7));
    let huge = LlmError::RateLimited {
        retry_after: Some(Duration::from_secs(3600)),
        body: String::new(),
    };
    assert_eq!(p.delay_for(1, &huge), Duration::from_secs(60));
    assert_eq!(
        RetryPolicy::none().delay_for(1, &server(500)),
        Duration::ZERO
    );
}

#[test]
fn metric_values() {
    assert_eq!(BreakerState::Closed.as_metric(), 0);
    assert_eq!(BreakerState::Open.as_metric(), 1);
    assert_eq!(BreakerState::HalfOpen.as_metric(), 2);
}

#[tokio::test(start_paused = true)]
async fn breaker_opens_after_threshold_and_half_opens_after_cooldown() {
    let b = CircuitBreaker::new(3, Duration::from_secs(60));
    for _ in 0..2 {
        b.try_acquire().unwrap().failure();
    }
    assert_eq!(b.state(), BreakerState::Closed);
    assert_eq!(b.consecutive_failures(), 2);
    b.try_acquire().unwrap().failure();
    assert_eq!(b.state(), BreakerState::Open);
    assert!(b.try_acquire().is_none());

    tokio::time::advance(Duration::from_secs(59)).await;
    assert!(b.try_acquire().is_none(), "still cooling down");
    assert_eq!(b.state(), BreakerState::Open);

    tokio::time::advance(Duration::from_secs(1)).await;
    let probe = b.try_acquire().unwrap();
    assert!(probe.is_probe());
    assert_eq!(b.state(), BreakerState::HalfOpen);
    assert!(b.try_acquire().is_none(), "exactly one probe permit");
    probe.success();
    assert_eq!(b.state(), BreakerState::Closed);
    assert_eq!(b.consecutive_failures(), 0);
    assert!(!b.try_acquire().unwrap().is_probe());
}

#[tokio::test(start_paused = true)]
async fn failed_probe_reopens_for_a_full_cooldown() {
    let b = CircuitBreaker::new(1, Duration::from_secs(10));
    b.try_acquire().unwrap().failure();
    tokio::time::advance(Duration::from_secs(10)).await;
    b.try_acquire().unwrap().failure();
    assert_eq!(b.state(), BreakerState::Open);
    tokio::time::advance(Duration::from_secs(9)).await;
    assert!(b.try_acquire().is_none());
    tokio::time::advance(Duration::from_secs(1)).await;
    assert!(b.try_acquire().is_some());
}

#[tokio::test(start_paused = true)]
async fn dropped_probe_frees_the_slot_and_success_resets_the_count() {
    let b = CircuitBreaker::new(2, Duration::from_secs(5));
    b.try_acquire().unwrap().failure();
    b.try_acquire().unwrap().success();
    b.try_acquire().unwrap().failure();
    assert_eq!(
        b.state(),
        BreakerState::Closed,
        "success in between resets the count"
    );
    b.try_acquire().unwrap().failure();
    assert_eq!(b.state(), BreakerState::Open);
    tokio::time::advance(Duration::from_secs(5)).await;
    drop(b.try_acquire().unwrap());
    assert_eq!(b.state(), BreakerState::HalfOpen);
    let probe = b.try_acquire().expect("slot freed by the dropped probe");
    assert!(probe.is_probe());
}

#[tokio::test(start_paused = true)]
async fn retries_two_503s_then_succeeds_with_policy_delays() {
    let provider = Scripted::new(vec![server(503), server(503)]);
    let r = resilient(provider.clone(), RetryPolicy::default());
    let mut notices = Vec::new();
    let start = Instant::now();
    let stream = r
        .stream(&ChatRequest::default(), &mut |n| notices.push(n.clone()))
        .await;
    assert!(stream.is_ok());
    assert_eq!(provider.calls(), 3);
    let seen: Vec<_> = notices
        .iter()
        .map(|n| (n.attempt, n.delay, n.error_class))
        .collect();
    assert_eq!(
        seen,
        vec![
            (1, Duration::from_secs(1), "ServerError"),
            (2, Duration::from_secs(2), "ServerError"),
        ]
    );
    assert!(notices[0].message.contains("503"));
    // Paused clock: exactly the two sleeps elapsed.
    assert_eq!(start.elapsed(), Duration::from_secs(3));
    assert_eq!(r.breaker().state(), BreakerState::Closed);
    assert_eq!(r.breaker().consecutive_failures(), 0);
}

#[tokio::test(start_paused = true)]
async fn retry_after_is_honoured() {
    let limited = LlmError::RateLimited {
        retry_after: Some(Duration::from_secs(9)),
        body: "slow".into(),
    };
    let provider = Scripted::new(vec![limited]);
    let r = resilient(provider.clone(), RetryPolicy::default());
    let mut notices = Vec::new();
    let done = r
        .complete_with_notices(&ChatRequest::default(), &mut |n| notices.push(n.clone()))
        .await;
    assert_eq!(done.unwrap().content, "done");
    assert_eq!(notices.len(), 1);
    assert_eq!(
        (notices[0].delay, notices[0].error_class),
        (Duration::from_secs(9), "RateLimitError")
    );
}

#[tokio::test(start_paused = true)]
async fn client_errors_are_not_retried_and_do_not_trip_the_breaker() {
    let provider = Scripted::new(
        (0..10)
            .map(|_| LlmError::Client {
                status: 400,
                body: "bad".into(),
            })
            .collect(),
    );
    let r = resilient(provider.clone(), RetryPolicy::default());
    for _ in 0..6 {
        let err = r.complete(&ChatRequest::default()).await.unwrap_err();
        assert!(matches!(err, LlmError::Client { status: 400, .. }));
    }
    assert_eq!(provider.calls(), 6);
    assert_eq!(r.breaker().state(), BreakerState::Closed);
    assert_eq!(r.breaker().consecutive_failures(), 0);
}

#[tokio::test(start_paused = true)]
async fn breaker_opens_after_five_failed_calls_then_refuses_immediately() {
    let provider = Scripted::new(
        (0..100)
            .map(|_| LlmError::Connect("refused".into()))
            .collect(),
    );
    let policy = RetryPolicy {
        max_retries: 1,
        ..RetryPolicy::default()
    };
    let r = resilient(provider.clone(), policy);
    let mut retries = 0;
    for call in 1..=5 {
        let err = r
            .stream(&ChatRequest::default(), &mut |_| retries += 1)
            .await
            .err()
            .unwrap();
        assert!(matches!(err, LlmError::Connect(_)));
        assert_eq!(
            r.breaker().consecutive_failures(),
            call,
            "one failure per call, not per attempt"
        );
    }
    assert_eq!(retries, 5);
    assert_eq!(provider.calls(), 10);
    assert_eq!(r.breaker().state(), BreakerState::Open);

    let start = Instant::now();
    let err = r
        .stream(&ChatRequest::default(), &mut |_| retries += 1)
        .await
        .err()
        .unwrap();
    assert!(matches!(err, LlmError::CircuitOpen));
    assert_eq!(
        err.to_string(),
        "Backend unreachable (circuit breaker open)"
    );
    assert_eq!(start.elapsed(), Duration::ZERO);
    assert_eq!(provider.calls(), 10, "refused without calling the backend");

    // After the cooldown one probe goes through; its success closes the breaker.
    provider.script.lock().clear();
    tokio::time::advance(Duration::from_secs(60)).await;
    assert!(r.complete(&ChatRequest::default()).await.is_ok());
    assert_eq!(r.breaker().state(), BreakerState::Closed);
}

#[tokio::test(start_paused = true)]
async fn cancelling_during_a_retry_sleep_releases_the_probe() {
    let provider = Scripted::new((0..100).map(|_| server(500)).collect());
    let r = Resilient::new(
        provider.clone(),
        RetryPolicy::default(),
        Arc::new(CircuitBreaker::new(1, Duration::from_secs(1))),
    );
    r.breaker().record_failure();
    tokio::time::advance(Duration::from_secs(1)).await;
    let req = ChatRequest::default();
    let timed_out = tokio::time::timeout(Duration::from_millis(500), r.complete(&req)).await;
    assert!(timed_out.is_err(), "still sleeping before the first retry");
    assert_eq!(r.breaker().state(), BreakerState::HalfOpen);
    assert!(r.breaker().try_acquire().is_some_and(|p| p.is_probe()));
}

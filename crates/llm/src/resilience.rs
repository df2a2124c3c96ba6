//! Retry before the first byte and the backend circuit breaker.
//!
//! [`Resilient`] wraps any [`Provider`]: it asks the shared [`CircuitBreaker`] for a permit,
//! retries retryable errors ([`LlmError::is_retryable`]) with the [`RetryPolicy`] delays (or
//! the server's `Retry-After`, capped), announces each retry through a callback, and reports
//! one success or one failure per call to the breaker. Errors inside a returned stream are
//! never retried. Cancelling = dropping the future; all waiting is `tokio::time`, so paused
//! test time drives it.

use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::time::Instant;

use crate::error::LlmError;
use crate::provider::Provider;
use crate::types::{ChatRequest, ChatStream, Completion, RetryNotice};

/// How often and how long to wait between attempts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt (3 → up to 4 attempts).
    pub max_retries: u32,
    /// Delay before retry n is `delays[n-1]` (the last one repeats; empty = no wait).
    pub delays: Vec<Duration>,
    /// Upper bound on an honoured `Retry-After`.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self {
            max_retries: 3,
            delays: vec![
                Duration::from_secs(1),
                Duration::from_secs(2),
                Duration::from_secs(4),
            ],
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// No retries at all.
    pub fn none() -> Self {
        Self {
            max_retries: 0,
            delays: Vec::new(),
            max_retry_after: Duration::ZERO,
        }
    }

    /// The wait before retry number `retry` (1-based) after `error`.
    pub fn delay_for(&self, retry: u32, error: &LlmError) -> Duration {
        if let Some(asked) = error.retry_after() {
            return asked.min(self.max_retry_after);
        }
        let at = usize::try_from(retry.saturating_sub(1)).unwrap_or(usize::MAX);
        self.delays
            .get(at)
            .or(self.delays.last())
            .copied()
            .unwrap_or(Duration::ZERO)
    }
}

/// Circuit breaker state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    Closed,
    Open,
    HalfOpen,
}

impl BreakerState {
    /// Value of the `turnstone_circuit_state` gauge: closed 0, open 1, half-open 2.
    pub fn as_metric(self) -> u8 {
        match self {
            Self::Closed => 0,
            Self::Open => 1,
            Self::HalfOpen => 2,
        }
    }
}

#[derive(Debug)]
struct BreakerInner {
    state: BreakerState,
    consecutive_failures: u32,
    opened_at: Option<Instant>,
    /// Generation of the outstanding half-open probe, if one is out.
    probe: Option<u64>,
    next_probe: u64,
}

/// Closed → open after `threshold` consecutive failures → after `cooldown` the next
/// [`try_acquire`](Self::try_acquire) moves it to half-open with exactly one probe permit →
/// success closes it, failure opens it again.
#[derive(Debug)]
pub struct CircuitBreaker {
    threshold: u32,
    cooldown: Duration,
    inner: Mutex<BreakerInner>,
}

impl Default for CircuitBreaker {
    /// Threshold 5, cooldown 60 s.
    fn default() -> Self {
        Self::new(5, Duration::from_secs(60))
    }
}

impl CircuitBreaker {
    /// A closed breaker; a `threshold` of 0 is treated as 1.
    pub fn new(threshold: u32, cooldown: Duration) -> Self {
        Self {
            threshold: threshold.max(1),
            cooldown,
            inner: Mutex::new(BreakerInner {
                state: BreakerState::Closed,
                consecutive_failures: 0,
                opened_at: None,
                probe: None,
                next_probe: 0,
            }),
        }
    }

    /// Current state (does not advance open → half-open; only `try_acquire` does).
    pub fn state(&self) -> BreakerState {
        self.inner.lock().state
    }

    /// Consecutive failures counted since the last success.
    pub fn consecutive_failures(&self) -> u32 {
        self.inner.lock().consecutive_failures
    }

    /// Asks to send one request. `None` = refused (open within cooldown, or half-open with
    /// the probe out). Dropping the permit without reporting releases a probe slot.
    pub fn try_acquire(&self) -> Option<BreakerPermit<'_>> {
        let mut inner = self.inner.lock();
        let probe = match inner.state {
            BreakerState::Closed => None,
            BreakerState::Open => {
                let cooled = inner
                    .opened_at
                    .is_none_or(|at| at.elapsed() >= self.cooldown);
                if !cooled {
                    return None;
                }
                inner.state = BreakerState::HalfOpen;
                Some(Self::take_probe(&mut inner))
            }
            BreakerState::HalfOpen => {
                if inner.probe.is_some() {
                    return None;
                }
                Some(Self::take_probe(&mut inner))
            }
        };
        Some(BreakerPermit {
            breaker: self,
            probe,
            reported: false,
        })
    }

    fn take_probe(inner: &mut BreakerInner) -> u64 {
        let generation = inner.next_probe;
        inner.next_probe += 1;
        inner.probe = Some(generation);
        generation
    }

    /// Records a success: the breaker closes.
    pub fn record_success(&self) {
        let mut inner = self.inner.lock();
        inner.state = BreakerState::Closed;
        inner.consecutive_failures = 0;
        inner.opened_at = None;
        inner.probe = None;
    }

    /// Records a backend failure: opens after `threshold` in a row, re-opens from half-open.
    pub fn record_failure(&self) {
        let mut inner = self.inner.lock();
        inner.consecutive_failures = inner.consecutive_failures.saturating_add(1);
        let open = match inner.state {
            BreakerState::Closed => inner.consecutive_failures >= self.threshold,
            BreakerState::HalfOpen => true,
            BreakerState::Open => false,
        };
        if open {
            inner.state = BreakerState::Open;
            inner.opened_at = Some(Instant::now());
            inner.probe = None;
            tracing::warn!(
                failures = inner.consecutive_failures,
                "circuit breaker opened"
            );
        }
    }

    fn release(&self, probe: Option<u64>) {
        let mut inner = self.inner.lock();
        if probe.is_some() && inner.probe == probe {
            inner.probe = None;
        }
    }
}

/// Permission to send one request; report the outcome with [`success`](Self::success) or
/// [`failure`](Self::failure), or drop it for an outcome that says nothing about the backend.
#[derive(Debug)]
pub struct BreakerPermit<'a> {
    breaker: &'a CircuitBreaker,
    probe: Option<u64>,
    reported: bool,
}

impl BreakerPermit<'_> {
    /// Whether this permit is the single half-open probe.
    pub fn is_probe(&self) -> bool {
        self.probe.is_some()
    }

    pub fn success(mut self) {
        self.reported = true;
        self.breaker.record_success();
    }

    pub fn failure(mut self) {
        self.reported = true;
        self.breaker.record_failure();
    }
}

impl Drop for BreakerPermit<'_> {
    fn drop(&mut self) {
        if !self.reported {
            self.breaker.release(self.probe);
        }
    }
}

/// Whether an error says the backend is unhealthy (vs. the request being at fault).
fn is_backend_failure(error: &LlmError) -> bool {
    error.is_retryable()
}

/// A provider with retry and circuit breaking.
#[derive(Clone)]
pub struct Resilient {
    pub inner: Arc<dyn Provider>,
    pub policy: RetryPolicy,
    pub breaker: Arc<CircuitBreaker>,
}

impl std::fmt::Debug for Resilient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resilient")
            .field("inner", &self.inner.name())
            .field("policy", &self.policy)
            .field("breaker", &self.breaker)
            .finish()
    }
}

impl Resilient {
    pub fn new(
        inner: Arc<dyn Provider>,
        policy: RetryPolicy,
        breaker: Arc<CircuitBreaker>,
    ) -> Self {
        Self {
            inner,
            policy,
            breaker,
        }
    }

    /// The shared breaker (for metrics and the background probe).
    pub fn breaker(&self) -> &Arc<CircuitBreaker> {
        &self.breaker
    }

    /// Starts a streaming completion with retries before the first byte; `on_retry` is called
    /// before each retry sleep.
    pub async fn stream(
        &self,
        req: &ChatRequest,
        on_retry: &mut (dyn FnMut(&RetryNotice) + Send),
    ) -> Result<ChatStream, LlmError> {
        let inner = &self.inner;
        self.run(on_retry, || inner.stream(req)).await
    }

    /// A non-streaming completion with the same policy and breaker.
    pub async fn complete(&self, req: &ChatRequest) -> Result<Completion, LlmError> {
        self.complete_with_notices(req, &mut |_| {}).await
    }

    /// [`complete`](Self::complete) with retry notices.
    pub async fn complete_with_notices(
        &self,
        req: &ChatRequest,
        on_retry: &mut (dyn FnMut(&RetryNotice) + Send),
    ) -> Result<Completion, LlmError> {
        let inner = &self.inner;
        self.run(on_retry, || inner.complete(req)).await
    }

    async fn run<T, F, Fut>(
        &self,
        on_retry: &mut (dyn FnMut(&RetryNotice) + Send),
        mut attempt: F,
    ) -> Result<T, LlmError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, LlmError>>,
    {
        let permit = self.breaker.try_acquire().ok_or(LlmError::CircuitOpen)?;
        let mut retry = 0;
        loop {
            let error = match attempt().await {
                Ok(value) => {
                    permit.success();
                    return Ok(value);
                }
                Err(error) => error,
            };
            if !error.is_retryable() || retry >= self.policy.max_retries {
                if is_backend_failure(&error) {
                    permit.failure();
                }
                // Otherwise the permit is dropped: the request was at fault, not the backend.
                return Err(error);
            }
            retry += 1;
            let delay = self.policy.delay_for(retry, &error);
            tracing::info!(retry, ?delay, class = error.class(), %error, "retrying LLM request");
            on_retry(&RetryNotice {
                attempt: retry,
                delay,
                error_class: error.class(),
                message: error.to_string(),
            });
            tokio::time::sleep(delay).await;
        }
    }
}

#[cfg(test)]
mod tests;

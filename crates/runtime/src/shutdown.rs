//! Graceful shutdown: one token every task watches, a tracker that waits for them, and the
//! OS signals (SIGINT, SIGTERM) that trigger it; [`Drain`], the phases a serving process goes
//! through before it stops (not ready → streams closed), and [`DEFAULT_DRAIN_TIMEOUT`].

use std::future::Future;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The shutdown handle of a service. Clone it into every task that must stop cleanly.
#[derive(Debug, Clone, Default)]
pub struct Shutdown {
    token: CancellationToken,
    tracker: TaskTracker,
}

impl Shutdown {
    pub fn new() -> Self {
        Self::default()
    }

    /// Asks every task to stop.
    pub fn trigger(&self) {
        self.token.cancel();
    }

    pub fn is_triggered(&self) -> bool {
        self.token.is_cancelled()
    }

    /// Resolves once shutdown was triggered.
    pub async fn triggered(&self) {
        self.token.cancelled().await;
    }

    /// The underlying token (for `select!` and child tokens).
    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// Spawns a task the shutdown will wait for.
    pub fn spawn<F>(&self, fut: F) -> tokio::task::JoinHandle<F::Output>
    where
        F: Future + Send + 'static,
        F::Output: Send + 'static,
    {
        self.tracker.spawn(fut)
    }

    /// Triggers shutdown and waits up to `grace` for tracked tasks. Returns `false` if some
    /// were still running when the grace period ended.
    pub async fn drain(&self, grace: Duration) -> bool {
        self.trigger();
        self.tracker.close();
        tokio::time::timeout(grace, self.tracker.wait())
            .await
            .is_ok()
    }

    /// Triggers shutdown on the first SIGINT or SIGTERM. Spawn it once from `main`.
    pub async fn trigger_on_signals(self) {
        wait_for_signal().await;
        tracing::info!("shutdown signal received");
        self.trigger();
    }
}

/// How long turns (node) or messages (bridge) in flight may take to finish after SIGTERM
/// before they are cancelled or handed back (`--drain-timeout`, `TURNSTONE_DRAIN_TIMEOUT`).
pub const DEFAULT_DRAIN_TIMEOUT: Duration = Duration::from_secs(25);

/// What a client is told to wait before it retries work refused while draining
/// (`Retry-After`, seconds).
pub const DRAIN_RETRY_AFTER_SECS: u64 = 5;

/// The drain of a serving process, in two phases that only move forward:
///
/// 1. [`begin`](Self::begin): readiness is false (`GET /ready` answers 503) and new work is
///    refused with 503 + `Retry-After`; work in flight goes on, event streams stay open so
///    their clients see it end;
/// 2. [`close_streams`](Self::close_streams): every open event stream sends its final event
///    and ends, so clients reconnect (elsewhere, or here after the restart) with
///    `Last-Event-ID`.
#[derive(Debug, Clone, Default)]
pub struct Drain {
    started: CancellationToken,
    streams_closed: CancellationToken,
}

impl Drain {
    pub fn new() -> Self {
        Self::default()
    }

    /// Phase 1: not ready, no new work.
    pub fn begin(&self) {
        self.started.cancel();
    }

    pub fn is_draining(&self) -> bool {
        self.started.is_cancelled()
    }

    /// Resolves once the drain began.
    pub async fn began(&self) {
        self.started.cancelled().await;
    }

    /// Phase 2: open event streams end (implies phase 1).
    pub fn close_streams(&self) {
        self.started.cancel();
        self.streams_closed.cancel();
    }

    pub fn streams_are_closed(&self) -> bool {
        self.streams_closed.is_cancelled()
    }

    /// Resolves once event streams must end.
    pub async fn streams_closing(&self) {
        self.streams_closed.cancelled().await;
    }

    /// A token cancelled when the drain begins (for what waits on it without a borrow).
    pub fn began_token(&self) -> CancellationToken {
        self.started.clone()
    }

    /// A token cancelled when event streams must end.
    pub fn streams_closing_token(&self) -> CancellationToken {
        self.streams_closed.clone()
    }
}

/// Resolves on the first SIGINT or SIGTERM.
pub async fn signal_received() {
    wait_for_signal().await;
    tracing::info!("shutdown signal received; draining");
}

async fn wait_for_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut term) => {
                tokio::select! {
                    _ = tokio::signal::ctrl_c() => {}
                    _ = term.recv() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    #[tokio::test]
    async fn drain_waits_for_tracked_tasks_that_watch_the_token() {
        let shutdown = Shutdown::new();
        let finished = Arc::new(AtomicBool::new(false));
        let (s, f) = (shutdown.clone(), finished.clone());
        shutdown.spawn(async move {
            s.triggered().await;
            tokio::task::yield_now().await;
            f.store(true, Ordering::SeqCst);
        });
        assert!(!shutdown.is_triggered());
        assert!(shutdown.drain(Duration::from_secs(5)).await);
        assert!(finished.load(Ordering::SeqCst));
    }

    #[tokio::test]
    async fn drain_phases_only_move_forward() {
        let drain = Drain::new();
        assert!(!drain.is_draining() && !drain.streams_are_closed());
        drain.begin();
        assert!(drain.is_draining() && !drain.streams_are_closed());
        drain.began().await;
        let other = drain.clone();
        other.close_streams();
        drain.streams_closing().await;
        assert!(drain.is_draining() && drain.streams_are_closed());
    }

    #[tokio::test(start_paused = true)]
    async fn drain_reports_a_task_that_ignores_shutdown() {
        let shutdown = Shutdown::new();
        shutdown.spawn(tokio::time::sleep(Duration::from_secs(3600)));
        assert!(!shutdown.drain(Duration::from_secs(1)).await);
    }
}

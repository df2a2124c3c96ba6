//! Graceful shutdown: one token every task watches, a tracker that waits for them, and the
//! OS signals (SIGINT, SIGTERM) that trigger it.

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

    #[tokio::test(start_paused = true)]
    async fn drain_reports_a_task_that_ignores_shutdown() {
        let shutdown = Shutdown::new();
        shutdown.spawn(tokio::time::sleep(Duration::from_secs(3600)));
        assert!(!shutdown.drain(Duration::from_secs(1)).await);
    }
}

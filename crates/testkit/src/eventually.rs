//! Polling assertions: wait for a condition instead of sleeping a fixed time.

use std::future::Future;
use std::time::Duration;

/// Default deadline of [`assert_eventually!`](crate::assert_eventually) and [`eventually`].
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// Pause between two polls.
pub const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// Polls `condition` every [`POLL_INTERVAL`] until it returns `true` (→ `true`) or `timeout`
/// passed (→ `false`). The condition is always evaluated at least once.
pub async fn eventually<F, Fut>(timeout: Duration, mut condition: F) -> bool
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if condition().await {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Polls a boolean expression every 20 ms until it holds, panicking with the message when it
/// still does not after 10 s (or the given `timeout = <Duration>`). Use inside async code; the
/// expression may contain `.await`.
///
/// ```no_run
/// # async fn demo(counter: std::sync::Arc<std::sync::atomic::AtomicUsize>) {
/// use std::sync::atomic::Ordering;
/// use std::time::Duration;
/// turnstone_testkit::assert_eventually!(counter.load(Ordering::SeqCst) == 3, "counter never reached 3");
/// turnstone_testkit::assert_eventually!(
///     counter.load(Ordering::SeqCst) > 0,
///     timeout = Duration::from_secs(1),
///     "counter is {}", counter.load(Ordering::SeqCst)
/// );
/// # }
/// ```
#[macro_export]
macro_rules! assert_eventually {
    ($cond:expr, timeout = $timeout:expr, $($msg:tt)+) => {{
        let __deadline = $crate::__private::tokio::time::Instant::now() + $timeout;
        loop {
            if $cond {
                break;
            }
            if $crate::__private::tokio::time::Instant::now() >= __deadline {
                panic!(
                    "assert_eventually!({}) timed out after {:?}: {}",
                    stringify!($cond),
                    $timeout,
                    format_args!($($msg)+)
                );
            }
            $crate::__private::tokio::time::sleep($crate::eventually::POLL_INTERVAL).await;
        }
    }};
    ($cond:expr, $($msg:tt)+) => {
        $crate::assert_eventually!($cond, timeout = $crate::eventually::DEFAULT_TIMEOUT, $($msg)+)
    };
    ($cond:expr $(,)?) => {
        $crate::assert_eventually!($cond, timeout = $crate::eventually::DEFAULT_TIMEOUT, "condition never held")
    };
}

//! The "thinking" spinner: a small task drawing frames on stderr, erased before anything
//! else is printed. Frames are drawn under a lock that [`Spinner::stop`] also takes, so a
//! frame can never land after the erase.

use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use parking_lot::Mutex;
use tokio::task::JoinHandle;

const FRAMES: [&str; 10] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧", "⠇", "⠏"];
const ERASE: &str = "\r\x1b[2K";

/// A stderr spinner; does nothing when disabled (stderr not a terminal, or pipe mode).
#[derive(Debug)]
pub struct Spinner {
    enabled: bool,
    active: Arc<Mutex<bool>>,
    task: Option<JoinHandle<()>>,
}

impl Spinner {
    pub fn new(enabled: bool) -> Self {
        Self {
            enabled,
            active: Arc::new(Mutex::new(false)),
            task: None,
        }
    }

    pub fn is_running(&self) -> bool {
        self.task.is_some()
    }

    /// Starts drawing `label` with a spinning frame (no-op when already running).
    pub fn start(&mut self, label: &str) {
        if !self.enabled || self.task.is_some() {
            return;
        }
        *self.active.lock() = true;
        let active = self.active.clone();
        let label = label.to_string();
        self.task = Some(tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            for frame in FRAMES.iter().cycle() {
                tick.tick().await;
                let active = active.lock();
                if !*active {
                    break;
                }
                let mut err = std::io::stderr().lock();
                let _ = write!(err, "{ERASE}{frame} {label}");
                let _ = err.flush();
            }
        }));
    }

    /// Stops and erases the spinner line (no-op when not running).
    pub fn stop(&mut self) {
        let Some(task) = self.task.take() else {
            return;
        };
        let mut active = self.active.lock();
        *active = false;
        task.abort();
        let mut err = std::io::stderr().lock();
        let _ = write!(err, "{ERASE}");
        let _ = err.flush();
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.stop();
    }
}

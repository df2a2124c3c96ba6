//! The workstream's actor: one tokio task per workstream, the one writer of its turn state.
//! It takes commands from its inbox in order — start a turn, start a compaction, cancel —
//! and drives the running job (a turn or a compaction) in the same task, so a cancel is
//! handled between two steps of the turn, never beside one. A turn or compaction that
//! arrives while the previous job finishes its tail waits its turn here, and so does a cancel
//! behind it (it is meant for that job).

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use futures::FutureExt;
use futures::future::BoxFuture;
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use crate::engine::Engine;
use crate::event::Event;
use crate::shared::Shared;

/// What the handle asks of the actor.
pub(crate) enum Command {
    /// Run a turn (the handle has set `busy`).
    Send {
        text: String,
        correlation_id: String,
        /// The sender's span: the turn's parent, so the turn joins the sender's trace.
        caller: tracing::Span,
    },
    /// `/compact` (see `compact.rs`; the handle has set `busy`).
    Compact,
    /// Stop the running job (see [`cancel`]).
    Cancel,
}

/// The running turn or compaction.
struct Job {
    token: CancellationToken,
    run: BoxFuture<'static, ()>,
}

pub(crate) async fn run(
    engine: Arc<Engine>,
    shared: Arc<Shared>,
    mut inbox: mpsc::Receiver<Command>,
) {
    let mut job: Option<Job> = None;
    // Commands that arrived while a job ran (in order).
    let mut waiting: VecDeque<Command> = VecDeque::new();
    let mut closing = false;
    loop {
        // Queued commands in order: a cancel applies to the job started before it.
        while let Some(front) = waiting.front() {
            if !matches!(front, Command::Cancel) && job.is_some() {
                break;
            }
            match waiting.pop_front() {
                Some(Command::Cancel) => cancel(&shared, job.as_ref()),
                Some(cmd) => job = start(&engine, &shared, cmd),
                None => break,
            }
        }
        if closing && job.is_none() {
            break;
        }
        tokio::select! {
            biased;
            _ = shared.closed.cancelled(), if !closing => {
                // Closed: nothing new starts; a running turn is cancelled and finishes.
                closing = true;
                waiting.clear();
                cancel(&shared, job.as_ref());
            }
            () = async {
                match job.as_mut() {
                    Some(j) => (&mut j.run).await,
                    None => std::future::pending().await,
                }
            }, if job.is_some() => job = None,
            cmd = inbox.recv(), if !closing => match cmd {
                None => closing = true,
                Some(cmd) if job.is_some() || !waiting.is_empty() => match cmd {
                    // For the running job, unless a queued one comes first.
                    Command::Cancel if waiting.is_empty() => {
                        cancel(&shared, job.as_ref());
                    }
                    cmd => waiting.push_back(cmd),
                },
                Some(cmd) => job = start(&engine, &shared, cmd),
            },
        }
    }
}

/// Starts the job `cmd` asks for (a cancel with nothing running only reports it).
fn start(engine: &Arc<Engine>, shared: &Arc<Shared>, cmd: Command) -> Option<Job> {
    match cmd {
        Command::Send {
            text,
            correlation_id,
            caller,
        } => Some(start_turn(engine, shared, text, correlation_id, caller)),
        Command::Compact => Some(start_compact(engine, shared)),
        Command::Cancel => {
            cancel(shared, None);
            None
        }
    }
}

fn start_turn(
    engine: &Arc<Engine>,
    shared: &Arc<Shared>,
    text: String,
    correlation_id: String,
    caller: tracing::Span,
) -> Job {
    // A child of the sender's span when there is one (its trace continues), else of this
    // workstream's.
    let parent = if caller.is_none() {
        tracing::Span::current()
    } else {
        caller
    };
    let span = tracing::info_span!(parent: &parent, "turn", ws_id = %shared.id, %correlation_id);
    drop(parent);
    shared.publish(|v| {
        v.turn_count += 1;
        v.tool_calls_this_turn = 0;
    });
    let token = CancellationToken::new();
    let (engine, shared, turn_token) = (engine.clone(), shared.clone(), token.clone());
    let run = async move {
        crate::turn::run(&engine, &shared, text, correlation_id, turn_token)
            .instrument(span)
            .await;
        // The turn cleared `busy` before `turn_complete`; a send may already have claimed
        // the next turn (it waits in the actor until this tail is done).
        shared.persist_loaded_tools();
        crate::title::after_turn(&engine, &shared);
    }
    .boxed();
    Job { token, run }
}

fn start_compact(engine: &Arc<Engine>, shared: &Arc<Shared>) -> Job {
    let token = CancellationToken::new();
    let (engine, shared, compact_token) = (engine.clone(), shared.clone(), token.clone());
    let run = async move {
        let span = tracing::info_span!("compact");
        crate::compact::run(
            &engine,
            &shared,
            crate::compact::Mode::Manual,
            &compact_token,
        )
        .instrument(span)
        .await;
        shared.busy.store(false, Ordering::Release);
    }
    .boxed();
    Job { token, run }
}

/// Cancels the running job, in whatever phase it is: a pending approval is resolved as
/// denied (`Cancelled by user`), a pending plan review as rejected, `cancelled` is emitted,
/// then the job's token stops it. Nothing when no turn is claimed any more (it ended
/// between the client's cancel and this).
fn cancel(shared: &Shared, running: Option<&Job>) {
    if !shared.busy.load(Ordering::Acquire) {
        return;
    }
    // Every pending round: the turn's own, or those of its sub-agents.
    for (_, verdict) in shared.approvals.decide_all(crate::turn::cancel_verdict) {
        shared.approval_resolved(&verdict);
        // Dropping the pending reply wakes the waiting turn, which sees the token.
    }
    crate::review::cancel_pending(shared);
    shared.emit(Event::Cancelled);
    if let Some(job) = running {
        job.token.cancel();
    }
}

//! The client loop: one task that reacts to input lines, Ctrl-C presses and the events of
//! every workstream (each forwarded by a small task into one bounded channel), so nothing
//! ever blocks the runtime and a background workstream can ask for attention at any time.
//!
//! Interactive mode (stdin is a terminal) shows a `> ` prompt when the current workstream is
//! idle, an approval prompt when it waits for one, and accepts slash commands at any time.
//! Pipe mode reads the next line only after the previous turn completed, answers approvals
//! itself (approve with `--skip-permissions`, else deny with feedback `non-interactive`)
//! and ends at end of input.

use std::collections::{HashMap, HashSet};
use std::io::{BufRead, Write};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use turnstone_engine::{
    ApproveOutcome, CreateOptions, Envelope, Event, Item, Manager, RoundRef, SendOutcome, ToolItem,
    WorkstreamHandle, WsState,
};

use crate::commands::{self, Command};
use crate::render::{MarkdownRenderer, Style, ToolOutput};
use crate::spinner::Spinner;
use turnstone_node::NodeError;
use turnstone_node::persist::Persistence;

/// A second Ctrl-C within this window exits.
pub const DOUBLE_CTRL_C: Duration = Duration::from_secs(2);

/// Lines of an approval preview shown before eliding the rest.
const PREVIEW_LINES: usize = 20;

/// Events buffered between the workstreams and the loop.
const EVENT_BUFFER: usize = 1024;

/// The text shown while waiting for an approval answer.
pub const APPROVAL_PROMPT: &str = "Approve? [y]es / [n]o / [a]lways (feedback may follow): ";

/// How the client talks to its user.
#[derive(Debug, Clone)]
pub struct ReplOptions {
    /// stdin is a terminal: prompts, approval questions, spinner.
    pub interactive: bool,
    /// stdout is a terminal (a shown prompt can be erased in place).
    pub stdout_tty: bool,
    /// ANSI styling of stdout.
    pub style: Style,
    /// Draw the thinking spinner on stderr.
    pub spinner: bool,
    /// Shown by `/model`.
    pub model: String,
    /// Shown by `/model`.
    pub endpoint: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    Exit,
}

/// The terminal client over one [`Manager`].
pub struct Repl<W: Write> {
    manager: Arc<Manager>,
    persistence: Option<Arc<Persistence>>,
    opts: ReplOptions,
    out: W,
    /// Workstreams in display order (`/ws <n>` is 1-based into this).
    list: Vec<WorkstreamHandle>,
    current: usize,
    forwarders: HashMap<String, JoinHandle<()>>,
    events_tx: mpsc::Sender<(String, Item)>,
    events_rx: mpsc::Receiver<(String, Item)>,
    /// Workstreams with a turn in progress (from `send` until `turn_complete`).
    running: HashSet<String>,
    /// The workstream and the approval round (`cycle_id`) whose question is on screen.
    /// Several rounds may wait on one workstream (parallel sub-agents asking through it):
    /// one question at a time, the next one asked when this one is resolved.
    awaiting_approval: Option<(String, String)>,
    renderer: MarkdownRenderer,
    reasoning_mid_line: bool,
    tool_out: ToolOutput,
    spinner: Spinner,
    /// The prompt text currently displayed (no newline after it yet).
    shown_prompt: Option<&'static str>,
    last_ctrl_c: Option<Instant>,
}

impl<W: Write> std::fmt::Debug for Repl<W> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Repl")
            .field("workstreams", &self.list.len())
            .field("current", &self.current)
            .finish()
    }
}

impl<W: Write> Repl<W> {
    /// Creates the first workstream.
    /// Saves and resumes sessions through `persistence` (its journal must be on the
    /// manager given to [`Repl::new`]).
    pub fn with_persistence(mut self, persistence: Arc<Persistence>) -> Self {
        self.persistence = Some(persistence);
        self
    }

    /// `/resume <alias|id|prefix>`: the saved conversation opens as a new workstream under
    /// its stored id (so it keeps accruing there) and becomes the current one.
    async fn resume(&mut self, target: &str) -> Result<(), NodeError> {
        let Some(p) = self.persistence.clone() else {
            return self.info("Sessions are not saved in this run: nothing to resume.");
        };
        let session = match p.store.resume_session(target).await {
            Ok(s) => s,
            Err(e) => return self.info(&format!("Cannot resume {target:?}: {e}")),
        };
        let ws_id = session.workstream.ws_id.clone();
        if let Some(idx) = self.list.iter().position(|w| w.id() == ws_id) {
            return self.switch_to(idx);
        }
        let count = session.messages.len();
        let name = session
            .workstream
            .alias
            .clone()
            .unwrap_or(session.workstream.name.clone());
        let handle = self.create_with(CreateOptions {
            id: Some(ws_id),
            name: Some(name),
            history: session.messages,
            ..CreateOptions::default()
        })?;
        self.list.push(handle);
        let idx = self.list.len() - 1;
        self.info(&format!("Resumed {target} ({count} messages)."))?;
        self.switch_to(idx)
    }

    pub fn new(
        manager: impl Into<Arc<Manager>>,
        opts: ReplOptions,
        out: W,
    ) -> Result<Self, NodeError> {
        let (events_tx, events_rx) = mpsc::channel(EVENT_BUFFER);
        let mut repl = Self {
            manager: manager.into(),
            renderer: MarkdownRenderer::new(opts.style),
            tool_out: ToolOutput::new(opts.style),
            spinner: Spinner::new(opts.spinner),
            opts,
            out,
            list: Vec::new(),
            current: 0,
            forwarders: HashMap::new(),
            events_tx,
            events_rx,
            running: HashSet::new(),
            awaiting_approval: None,
            reasoning_mid_line: false,
            shown_prompt: None,
            last_ctrl_c: None,
            persistence: None,
        };
        let first = repl.create_workstream(None)?;
        repl.list.push(first);
        Ok(repl)
    }

    /// Runs until `/exit`, end of input or a double Ctrl-C.
    pub async fn run(
        &mut self,
        mut lines: mpsc::Receiver<String>,
        mut ctrl_c: mpsc::Receiver<()>,
    ) -> Result<(), NodeError> {
        if self.opts.interactive {
            let banner = format!(
                "Turnstone \u{2014} model {}. Type /help for commands.",
                self.opts.model
            );
            let banner = self.opts.style.dim(&banner);
            self.line(&banner)?;
        }
        let mut ctrl_c_open = true;
        loop {
            self.refresh_prompt()?;
            let want_input = self.opts.interactive || !self.is_running(self.current_id());
            tokio::select! {
                biased;
                press = ctrl_c.recv(), if ctrl_c_open => match press {
                    Some(()) => if self.on_ctrl_c()? == Flow::Exit { break },
                    None => ctrl_c_open = false,
                },
                Some((ws_id, item)) = self.events_rx.recv() => self.on_event(&ws_id, item)?,
                line = lines.recv(), if want_input => match line {
                    Some(line) => if self.on_line(&line).await? == Flow::Exit { break },
                    None => break,
                },
            }
        }
        self.spinner.stop();
        self.flush_text()?;
        if self.shown_prompt.take().is_some() {
            self.write_raw("\n")?;
        }
        for (_, task) in self.forwarders.drain() {
            task.abort();
        }
        Ok(())
    }

    fn current(&self) -> &WorkstreamHandle {
        &self.list[self.current.min(self.list.len().saturating_sub(1))]
    }

    fn current_id(&self) -> &str {
        self.current().id()
    }

    fn is_running(&self, ws_id: &str) -> bool {
        self.running.contains(ws_id)
    }

    fn position(&self, ws_id: &str) -> Option<usize> {
        self.list.iter().position(|h| h.id() == ws_id)
    }

    // ---- output ------------------------------------------------------------------------

    /// Writes text, first moving off a displayed prompt.
    fn write_raw(&mut self, text: &str) -> Result<(), NodeError> {
        if text.is_empty() {
            return Ok(());
        }
        if self.shown_prompt.take().is_some() {
            let off = if self.opts.stdout_tty {
                "\r\x1b[2K"
            } else {
                "\n"
            };
            self.out.write_all(off.as_bytes())?;
        }
        self.out.write_all(text.as_bytes())?;
        self.out.flush()?;
        Ok(())
    }

    /// Writes one line (after ending any streamed text).
    fn line(&mut self, text: &str) -> Result<(), NodeError> {
        self.flush_text()?;
        self.write_raw(&format!("{text}\n"))
    }

    fn info(&mut self, text: &str) -> Result<(), NodeError> {
        let text = self.opts.style.dim(text);
        self.line(&text)
    }

    /// Ends streamed text: the spinner, a reasoning line, a held markdown line, tool output.
    fn flush_text(&mut self) -> Result<(), NodeError> {
        self.spinner.stop();
        if self.reasoning_mid_line {
            self.reasoning_mid_line = false;
            self.write_raw("\n")?;
        }
        let rest = self.renderer.finish();
        self.write_raw(&rest)?;
        let rest = self.tool_out.finish();
        self.write_raw(&rest)
    }

    /// Shows the prompt that is due, if it is not on screen already.
    fn refresh_prompt(&mut self) -> Result<(), NodeError> {
        if !self.opts.interactive || self.spinner.is_running() {
            return Ok(());
        }
        let due = if self.awaits_on(self.current_id()) {
            Some(APPROVAL_PROMPT)
        } else if !self.is_running(self.current_id()) {
            Some("> ")
        } else {
            None
        };
        if let Some(prompt) = due
            && self.shown_prompt != Some(prompt)
        {
            self.write_raw(prompt)?;
            self.shown_prompt = Some(prompt);
        }
        Ok(())
    }

    fn show_items(&mut self, items: &[ToolItem], with_preview: bool) -> Result<(), NodeError> {
        let style = self.opts.style;
        for item in items {
            self.line(&style.bold(&item.header))?;
            if let Some(error) = &item.error {
                self.line(&style.red(&format!("    {error}")))?;
                continue;
            }
            if with_preview && !item.preview.is_empty() && item.preview != item.header {
                let lines: Vec<&str> = item.preview.lines().collect();
                for l in lines.iter().take(PREVIEW_LINES) {
                    self.line(&style.dim(&format!("    {l}")))?;
                }
                if lines.len() > PREVIEW_LINES {
                    let more = format!("    \u{2026} ({} more lines)", lines.len() - PREVIEW_LINES);
                    self.line(&style.dim(&more))?;
                }
            }
        }
        Ok(())
    }

    // ---- workstreams -------------------------------------------------------------------

    /// Creates a workstream and starts forwarding its events (not yet in `list`).
    fn create_workstream(&mut self, name: Option<String>) -> Result<WorkstreamHandle, NodeError> {
        self.create_with(CreateOptions {
            name,
            ..CreateOptions::default()
        })
    }

    fn create_with(&mut self, options: CreateOptions) -> Result<WorkstreamHandle, NodeError> {
        let (handle, evicted) = self.manager.create(options)?;
        let mut sub = handle.subscribe(None);
        let tx = self.events_tx.clone();
        let id = handle.id().to_string();
        let task = tokio::spawn({
            let id = id.clone();
            async move {
                while let Some(item) = sub.next().await {
                    if tx.send((id.clone(), item)).await.is_err() {
                        break;
                    }
                }
            }
        });
        self.forwarders.insert(id, task);
        if let Some(closed) = evicted {
            self.forget(&closed.ws_id);
            self.info(&format!("[{} was closed to make room]", closed.name))?;
        }
        Ok(handle)
    }

    /// Drops a workstream the manager no longer has.
    fn forget(&mut self, ws_id: &str) {
        if let Some(task) = self.forwarders.remove(ws_id) {
            task.abort();
        }
        self.running.remove(ws_id);
        if self.awaits_on(ws_id) {
            self.awaiting_approval = None;
        }
        if let Some(idx) = self.position(ws_id) {
            self.list.remove(idx);
            if idx < self.current || self.current >= self.list.len() {
                self.current = self.current.saturating_sub(1);
            }
        }
    }

    fn describe(&self, idx: usize) -> String {
        let h = &self.list[idx];
        format!("workstream {}: {}", idx + 1, h.name())
    }

    /// Makes `idx` current, re-showing a pending approval question.
    fn switch_to(&mut self, idx: usize) -> Result<(), NodeError> {
        self.flush_text()?;
        self.awaiting_approval = None;
        self.current = idx;
        let state = state_label(self.current());
        self.info(&format!("Switched to {} ({state})", self.describe(idx)))?;
        if let Some(env) = self.current().pending_approval() {
            self.on_approve_request(&env)?;
        } else if self.current().state() == WsState::Thinking {
            self.spinner.start("thinking\u{2026}");
        }
        Ok(())
    }

    // ---- input -------------------------------------------------------------------------

    async fn on_line(&mut self, line: &str) -> Result<Flow, NodeError> {
        // The user's Enter moved the cursor past any prompt.
        self.shown_prompt = None;
        if let Some(command) = commands::parse(line) {
            return self.on_command(command).await;
        }
        let current = self.current().clone();
        if let Some((ws_id, cycle_id)) = self.awaiting_approval.clone()
            && ws_id == current.id()
        {
            let Some(answer) = commands::parse_answer(line) else {
                return Ok(Flow::Continue);
            };
            self.awaiting_approval = None;
            let outcome = current.approve_round(
                RoundRef::Cycle(&cycle_id),
                answer.approved,
                answer.feedback,
                answer.always,
            );
            if let ApproveOutcome::NotPending(_) = outcome {
                self.info("[that approval was already decided]")?;
            }
            // Another round of this workstream may wait (a parallel sub-agent).
            if let Some(next) = current.pending_approval() {
                self.on_approve_request(&next)?;
            }
            return Ok(Flow::Continue);
        }
        let prompt = line.trim();
        if prompt.is_empty() {
            return Ok(Flow::Continue);
        }
        if self.is_running(current.id()) {
            let msg = self.opts.style.yellow(
                "[busy: a turn is running \u{2014} wait for it, or press Ctrl-C to cancel]",
            );
            self.line(&msg)?;
            return Ok(Flow::Continue);
        }
        match current.send(prompt, None) {
            SendOutcome::Started { .. } => {
                self.running.insert(current.id().to_string());
            }
            // The workstream emitted a busy_error, shown when it arrives.
            SendOutcome::Busy => {}
            SendOutcome::Closed => self.info("[this workstream is closed; /ws new starts one]")?,
        }
        Ok(Flow::Continue)
    }

    async fn on_command(&mut self, command: Command) -> Result<Flow, NodeError> {
        match command {
            Command::Exit => return Ok(Flow::Exit),
            Command::Help => self.line(commands::HELP)?,
            Command::Usage(usage) => self.info(usage)?,
            Command::Unknown(word) => self.info(&format!(
                "Unknown command: {word}. Type /help for available commands."
            ))?,
            Command::WsList => {
                let mut lines = Vec::new();
                for (idx, h) in self.list.iter().enumerate() {
                    let marker = if idx == self.current { '*' } else { ' ' };
                    let short: String = h.id().chars().take(8).collect();
                    lines.push(format!(
                        "{marker} {}. {}  {}  {short}",
                        idx + 1,
                        h.name(),
                        state_label(h)
                    ));
                }
                self.line(&lines.join("\n"))?;
            }
            Command::WsNew(name) => {
                let handle = self.create_workstream(name)?;
                self.list.push(handle);
                let idx = self.list.len() - 1;
                self.flush_text()?;
                self.awaiting_approval = None;
                self.current = idx;
                self.info(&format!("Created {} (now current)", self.describe(idx)))?;
            }
            Command::WsSwitch(n) => {
                if n > self.list.len() {
                    self.info(&format!(
                        "No workstream {n}: there are {}. /ws list shows them.",
                        self.list.len()
                    ))?;
                } else {
                    self.switch_to(n - 1)?;
                }
            }
            Command::WsClose => {
                let id = self.current_id().to_string();
                let name = self.current().name();
                match self.manager.close(&id) {
                    Ok(()) => {
                        self.flush_text()?;
                        self.forget(&id);
                        let now = self.describe(self.current);
                        self.info(&format!("Closed {name}; now on {now}"))?;
                        if let Some(env) = self.current().pending_approval() {
                            self.on_approve_request(&env)?;
                        }
                    }
                    Err(e) => self.info(&e.to_string())?,
                }
            }
            Command::WsRename(name) | Command::Name(name) => {
                self.current().set_name(name.clone());
                if let Some(p) = self.persistence.clone()
                    && let Err(e) = p.save_alias(self.current().id(), &name).await
                {
                    self.info(&format!("The name was not saved: {e}"))?;
                }
                self.info(&format!(
                    "Workstream {} is now named {name}",
                    self.current + 1
                ))?;
            }
            Command::Resume(target) => self.resume(&target).await?,
            Command::Clear => {
                if self.current().replace_history(Vec::new()) {
                    self.info("Conversation context cleared.")?;
                } else {
                    self.info("Cannot clear while a turn is running (Ctrl-C cancels it).")?;
                }
            }
            Command::Compact => match self.current().compact() {
                // The workstream reports progress and the outcome as info/error events.
                SendOutcome::Started { .. } | SendOutcome::Busy => {}
                SendOutcome::Closed => {
                    self.info("[this workstream is closed; /ws new starts one]")?
                }
            },
            Command::New => {
                let old = self.current().clone();
                let fresh = self.create_workstream(None)?;
                let idx = self.position(old.id()).unwrap_or(self.current);
                self.flush_text()?;
                self.list.insert(idx, fresh);
                self.current = idx;
                // The old one is closed (cancelling its turn, if any) and forgotten.
                let _ = self.manager.close(old.id());
                self.forget(old.id());
                self.current = idx.min(self.list.len() - 1);
                self.info(&format!("Started a fresh {}", self.describe(self.current)))?;
            }
            Command::Model(None) => {
                let (model, alias) = self.current().model();
                let aliases = self.manager.engine().model_aliases();
                let text = if aliases.is_empty() {
                    format!("Model: {model} (endpoint {})", self.opts.endpoint)
                } else {
                    format!(
                        "Model: {model} (alias {}). Aliases: {}. Switch with /model <alias>.",
                        if alias.is_empty() { "-" } else { &alias },
                        aliases.join(", ")
                    )
                };
                self.info(&text)?
            }
            Command::Tools => {
                let text = match self.current().prepared_tools() {
                    None => "No model request yet in this workstream.".to_string(),
                    Some(p) => describe_tools(&p),
                };
                self.info(&text)?
            }
            // The workstream's next request uses the alias (the node's `/model`); the
            // engine's answer says what is in use or why not.
            Command::Model(Some(alias)) => {
                let text = match self.current().select_model(&alias).await {
                    Ok((model, alias)) => format!("Model switched to {alias} ({model})."),
                    Err(e) => e.to_string(),
                };
                self.info(&text)?
            }
        }
        Ok(Flow::Continue)
    }

    fn on_ctrl_c(&mut self) -> Result<Flow, NodeError> {
        let now = Instant::now();
        if let Some(prev) = self.last_ctrl_c
            && now.duration_since(prev) <= DOUBLE_CTRL_C
        {
            return Ok(Flow::Exit);
        }
        self.last_ctrl_c = Some(now);
        self.shown_prompt = None;
        if self.current().cancel() {
            self.awaiting_approval = None;
            self.write_raw("\n")?;
            self.info("[cancelling \u{2014} press Ctrl-C again to exit]")?;
            Ok(Flow::Continue)
        } else {
            Ok(Flow::Exit)
        }
    }

    // ---- events ------------------------------------------------------------------------

    fn on_event(&mut self, ws_id: &str, item: Item) -> Result<(), NodeError> {
        let Some(idx) = self.position(ws_id) else {
            return Ok(()); // a closed workstream's last words
        };
        let Item::Event(env) = item else {
            if idx == self.current {
                self.info("[some events were dropped]")?;
            }
            return Ok(());
        };
        match &env.event {
            Event::StateChange {
                state: WsState::Thinking | WsState::Running | WsState::Attention,
            } => {
                self.running.insert(ws_id.to_string());
            }
            Event::TurnComplete { .. } => {
                self.running.remove(ws_id);
            }
            _ => {}
        }
        if idx == self.current {
            self.on_current_event(&env)
        } else {
            self.on_background_event(idx, &env)
        }
    }

    fn on_background_event(&mut self, idx: usize, env: &Envelope) -> Result<(), NodeError> {
        let what = match &env.event {
            Event::ApproveRequest { .. } => "needs approval",
            Event::TurnComplete {
                state: WsState::Error,
                ..
            } => "failed",
            Event::TurnComplete { .. } => "finished",
            _ => return Ok(()),
        };
        let notice = format!(
            "[{} {what} \u{2014} /ws {} to switch]",
            self.list[idx].name(),
            idx + 1
        );
        let notice = self.opts.style.yellow(&notice);
        self.line(&notice)
    }

    fn on_current_event(&mut self, env: &Envelope) -> Result<(), NodeError> {
        let style = self.opts.style;
        match &env.event {
            Event::ThinkingStart => {
                if self.opts.interactive {
                    self.spinner.start("thinking\u{2026}");
                }
            }
            Event::ThinkingStop => self.spinner.stop(),
            Event::Reasoning { text } => {
                self.spinner.stop();
                if self.opts.interactive {
                    let rest = self.renderer.finish();
                    self.write_raw(&rest)?;
                    self.write_raw(&style.dim(text))?;
                    self.reasoning_mid_line = !text.ends_with('\n');
                }
            }
            Event::Content { text } => {
                self.spinner.stop();
                if self.reasoning_mid_line {
                    self.reasoning_mid_line = false;
                    self.write_raw("\n")?;
                }
                let rendered = self.renderer.push(text);
                self.write_raw(&rendered)?;
            }
            Event::StreamEnd => self.flush_text()?,
            Event::ToolInfo { items } => self.show_items(items, false)?,
            Event::ApproveRequest { .. } => self.on_approve_request(env)?,
            Event::ApprovalResolved {
                approved,
                feedback,
                cycle_id,
            } => {
                let on_screen = self
                    .awaiting_approval
                    .as_ref()
                    .is_some_and(|(w, c)| **w == *env.ws_id && (c == cycle_id || cycle_id.is_empty()));
                if on_screen {
                    self.awaiting_approval = None;
                    let verdict = if *approved { "approved" } else { "denied" };
                    let why = if feedback.is_empty() {
                        String::new()
                    } else {
                        format!(": {feedback}")
                    };
                    self.info(&format!("[approval {verdict}{why}]"))?;
                    // Another round of this workstream may wait (a parallel sub-agent).
                    if let Some(next) = self.current().pending_approval()
                        && *next.ws_id == *env.ws_id
                    {
                        self.on_approve_request(&next)?;
                    }
                }
            }
            Event::ToolOutputChunk { chunk, .. } => {
                self.spinner.stop();
                let text = self.tool_out.push(chunk);
                self.write_raw(&text)?;
            }
            Event::ToolResult {
                name,
                output,
                is_error,
                ..
            } => {
                let rest = self.tool_out.finish();
                self.write_raw(&rest)?;
                if *is_error {
                    let first = output.lines().next().unwrap_or_default();
                    self.line(&style.red(&format!("  \u{2717} {name}: {first}")))?;
                } else {
                    self.line(&style.dim(&format!("  \u{2713} {name}")))?;
                }
            }
            Event::Info { message } => self.info(message)?,
            Event::Error { message } => self.line(&style.red(message))?,
            Event::BusyError { message } => self.line(&style.yellow(message))?,
            Event::TurnComplete { .. } => {
                self.flush_text()?;
                self.awaiting_approval = None;
            }
            Event::StateChange { .. }
            | Event::Status(_)
            | Event::ClearUi
            | Event::Cancelled
            | Event::Activity { .. }
            // No pane in a terminal: the tool's confirmation line says it all.
            | Event::Preview { .. }
            // The terminal does not offer plan_agent, so no plan is ever reviewed here.
            | Event::PlanReview { .. }
            | Event::PlanResolved { .. } => {}
            Event::OutputWarning(w) => {
                let what = if w.redacted { "redacted" } else { "flagged" };
                self.line(&style.yellow(&format!(
                    "  \u{26a0} output guard ({what}): {}",
                    w.flags.join(", ")
                )))?;
            }
            Event::IntentVerdict(v) => {
                self.line(&style.dim(&format!(
                    "  judge ({}): {} risk, {} ({:.0}%) \u{2014} {}",
                    v.judge_model,
                    v.risk_level,
                    v.recommendation,
                    v.confidence * 100.0,
                    v.intent_summary
                )))?;
            }
        }
        Ok(())
    }

    /// Shows an approval request of the current workstream and asks (interactive) or
    /// decides (pipe mode).
    fn on_approve_request(&mut self, env: &Envelope) -> Result<(), NodeError> {
        let Event::ApproveRequest {
            items, cycle_id, ..
        } = &env.event
        else {
            return Ok(());
        };
        self.flush_text()?;
        if self.opts.interactive {
            // One question at a time: a round arriving while another is asked waits its turn
            // (asked when that one is resolved).
            if self.awaits_on(&env.ws_id) {
                return Ok(());
            }
            self.show_items(items, true)?;
            self.awaiting_approval = Some((env.ws_id.to_string(), cycle_id.clone()));
            return Ok(());
        }
        self.show_items(items, true)?;
        let ws = self.current().clone();
        let round = RoundRef::Cycle(cycle_id);
        if ws.skip_permissions() {
            ws.approve_round(round, true, None, false);
        } else {
            self.info(
                "[denied: stdin is not a terminal (non-interactive); pass --skip-permissions to approve tool calls]",
            )?;
            ws.approve_round(round, false, Some("non-interactive".to_string()), false);
        }
        Ok(())
    }

    /// Whether an approval question of `ws_id` is on screen.
    fn awaits_on(&self, ws_id: &str) -> bool {
        self.awaiting_approval
            .as_ref()
            .is_some_and(|(w, _)| w == ws_id)
    }
}

fn state_label(h: &WorkstreamHandle) -> &'static str {
    if h.pending_approval().is_some() {
        "needs approval"
    } else {
        h.state().as_str()
    }
}

/// Reads stdin lines on a dedicated thread (a blocking read cannot be cancelled, so it
/// must not sit in the runtime's blocking pool, which would delay exit). The channel ends
/// at end of input or on a read error.
pub fn stdin_lines() -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel(1);
    let spawned = std::thread::Builder::new()
        .name("stdin-lines".into())
        .spawn(move || {
            let mut stdin = std::io::stdin().lock();
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match stdin.read_until(b'\n', &mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => {
                        let line = String::from_utf8_lossy(&buf);
                        let line = line.trim_end_matches(['\n', '\r']).to_string();
                        if tx.blocking_send(line).is_err() {
                            break;
                        }
                    }
                }
            }
        });
    if let Err(e) = spawned {
        tracing::error!(error = %e, "cannot start the stdin reader");
    }
    rx
}

/// Forwards Ctrl-C presses (SIGINT) into a channel; the default "terminate" action is
/// replaced for the life of the process.
pub fn ctrl_c_presses() -> mpsc::Receiver<()> {
    let (tx, rx) = mpsc::channel(4);
    tokio::spawn(async move {
        while tokio::signal::ctrl_c().await.is_ok() {
            if tx.send(()).await.is_err() {
                break;
            }
        }
    });
    rx
}

/// `/tools`: one line per tool of the latest request, then the totals and the digest.
fn describe_tools(p: &turnstone_engine::PreparedTools) -> String {
    let v = serde_json::to_value(p).unwrap_or_default();
    let mut out = format!(
        "Turn {}, request {}: {} tools, {} bytes, sha256 {}",
        p.turn,
        p.step,
        v["tool_count"],
        v["bytes"],
        v["sha256"].as_str().unwrap_or_default()
    );
    for t in v["tools"].as_array().into_iter().flatten() {
        let provenance = match &t["provenance"] {
            serde_json::Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        out.push_str(&format!(
            "\n  {} ({} bytes, {}, {})",
            t["name"].as_str().unwrap_or_default(),
            t["bytes"],
            t["residency"].as_str().unwrap_or("resident"),
            provenance
        ));
    }
    if let Some(d) = v["deferred"].as_array().filter(|d| !d.is_empty()) {
        let names: Vec<&str> = d.iter().filter_map(|x| x["name"].as_str()).collect();
        out.push_str(&format!("\n  deferred: {}", names.join(", ")));
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use turnstone_engine::{Engine, EngineConfig, ManagerConfig};
    use turnstone_llm::{CircuitBreaker, Resilient, RetryPolicy};
    use turnstone_testkit::{ScriptReply, ScriptedProvider, assert_eventually};
    use turnstone_tools::ToolRegistry;

    use super::*;

    /// Output shared between the client task and the test.
    #[derive(Clone, Default)]
    struct Screen(Arc<Mutex<Vec<u8>>>);

    impl Write for Screen {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0.lock().unwrap().extend_from_slice(buf);
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    impl Screen {
        fn text(&self) -> String {
            String::from_utf8_lossy(&self.0.lock().unwrap()).into_owned()
        }
    }

    struct Client {
        screen: Screen,
        lines: mpsc::Sender<String>,
        ctrl_c: mpsc::Sender<()>,
        task: JoinHandle<Repl<Screen>>,
        _dir: tempfile::TempDir,
    }

    impl Client {
        async fn start(interactive: bool, skip: bool, provider: Arc<ScriptedProvider>) -> Self {
            let dir = tempfile::tempdir().unwrap();
            let resilient = Resilient::new(
                provider,
                RetryPolicy::none(),
                Arc::new(CircuitBreaker::default()),
            );
            let config = EngineConfig {
                model: "scripted".into(),
                skip_permissions: skip,
                cwd: dir.path().to_path_buf(),
                ..EngineConfig::default()
            };
            let tools = Arc::new(ToolRegistry::with_builtins().unwrap());
            let engine = Engine::new(resilient, tools, config).await;
            let manager = Manager::new(engine, ManagerConfig::default());
            let options = ReplOptions {
                interactive,
                stdout_tty: false,
                style: Style::PLAIN,
                spinner: false,
                model: "scripted".into(),
                endpoint: "in-process".into(),
            };
            let screen = Screen::default();
            let mut repl = Repl::new(manager, options, screen.clone()).unwrap();
            let (lines, lines_rx) = mpsc::channel(8);
            let (ctrl_c, ctrl_c_rx) = mpsc::channel(8);
            let task = tokio::spawn(async move {
                repl.run(lines_rx, ctrl_c_rx).await.unwrap();
                repl
            });
            Self {
                screen,
                lines,
                ctrl_c,
                task,
                _dir: dir,
            }
        }

        async fn type_line(&self, line: &str) {
            self.lines.send(line.to_string()).await.unwrap();
        }

        async fn wait_for(&self, needle: &str) {
            let screen = self.screen.clone();
            assert_eventually!(
                screen.text().contains(needle),
                "never saw {needle:?} in:\n{}",
                self.screen.text()
            );
        }

        async fn finish(self) -> (Repl<Screen>, String) {
            drop(self.lines);
            let repl = tokio::time::timeout(Duration::from_secs(10), self.task)
                .await
                .expect("the client did not stop")
                .unwrap();
            (repl, self.screen.text())
        }
    }

    #[tokio::test]
    async fn clear_forgets_the_context_but_keeps_the_workstream() {
        let client = Client::start(false, false, Arc::new(ScriptedProvider::new())).await;
        client.type_line("remember me").await;
        client.type_line("/clear").await;
        let (repl, out) = client.finish().await;
        assert!(out.contains("remember me\n"), "{out}");
        assert!(out.contains("Conversation context cleared."), "{out}");
        assert_eq!(repl.list.len(), 1);
        assert!(repl.list[0].history().is_empty(), "context cleared");

        let client = Client::start(false, false, Arc::new(ScriptedProvider::new())).await;
        client.type_line("remember me").await;
        let (repl, _) = client.finish().await;
        assert_eq!(repl.list[0].history().len(), 2, "without /clear it is kept");
    }

    #[tokio::test]
    async fn a_background_workstream_asks_for_attention_and_switching_shows_its_question() {
        let provider = Arc::new(ScriptedProvider::new());
        provider.push_reply(ScriptReply::tool_calls([(
            "bash",
            r#"{"command":"sleep 2"}"#,
        )]));
        provider.push_reply(ScriptReply::tool_calls([(
            "bash",
            r#"{"command":"echo second-call"}"#,
        )]));
        let client = Client::start(true, false, provider).await;
        client.type_line("go").await;
        client.wait_for(APPROVAL_PROMPT).await;
        client.type_line("y").await;
        client.wait_for("bash: sleep 2").await;
        // While the first call sleeps, move to a new workstream.
        client.type_line("/ws new").await;
        client.wait_for("Created workstream 2").await;
        client
            .wait_for("needs approval \u{2014} /ws 1 to switch]")
            .await;
        client.type_line("/ws 1").await;
        client.wait_for("Switched to workstream 1").await;
        let out = client.screen.text();
        let after_switch = &out[out.rfind("Switched to workstream 1").unwrap()..];
        assert!(
            after_switch.contains("bash: echo second-call")
                && after_switch.contains(APPROVAL_PROMPT),
            "the pending question is shown again: {after_switch}"
        );
        client.type_line("n not now").await;
        client.wait_for("done: Denied by user: not now").await;
        let (_, out) = client.finish().await;
        assert!(!out.contains("second-call\n  \u{2502}"), "{out}");
    }

    #[tokio::test]
    async fn a_background_turn_that_finishes_is_announced() {
        let client = Client::start(true, true, Arc::new(ScriptedProvider::new())).await;
        client.type_line("TOOL: sleep 2").await;
        client.wait_for("bash: sleep 2").await;
        client.type_line("/ws new second").await;
        client.wait_for("Created workstream 2: second").await;
        client.wait_for("finished \u{2014} /ws 1 to switch]").await;
        client.type_line("/ws list").await;
        client.wait_for("* 2. second  idle").await;
        client.finish().await;
    }

    #[tokio::test]
    async fn ctrl_c_cancels_a_running_turn_then_a_second_one_exits() {
        let client = Client::start(true, true, Arc::new(ScriptedProvider::new())).await;
        client.type_line("TOOL: sleep 30").await;
        client.wait_for("bash: sleep 30").await;
        client.ctrl_c.send(()).await.unwrap();
        client.wait_for("[Generation cancelled]").await;
        client.ctrl_c.send(()).await.unwrap();
        let task = client.task;
        let repl = tokio::time::timeout(Duration::from_secs(10), task)
            .await
            .expect("a second Ctrl-C exits")
            .unwrap();
        assert!(!repl.list[0].is_busy());
        assert!(!client.screen.text().contains("done:"));
    }

    #[tokio::test]
    async fn ctrl_c_at_an_idle_prompt_exits() {
        let client = Client::start(true, false, Arc::new(ScriptedProvider::new())).await;
        client.wait_for("> ").await;
        client.ctrl_c.send(()).await.unwrap();
        tokio::time::timeout(Duration::from_secs(10), client.task)
            .await
            .expect("Ctrl-C at the prompt exits")
            .unwrap();
    }

    #[tokio::test]
    async fn typing_while_a_turn_runs_is_refused_not_queued() {
        let client = Client::start(true, true, Arc::new(ScriptedProvider::new())).await;
        client.type_line("TOOL: sleep 2").await;
        client.wait_for("bash: sleep 2").await;
        client.type_line("too early").await;
        client.wait_for("[busy: a turn is running").await;
        client.wait_for("done: ").await;
        let (repl, out) = client.finish().await;
        assert!(!out.contains("too early\n"), "{out}");
        assert_eq!(repl.list[0].turn_count(), 1);
    }
}

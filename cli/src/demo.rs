//! The demo frontend: prints a workstream's events as a terminal transcript and answers
//! approvals from a line source. The same engine the node server will drive.

use std::io::Write;

use turnstone_engine::{Event, Item, SendOutcome, WorkstreamHandle};

/// Where approval answers come from.
pub trait Answers {
    /// The next answer line (`y`, `n`, `a`, or `n: feedback`); `None` when input ended.
    fn next_answer(&mut self) -> Option<String>;
}

/// Runs one prompt to completion, writing the transcript to `out`.
pub async fn run_prompt(
    ws: &WorkstreamHandle,
    prompt: &str,
    out: &mut dyn Write,
    answers: &mut dyn Answers,
) -> std::io::Result<()> {
    let mut sub = ws.subscribe(None);
    writeln!(out, "> {prompt}")?;
    match ws.send(prompt, None) {
        SendOutcome::Started { .. } => {}
        other => {
            writeln!(out, "[send refused: {other:?}]")?;
            return Ok(());
        }
    }
    let mut mid_line = false;
    while let Some(item) = sub.next().await {
        let Item::Event(env) = item else {
            writeln!(out, "[some events were dropped]")?;
            continue;
        };
        match &env.event {
            Event::Content { text } => {
                write!(out, "{text}")?;
                mid_line = !text.ends_with('\n');
            }
            Event::Reasoning { text } => {
                write!(out, "\x1b[2m{text}\x1b[0m")?;
                mid_line = !text.ends_with('\n');
            }
            Event::StreamEnd if mid_line => {
                writeln!(out)?;
                mid_line = false;
            }
            Event::ToolInfo { items } => {
                for item in items {
                    writeln!(out, "{}", item.header)?;
                }
            }
            Event::ApproveRequest { items, .. } => {
                for item in items {
                    writeln!(out, "{}", item.header)?;
                    if !item.preview.is_empty() {
                        writeln!(out, "{}", item.preview)?;
                    }
                }
                write!(out, "approve? [y]es / [n]o / [a]lways (or `n: reason`): ")?;
                out.flush()?;
                let answer = answers
                    .next_answer()
                    .unwrap_or_else(|| "n: no input".to_string());
                let answer = answer.trim();
                let (approved, always, feedback) = match answer {
                    "y" | "yes" | "" => (true, false, None),
                    "a" | "always" => (true, true, None),
                    other => {
                        let feedback = other.split_once(':').map(|(_, f)| f.trim().to_string());
                        (false, false, feedback)
                    }
                };
                ws.approve(approved, feedback, always);
            }
            Event::ToolOutputChunk { chunk, .. } => write!(out, "  | {chunk}")?,
            Event::ToolResult { name, is_error, .. } => {
                writeln!(
                    out,
                    "  [{name} {}]",
                    if *is_error { "failed" } else { "done" }
                )?;
            }
            Event::Info { message } => writeln!(out, "{message}")?,
            Event::Error { message } => writeln!(out, "error: {message}")?,
            Event::TurnComplete { .. } => break,
            _ => {}
        }
        out.flush()?;
    }
    Ok(())
}

//! The active skill of a workstream: rendered once when set, added to the system prompt of
//! every request after the engine's prompt, cleared by `set_skill(None)`.

use turnstone_engine::ActiveSkill;

use super::harness::{Harness, read_turn, send};

fn system_of(request: &serde_json::Value) -> Option<String> {
    let first = &request["messages"][0];
    (first["role"] == "system").then(|| first["content"].as_str().unwrap_or("").to_string())
}

#[tokio::test]
async fn an_active_skill_joins_the_system_prompt_until_cleared() {
    let h = Harness::with(|o| {
        o.config.system_prompt = Some("BASE PROMPT".into());
        o.config.node_id = "node-7".into();
    })
    .await;
    let ws = h.workstream();
    assert!(ws.skill().is_none());

    ws.set_skill(Some(ActiveSkill::new(
        "reviewer",
        "Review for {{model}} in {{ ws_id }} on {{node_id}}; keep {{unknown}} and {{ as is",
    )));
    let expected = format!(
        "Review for fake-model in {} on node-7; keep {{{{unknown}}}} and {{{{ as is",
        ws.id()
    );
    let active = ws.skill().unwrap();
    assert_eq!(active.name, "reviewer");
    assert_eq!(active.content, expected);

    let mut sub = send(&ws, "hello");
    read_turn(&mut sub).await;
    let request = h.llm.last_request().unwrap();
    assert_eq!(
        system_of(&request).as_deref(),
        Some(format!("BASE PROMPT\n\n{expected}").as_str())
    );

    // Replacing it: only the new skill is in the next request.
    ws.set_skill(Some(ActiveSkill::new("terse", "Answer in one line.")));
    let mut sub = send(&ws, "again");
    read_turn(&mut sub).await;
    let system = system_of(&h.llm.last_request().unwrap()).unwrap();
    assert_eq!(system, "BASE PROMPT\n\nAnswer in one line.");

    ws.set_skill(None);
    assert!(ws.skill().is_none());
    let mut sub = send(&ws, "and again");
    read_turn(&mut sub).await;
    assert_eq!(
        system_of(&h.llm.last_request().unwrap()).as_deref(),
        Some("BASE PROMPT")
    );
}

#[tokio::test]
async fn a_skill_alone_is_the_system_prompt() {
    let h = Harness::start().await;
    let ws = h.workstream();
    let mut sub = send(&ws, "no prompt yet");
    read_turn(&mut sub).await;
    assert_eq!(system_of(&h.llm.last_request().unwrap()), None);

    ws.set_skill(Some(ActiveSkill::new("s", "Only the skill.")));
    let mut sub = send(&ws, "now");
    read_turn(&mut sub).await;
    assert_eq!(
        system_of(&h.llm.last_request().unwrap()).as_deref(),
        Some("Only the skill.")
    );
}

#[test]
fn render_replaces_only_the_three_variables() {
    assert_eq!(
        ActiveSkill::render("{{model}}/{{ws_id}}/{{node_id}}", "m", "w", "n"),
        "m/w/n"
    );
    assert_eq!(ActiveSkill::render("{{x}} {{", "m", "w", "n"), "{{x}} {{");
    assert_eq!(ActiveSkill::render("", "m", "w", "n"), "");
    assert_eq!(
        ActiveSkill::render("ünï {{model}}}", "m", "w", "n"),
        "ünï m}"
    );
}

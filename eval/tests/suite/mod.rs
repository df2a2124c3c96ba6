//! The harness against the scripted model (`turnstone-testkit`'s `FakeLlm`), through the
//! real engine and tools; and the `turnstone-eval` binary end to end.

mod binary;
mod harness;

use std::time::Duration;

use turnstone_eval::{JudgeModel, RunOptions, Suite, Variant};
use turnstone_node::backend::Backend;
use turnstone_testkit::FakeLlm;

/// A variant on `llm`.
pub async fn variant(label: &str, llm: &FakeLlm, system_prompt: Option<&str>) -> Variant {
    let backend = Backend::connect(Some(&llm.base_url()), None).await.unwrap();
    Variant {
        label: label.into(),
        provider: backend.provider.clone(),
        model: "fake-model".into(),
        system_prompt: system_prompt.map(String::from),
        temperature: Some(0.0),
        max_tokens: None,
        seed: None,
    }
}

/// A judge on `llm`.
pub async fn judge_on(llm: &FakeLlm) -> JudgeModel {
    let backend = Backend::connect(Some(&llm.base_url()), None).await.unwrap();
    JudgeModel {
        provider: backend.provider.clone(),
        model: "judge-model".into(),
        timeout: Duration::from_secs(10),
    }
}

pub fn suite(toml: &str) -> Suite {
    Suite::parse(toml, true, "test.toml").unwrap()
}

pub fn options(judge: Option<JudgeModel>) -> RunOptions {
    RunOptions { retries: 0, judge }
}

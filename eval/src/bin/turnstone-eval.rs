//! `turnstone-eval`: runs a suite against a model (or two, A/B) and reports. Exit status 0
//! when every variant reaches the threshold, 1 when one misses it, 2 for a bad suite file,
//! bad flags or a model that cannot be reached.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

use clap::Parser;
use turnstone_eval::{JudgeModel, Report, RunOptions, Suite, Variant, run_suite};
use turnstone_node::NodeError;
use turnstone_node::backend::{Backend, ModelTarget, connect_target, env_api_key};
use turnstone_runtime::{LogFormat, init_tracing};

#[derive(Debug, Parser)]
#[command(
    name = "turnstone-eval",
    version,
    about = "Run an evaluation suite through the Turnstone engine and tools, score it, compare two models or system prompts"
)]
struct Args {
    /// The suite: TOML (`.toml`) or JSON.
    suite: PathBuf,
    /// `openai` (any OpenAI-compatible endpoint) or `anthropic`.
    #[arg(long, default_value = "openai")]
    provider: String,
    /// The endpoint. Default: the built-in scripted model (`openai`), or Anthropic's API.
    #[arg(long, env = "TURNSTONE_BASE_URL")]
    base_url: Option<String>,
    /// The endpoint's key (default: $TURNSTONE_API_KEY / $OPENAI_API_KEY, for anthropic
    /// $ANTHROPIC_API_KEY; each also as `*_FILE`). Never logged.
    #[arg(long)]
    api_key: Option<String>,
    /// The model (default: the first the endpoint lists).
    #[arg(long, env = "TURNSTONE_MODEL")]
    model: Option<String>,
    /// System prompt (default: the suite's `system_prompt`).
    #[arg(long, conflicts_with = "system_prompt_file")]
    system_prompt: Option<String>,
    /// System prompt read from a file.
    #[arg(long)]
    system_prompt_file: Option<PathBuf>,
    /// Name of the first variant in the report.
    #[arg(long, default_value = "A")]
    label: String,
    /// A/B: the second variant's provider (default: the first's).
    #[arg(long)]
    b_provider: Option<String>,
    /// A/B: the second variant's endpoint (default: the first's).
    #[arg(long)]
    b_base_url: Option<String>,
    /// A/B: the second variant's key (default: the first's, or its provider's variable).
    #[arg(long)]
    b_api_key: Option<String>,
    /// A/B: the second variant's model (default: the first's).
    #[arg(long)]
    b_model: Option<String>,
    /// A/B: the second variant's system prompt.
    #[arg(long, conflicts_with = "b_system_prompt_file")]
    b_system_prompt: Option<String>,
    /// A/B: the second variant's system prompt, from a file.
    #[arg(long)]
    b_system_prompt_file: Option<PathBuf>,
    /// Name of the second variant in the report.
    #[arg(long, default_value = "B")]
    b_label: String,
    /// Judge of `judge` checks: provider (default: the suite's `[judge]`, else the first
    /// variant's).
    #[arg(long)]
    judge_provider: Option<String>,
    /// Judge endpoint (default: the suite's `[judge]`, else the first variant's).
    #[arg(long)]
    judge_base_url: Option<String>,
    /// Judge model (default: the suite's `[judge]`, else the first variant's model).
    #[arg(long)]
    judge_model: Option<String>,
    /// Seconds one judge verdict may take.
    #[arg(long, default_value_t = 120)]
    judge_timeout: u64,
    /// Sampling temperature of the cases (the judge always uses 0).
    #[arg(long, default_value_t = 0.0)]
    temperature: f32,
    /// Most tokens per reply.
    #[arg(long)]
    max_tokens: Option<u32>,
    /// Sampling seed sent with every request (OpenAI-compatible endpoints that honour it
    /// sample reproducibly).
    #[arg(long)]
    seed: Option<u64>,
    /// Least share of passing cases (0–1); default: the suite's `threshold`, else 1.
    #[arg(long)]
    threshold: Option<f64>,
    /// Extra runs of a case whose run failed (model or engine error; not a failed check).
    #[arg(long, default_value_t = 2)]
    retries: u32,
    /// Also write the JSON report here (`-`: stdout, instead of the table).
    #[arg(long)]
    json: Option<PathBuf>,
    /// Seconds to wait for an endpoint's model list when no model is given.
    #[arg(long, default_value_t = 30)]
    model_detect_timeout: u64,
    /// Log level or filter directive (logs go to stderr).
    #[arg(long, env = "TURNSTONE_LOG_LEVEL", default_value = "warn")]
    log_level: String,
}

/// A failure before any case runs: exit status 2.
#[derive(Debug, thiserror::Error)]
enum SetupError {
    #[error(transparent)]
    Suite(#[from] turnstone_eval::SuiteError),
    #[error(transparent)]
    Node(#[from] NodeError),
    #[error("{0}")]
    Usage(String),
    #[error("{0}")]
    Io(#[from] std::io::Error),
}

#[tokio::main]
async fn main() -> ExitCode {
    let args = Args::parse();
    if let Err(e) = init_tracing(&args.log_level, LogFormat::Text) {
        eprintln!("turnstone-eval: logging disabled: {e}");
    }
    match run(args).await {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            eprintln!("turnstone-eval: {e}");
            ExitCode::from(2)
        }
    }
}

/// Runs the suite; `Ok(passed)`.
async fn run(args: Args) -> Result<bool, SetupError> {
    let suite = Suite::load(&args.suite)?;
    let threshold = args.threshold.unwrap_or(suite.threshold);
    if !(0.0..=1.0).contains(&threshold) {
        return Err(SetupError::Usage(format!(
            "--threshold {threshold}: expected a share of cases between 0 and 1"
        )));
    }
    let env = |var: &str| std::env::var(var).ok();
    let detect = Duration::from_secs(args.model_detect_timeout);

    // Variant A.
    let a_key = match &args.api_key {
        Some(key) => Some(key.clone()),
        None => env_api_key(&args.provider, &env)?,
    };
    let a_target = ModelTarget {
        provider: args.provider.clone(),
        base_url: args.base_url.clone(),
        api_key: a_key,
        model: args.model.clone(),
        seed: args.seed,
    };
    let (a_backend, a_model) = connect_target(&a_target, detect).await?;
    if a_backend.is_scripted() {
        eprintln!(
            "[using the built-in scripted model at {}; pass --base-url for a real one]",
            a_backend.base_url
        );
    }
    let a_prompt = prompt(
        args.system_prompt.clone(),
        args.system_prompt_file.as_deref(),
    )?;
    let a = Variant {
        label: args.label.clone(),
        provider: a_backend.provider.clone(),
        model: a_model.clone(),
        system_prompt: a_prompt,
        temperature: Some(args.temperature),
        max_tokens: args.max_tokens,
        seed: args.seed,
    };

    // Variant B, when any of its settings is given: what it does not say is A's.
    let b_prompt = prompt(
        args.b_system_prompt.clone(),
        args.b_system_prompt_file.as_deref(),
    )?;
    let comparing = args.b_provider.is_some()
        || args.b_base_url.is_some()
        || args.b_api_key.is_some()
        || args.b_model.is_some()
        || b_prompt.is_some();
    let mut b_backend: Option<Backend> = None;
    let b = if comparing {
        if args.b_label == args.label {
            return Err(SetupError::Usage(format!(
                "--b-label {}: the two variants need different labels",
                args.b_label
            )));
        }
        let provider = args
            .b_provider
            .clone()
            .unwrap_or_else(|| args.provider.clone());
        let same_endpoint = provider == args.provider
            && args
                .b_base_url
                .as_ref()
                .is_none_or(|u| Some(u) == args.base_url.as_ref())
            && args.b_api_key.is_none();
        let (provider_client, model) = if same_endpoint {
            (
                a_backend.provider.clone(),
                args.b_model.clone().unwrap_or_else(|| a_model.clone()),
            )
        } else {
            let key = match &args.b_api_key {
                Some(key) => Some(key.clone()),
                None if provider == args.provider => a_target.api_key.clone(),
                None => env_api_key(&provider, &env)?,
            };
            let target = ModelTarget {
                provider,
                base_url: args.b_base_url.clone().or_else(|| args.base_url.clone()),
                api_key: key,
                model: args.b_model.clone().or_else(|| args.model.clone()),
                seed: args.seed,
            };
            let (backend, model) = connect_target(&target, detect).await?;
            let client = backend.provider.clone();
            b_backend = Some(backend);
            (client, model)
        };
        Some(Variant {
            label: args.b_label.clone(),
            provider: provider_client,
            model,
            system_prompt: b_prompt.or_else(|| a.system_prompt.clone()),
            temperature: Some(args.temperature),
            max_tokens: args.max_tokens,
            seed: args.seed,
        })
    } else {
        None
    };

    // The judge: flags, else the suite's `[judge]`, else variant A's model.
    let judge_provider = args
        .judge_provider
        .clone()
        .or_else(|| suite.judge.provider.clone());
    let judge_base_url = args
        .judge_base_url
        .clone()
        .or_else(|| suite.judge.base_url.clone());
    let judge_model = args
        .judge_model
        .clone()
        .or_else(|| suite.judge.model.clone());
    let mut judge_backend: Option<Backend> = None;
    let judge = if judge_provider.is_none() && judge_base_url.is_none() {
        JudgeModel {
            provider: a_backend.provider.clone(),
            model: judge_model.unwrap_or_else(|| a_model.clone()),
            timeout: Duration::from_secs(args.judge_timeout.max(1)),
        }
    } else {
        let provider = judge_provider.unwrap_or_else(|| "openai".into());
        let api_key = match &suite.judge.api_key_env {
            Some(var) => key_from(var, &env)?,
            None => env_api_key(&provider, &env)?,
        };
        let target = ModelTarget {
            provider,
            base_url: judge_base_url,
            api_key,
            model: judge_model,
            seed: None,
        };
        let (backend, model) = connect_target(&target, detect).await?;
        let judge = JudgeModel {
            provider: backend.provider.clone(),
            model,
            timeout: Duration::from_secs(args.judge_timeout.max(1)),
        };
        judge_backend = Some(backend);
        judge
    };

    let options = RunOptions {
        retries: args.retries,
        judge: Some(judge),
    };
    let mut variants = vec![run_suite(&suite, &a, &options).await];
    if let Some(b) = &b {
        variants.push(run_suite(&suite, b, &options).await);
    }
    let report = Report::new(&suite.name, threshold, variants);
    match args.json.as_deref() {
        Some(path) if path == Path::new("-") => println!("{}", report.to_json()),
        Some(path) => {
            std::fs::write(path, report.to_json() + "\n")?;
            print!("{}", report.table());
        }
        None => print!("{}", report.table()),
    }
    drop((a_backend, b_backend, judge_backend));
    Ok(report.passed)
}

/// The system prompt given inline or in a file.
fn prompt(inline: Option<String>, file: Option<&Path>) -> Result<Option<String>, SetupError> {
    match (inline, file) {
        (Some(text), _) => Ok(Some(text).filter(|t| !t.trim().is_empty())),
        (None, Some(path)) => {
            let text = std::fs::read_to_string(path).map_err(|e| {
                SetupError::Usage(format!("system prompt file {}: {e}", path.display()))
            })?;
            Ok(Some(text).filter(|t| !t.trim().is_empty()))
        }
        (None, None) => Ok(None),
    }
}

/// The key in variable `var`, or in the file `var_FILE` names.
fn key_from(var: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Option<String>, SetupError> {
    if let Some(key) = env(var).filter(|k| !k.is_empty()) {
        return Ok(Some(key));
    }
    let file_var = format!("{var}_FILE");
    match env(&file_var).filter(|p| !p.trim().is_empty()) {
        Some(path) => Ok(Some(
            turnstone_runtime::settings::read_secret_file(&file_var, Path::new(&path))
                .map_err(NodeError::from)?,
        )),
        None => Err(SetupError::Usage(format!(
            "[judge] api_key_env = \"{var}\": neither {var} nor {file_var} is set"
        ))),
    }
}

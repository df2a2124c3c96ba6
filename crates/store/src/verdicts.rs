//! Judge verdicts: the `intent_verdicts` table (node spec §6.1) and [`VerdictStore`].
//!
//! One row per verdict on a gated tool call — the heuristic tier's (recorded when the
//! approval is asked) and the LLM tier's (when it arrives) — and, once a human decides, that
//! decision (`user_decision`: `approved` | `denied`) on every verdict of the call. An audit
//! log: rows outlive their workstream. The SQL is written once, in `impl_verdict_store!`,
//! for both backends; `evidence` is a JSON array stored as text.

use async_trait::async_trait;

use crate::error::{Result, StoreError};

/// The `user_decision` values.
pub const USER_DECISIONS: [&str; 2] = ["approved", "denied"];

/// A verdict to record (the wire verdict's fields plus its workstream).
#[derive(Debug, Clone, PartialEq)]
pub struct NewIntentVerdict {
    /// 32 hex digits, from the judge.
    pub verdict_id: String,
    pub ws_id: String,
    pub call_id: String,
    pub func_name: String,
    /// The call's arguments as a JSON string.
    pub func_args: String,
    pub intent_summary: String,
    pub risk_level: String,
    pub confidence: f64,
    pub recommendation: String,
    pub reasoning: String,
    pub evidence: Vec<String>,
    /// `heuristic` or `llm`.
    pub tier: String,
    pub judge_model: String,
    pub latency_ms: i64,
}

/// One row of `intent_verdicts`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct IntentVerdictRecord {
    pub verdict_id: String,
    pub ws_id: String,
    pub call_id: String,
    pub func_name: String,
    pub func_args: String,
    pub intent_summary: String,
    pub risk_level: String,
    pub confidence: f64,
    pub recommendation: String,
    pub reasoning: String,
    pub evidence: Vec<String>,
    pub tier: String,
    pub judge_model: String,
    /// `""` until a human decided, then `approved` or `denied`.
    pub user_decision: String,
    pub latency_ms: i64,
    pub created: String,
}

/// Which verdicts to list; every field narrows, `Default` lists the newest 100.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerdictFilter {
    pub ws_id: Option<String>,
    pub risk_level: Option<String>,
    /// Inclusive ISO timestamps.
    pub since: Option<String>,
    pub until: Option<String>,
    pub limit: usize,
    pub offset: usize,
}

impl Default for VerdictFilter {
    fn default() -> Self {
        Self {
            ws_id: None,
            risk_level: None,
            since: None,
            until: None,
            limit: 100,
            offset: 0,
        }
    }
}

/// Storage of judge verdicts; implemented by both backends (see the module docs).
#[async_trait]
pub trait VerdictStore: Send + Sync {
    /// Records a verdict. Recording the same `verdict_id` again (a re-injected approval)
    /// changes nothing and returns `false`. An empty id, workstream or call is
    /// [`StoreError::InvalidInput`].
    async fn record_intent_verdict(&self, verdict: NewIntentVerdict) -> Result<bool>;
    async fn get_intent_verdict(&self, verdict_id: &str) -> Result<Option<IntentVerdictRecord>>;
    /// Newest first (then by id, descending).
    async fn list_intent_verdicts(
        &self,
        filter: &VerdictFilter,
    ) -> Result<Vec<IntentVerdictRecord>>;
    /// Sets `user_decision` (`approved` | `denied`) on one verdict; `false` when there is no
    /// such verdict.
    async fn set_verdict_decision(&self, verdict_id: &str, decision: &str) -> Result<bool>;
    /// Sets `user_decision` on every verdict of a call that has none yet (a human decided
    /// the batch); returns how many rows changed.
    async fn decide_call_verdicts(&self, ws_id: &str, call_id: &str, decision: &str)
    -> Result<u64>;
}

pub(crate) fn validate_decision(decision: &str) -> Result<()> {
    if USER_DECISIONS.contains(&decision) {
        Ok(())
    } else {
        Err(StoreError::InvalidInput(format!(
            "user_decision must be approved or denied, not {decision:?}"
        )))
    }
}

macro_rules! verdict_columns {
    () => {
        "verdict_id, ws_id, call_id, func_name, func_args, intent_summary, risk_level, confidence, \
         recommendation, reasoning, evidence, tier, judge_model, user_decision, latency_ms, created"
    };
}
pub(crate) use verdict_columns;

/// Implements [`VerdictStore`] for a backend type with a `pool` field (see `sql_common.rs`
/// for why a macro rather than a generic).
macro_rules! impl_verdict_store {
    ($store:ty, $db:ty) => {
        impl $store {
            fn verdict_from_row(
                row: &<$db as sqlx::Database>::Row,
            ) -> $crate::error::Result<$crate::verdicts::IntentVerdictRecord> {
                use sqlx::Row as _;
                let evidence: String = row.try_get("evidence")?;
                Ok($crate::verdicts::IntentVerdictRecord {
                    verdict_id: row.try_get("verdict_id")?,
                    ws_id: row.try_get("ws_id")?,
                    call_id: row.try_get("call_id")?,
                    func_name: row.try_get("func_name")?,
                    func_args: row.try_get("func_args")?,
                    intent_summary: row.try_get("intent_summary")?,
                    risk_level: row.try_get("risk_level")?,
                    confidence: row.try_get("confidence")?,
                    recommendation: row.try_get("recommendation")?,
                    reasoning: row.try_get("reasoning")?,
                    evidence: serde_json::from_str(&evidence).map_err(|e| {
                        $crate::error::StoreError::Corrupt(format!("intent_verdicts.evidence: {e}"))
                    })?,
                    tier: row.try_get("tier")?,
                    judge_model: row.try_get("judge_model")?,
                    user_decision: row.try_get("user_decision")?,
                    latency_ms: row.try_get("latency_ms")?,
                    created: row.try_get("created")?,
                })
            }
        }

        #[async_trait::async_trait]
        impl $crate::verdicts::VerdictStore for $store {
            async fn record_intent_verdict(
                &self,
                v: $crate::verdicts::NewIntentVerdict,
            ) -> $crate::error::Result<bool> {
                if v.verdict_id.is_empty() || v.ws_id.is_empty() || v.call_id.is_empty() {
                    return Err($crate::error::StoreError::InvalidInput(
                        "a verdict needs a verdict_id, a ws_id and a call_id".into(),
                    ));
                }
                let done = sqlx::query(
                    "INSERT INTO intent_verdicts (verdict_id, ws_id, call_id, func_name, \
                     func_args, intent_summary, risk_level, confidence, recommendation, \
                     reasoning, evidence, tier, judge_model, latency_ms, created) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15) \
                     ON CONFLICT (verdict_id) DO NOTHING",
                )
                .bind(&v.verdict_id)
                .bind(&v.ws_id)
                .bind(&v.call_id)
                .bind(&v.func_name)
                .bind(&v.func_args)
                .bind(&v.intent_summary)
                .bind(&v.risk_level)
                .bind(if v.confidence.is_finite() { v.confidence } else { 0.0 })
                .bind(&v.recommendation)
                .bind(&v.reasoning)
                .bind(serde_json::to_string(&v.evidence).unwrap_or_else(|_| "[]".to_owned()))
                .bind(&v.tier)
                .bind(&v.judge_model)
                .bind(v.latency_ms)
                .bind($crate::timestamp::now())
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected() > 0)
            }

            async fn get_intent_verdict(
                &self,
                verdict_id: &str,
            ) -> $crate::error::Result<Option<$crate::verdicts::IntentVerdictRecord>> {
                const SQL: &str = concat!(
                    "SELECT ",
                    $crate::verdicts::verdict_columns!(),
                    " FROM intent_verdicts WHERE verdict_id = $1"
                );
                let row = sqlx::query(SQL).bind(verdict_id).fetch_optional(&self.pool).await?;
                row.as_ref().map(Self::verdict_from_row).transpose()
            }

            async fn list_intent_verdicts(
                &self,
                filter: &$crate::verdicts::VerdictFilter,
            ) -> $crate::error::Result<Vec<$crate::verdicts::IntentVerdictRecord>> {
                const SQL: &str = concat!(
                    "SELECT ",
                    $crate::verdicts::verdict_columns!(),
                    " FROM intent_verdicts WHERE ($1 IS NULL OR ws_id = $1) \
                     AND ($2 IS NULL OR risk_level = $2) AND ($3 IS NULL OR created >= $3) \
                     AND ($4 IS NULL OR created <= $4) \
                     ORDER BY created DESC, verdict_id DESC LIMIT $5 OFFSET $6"
                );
                let rows = sqlx::query(SQL)
                    .bind(filter.ws_id.as_deref())
                    .bind(filter.risk_level.as_deref())
                    .bind(filter.since.as_deref())
                    .bind(filter.until.as_deref())
                    .bind($crate::store::limit_i64(filter.limit))
                    .bind($crate::store::limit_i64(filter.offset))
                    .fetch_all(&self.pool)
                    .await?;
                rows.iter().map(Self::verdict_from_row).collect()
            }

            async fn set_verdict_decision(
                &self,
                verdict_id: &str,
                decision: &str,
            ) -> $crate::error::Result<bool> {
                $crate::verdicts::validate_decision(decision)?;
                let done = sqlx::query(
                    "UPDATE intent_verdicts SET user_decision = $2 WHERE verdict_id = $1",
                )
                .bind(verdict_id)
                .bind(decision)
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected() > 0)
            }

            async fn decide_call_verdicts(
                &self,
                ws_id: &str,
                call_id: &str,
                decision: &str,
            ) -> $crate::error::Result<u64> {
                $crate::verdicts::validate_decision(decision)?;
                let done = sqlx::query(
                    "UPDATE intent_verdicts SET user_decision = $3 \
                     WHERE ws_id = $1 AND call_id = $2 AND user_decision = ''",
                )
                .bind(ws_id)
                .bind(call_id)
                .bind(decision)
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected())
            }
        }
    };
}

pub(crate) use impl_verdict_store;

//! Output guard assessments: the `output_assessments` table (node spec §6.1) and
//! [`AssessmentStore`].
//!
//! One row per tool result the output guard flagged (what its `output_warning` said: flags,
//! risk level, annotations, the output's length, whether it was redacted) — never the output
//! itself. An audit log: rows outlive their workstream. The SQL is written once, in
//! `impl_assessment_store!`, for both backends; the lists are JSON arrays stored as text.

use async_trait::async_trait;

use crate::error::Result;

/// An assessment to record.
#[derive(Debug, Clone, PartialEq)]
pub struct NewOutputAssessment {
    /// 32 hex digits.
    pub assessment_id: String,
    pub ws_id: String,
    pub call_id: String,
    pub func_name: String,
    pub flags: Vec<String>,
    /// `none`, `low`, `medium`, `high` or `critical`.
    pub risk_level: String,
    pub annotations: Vec<String>,
    pub output_length: i64,
    pub redacted: bool,
}

/// One row of `output_assessments`.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct OutputAssessmentRecord {
    pub assessment_id: String,
    pub ws_id: String,
    pub call_id: String,
    pub func_name: String,
    pub flags: Vec<String>,
    pub risk_level: String,
    pub annotations: Vec<String>,
    pub output_length: i64,
    pub redacted: bool,
    pub created: String,
}

/// Storage of output assessments; implemented by both backends (see the module docs).
#[async_trait]
pub trait AssessmentStore: Send + Sync {
    /// Records an assessment. The same `assessment_id` again changes nothing and returns
    /// `false`. An empty id, workstream or call is [`crate::StoreError::InvalidInput`].
    async fn record_output_assessment(&self, assessment: NewOutputAssessment) -> Result<bool>;
    /// A workstream's assessments (every workstream's with `None`), newest first, at most
    /// `limit`.
    async fn list_output_assessments(
        &self,
        ws_id: Option<&str>,
        limit: usize,
    ) -> Result<Vec<OutputAssessmentRecord>>;
}

/// Implements [`AssessmentStore`] for a backend type with a `pool` field (see
/// `sql_common.rs` for why a macro rather than a generic).
macro_rules! impl_assessment_store {
    ($store:ty, $db:ty) => {
        impl $store {
            fn assessment_from_row(
                row: &<$db as sqlx::Database>::Row,
            ) -> $crate::error::Result<$crate::assessments::OutputAssessmentRecord> {
                use sqlx::Row as _;
                let list = |column: &str| -> $crate::error::Result<Vec<String>> {
                    let text: String = row.try_get(column)?;
                    serde_json::from_str(&text).map_err(|e| {
                        $crate::error::StoreError::Corrupt(format!(
                            "output_assessments.{column}: {e}"
                        ))
                    })
                };
                let redacted: i64 = row.try_get("redacted")?;
                Ok($crate::assessments::OutputAssessmentRecord {
                    assessment_id: row.try_get("assessment_id")?,
                    ws_id: row.try_get("ws_id")?,
                    call_id: row.try_get("call_id")?,
                    func_name: row.try_get("func_name")?,
                    flags: list("flags")?,
                    risk_level: row.try_get("risk_level")?,
                    annotations: list("annotations")?,
                    output_length: row.try_get("output_length")?,
                    redacted: redacted != 0,
                    created: row.try_get("created")?,
                })
            }
        }

        #[async_trait::async_trait]
        impl $crate::assessments::AssessmentStore for $store {
            async fn record_output_assessment(
                &self,
                a: $crate::assessments::NewOutputAssessment,
            ) -> $crate::error::Result<bool> {
                if a.assessment_id.is_empty() || a.ws_id.is_empty() || a.call_id.is_empty() {
                    return Err($crate::error::StoreError::InvalidInput(
                        "an assessment needs an assessment_id, a ws_id and a call_id".into(),
                    ));
                }
                let json = |list: &[String]| {
                    serde_json::to_string(list).unwrap_or_else(|_| "[]".to_owned())
                };
                let done = sqlx::query(
                    "INSERT INTO output_assessments (assessment_id, ws_id, call_id, func_name, \
                     flags, risk_level, annotations, output_length, redacted, created) \
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
                     ON CONFLICT (assessment_id) DO NOTHING",
                )
                .bind(&a.assessment_id)
                .bind(&a.ws_id)
                .bind(&a.call_id)
                .bind(&a.func_name)
                .bind(json(&a.flags))
                .bind(&a.risk_level)
                .bind(json(&a.annotations))
                .bind(a.output_length)
                .bind(i64::from(a.redacted))
                .bind($crate::timestamp::now())
                .execute(&self.pool)
                .await?;
                Ok(done.rows_affected() > 0)
            }

            async fn list_output_assessments(
                &self,
                ws_id: Option<&str>,
                limit: usize,
            ) -> $crate::error::Result<Vec<$crate::assessments::OutputAssessmentRecord>> {
                let rows = sqlx::query(
                    "SELECT assessment_id, ws_id, call_id, func_name, flags, risk_level, \
                     annotations, output_length, redacted, created FROM output_assessments \
                     WHERE ($1 IS NULL OR ws_id = $1) \
                     ORDER BY created DESC, assessment_id DESC LIMIT $2",
                )
                .bind(ws_id)
                .bind($crate::store::limit_i64(limit))
                .fetch_all(&self.pool)
                .await?;
                rows.iter().map(Self::assessment_from_row).collect()
            }
        }
    };
}

pub(crate) use impl_assessment_store;

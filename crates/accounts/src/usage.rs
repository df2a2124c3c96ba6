//! The usage report, `GET /v1/api/admin/usage` (scope approve, permission `admin.usage`):
//! the service's store's `usage_events` summed over a time range, in total and grouped by
//! day, user, model, node or workstream ([`turnstone_store::UsageStore`]).
//!
//! Query parameters: `since` and `until` — ISO-8601 dates or date-times (`2026-11-30`,
//! `2026-11-30T08:00:00Z`, `…+02:00`; no offset is UTC); `since` is inclusive, `until`
//! exclusive, except that a date alone as `until` includes that whole day. `group_by` —
//! `day` (default), `user`, `model`, `node`, `ws`. `limit` — most rows, 1..1000 (default
//! 100); the totals always cover the whole range. Anything else wrong is a 400 naming the
//! parameter.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::extract::{Query, State};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use turnstone_openapi::{ApiRoute, Param};
use turnstone_store::timestamp;
use turnstone_store::{UsageGroup, UsageQuery, UsageReport, UsageTotals};

use crate::error::AccountsError;
use crate::users::{AccountsHost, store_of};

/// Most rows one report lists.
pub const USAGE_LIMIT: usize = 1000;
/// Rows listed when `limit` is not given.
pub const USAGE_DEFAULT_LIMIT: usize = 100;

const USAGE_PARAMS: [Param; 4] = [
    Param::query(
        "since",
        false,
        "ISO-8601 date or date-time (no offset: UTC); calls at or after it.",
    ),
    Param::query(
        "until",
        false,
        "ISO-8601 date or date-time; calls before it (a date alone: that day included).",
    ),
    Param::query(
        "group_by",
        false,
        "`day` (default), `user`, `model`, `node` or `ws`.",
    ),
    Param::query("limit", true, "Most rows (1..1000, default 100)."),
];

/// The report's OpenAPI operation (the console documents it; the node lists its account
/// routes in docs/api.md).
pub const USAGE_API_ROUTE: ApiRoute = ApiRoute::get("/v1/api/admin/usage", "usage")
    .summary("Model usage (tokens, tool calls, calls) over a time range, in total and grouped")
    .params(&USAGE_PARAMS)
    .json::<UsageReply>()
    .errors(&[400, 503]);

/// Summed counts of a set of model calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct UsageCounts {
    pub prompt_tokens: i64,
    pub completion_tokens: i64,
    /// Tool calls the model requested.
    pub tool_calls: i64,
    pub cache_creation_tokens: i64,
    pub cache_read_tokens: i64,
    /// Model calls.
    pub calls: i64,
}

impl From<UsageTotals> for UsageCounts {
    fn from(t: UsageTotals) -> Self {
        Self {
            prompt_tokens: t.prompt_tokens,
            completion_tokens: t.completion_tokens,
            tool_calls: t.tool_calls,
            cache_creation_tokens: t.cache_creation_tokens,
            cache_read_tokens: t.cache_read_tokens,
            calls: t.calls,
        }
    }
}

/// One group of the report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct UsageRowView {
    /// The day (`YYYY-MM-DD`, UTC), user id, model alias, node id or workstream id; `""`
    /// for calls without one (a workstream with no known owner).
    pub key: String,
    #[serde(flatten)]
    pub counts: UsageCounts,
}

/// `GET /v1/api/admin/usage`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct UsageReply {
    /// `day`, `user`, `model`, `node` or `ws`.
    pub group_by: String,
    /// The range as applied (store timestamps, UTC); `null`: open.
    pub since: Option<String>,
    pub until: Option<String>,
    pub totals: UsageCounts,
    /// Days newest first; other groups most tokens first.
    pub rows: Vec<UsageRowView>,
}

/// Reads the query parameters; the 400 names the parameter that is wrong.
pub fn parse_usage_query(params: &HashMap<String, String>) -> Result<UsageQuery, AccountsError> {
    let given = |name: &str| params.get(name).map(|v| v.trim()).filter(|v| !v.is_empty());
    let group_by = match given("group_by") {
        None => UsageGroup::Day,
        Some(name) => UsageGroup::parse(name).ok_or_else(|| {
            let names: Vec<&str> = UsageGroup::ALL.iter().map(|g| g.as_str()).collect();
            AccountsError::BadRequest(format!(
                "group_by must be one of: {} (got '{name}')",
                names.join(", ")
            ))
        })?,
    };
    let limit = match given("limit") {
        None => USAGE_DEFAULT_LIMIT,
        Some(v) => v
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=USAGE_LIMIT).contains(n))
            .ok_or_else(|| {
                AccountsError::BadRequest(format!("limit must be an integer 1..{USAGE_LIMIT}"))
            })?,
    };
    let since = given("since")
        .map(|v| instant("since", v, false))
        .transpose()?;
    let until = given("until")
        .map(|v| instant("until", v, true))
        .transpose()?;
    if let (Some(s), Some(u)) = (&since, &until)
        && s >= u
    {
        return Err(AccountsError::BadRequest(
            "since must be before until".into(),
        ));
    }
    Ok(UsageQuery {
        since,
        until,
        group_by,
        limit,
    })
}

/// `text` as a store timestamp; a date alone as the end of a range is the next midnight
/// (the day included).
fn instant(name: &str, text: &str, end: bool) -> Result<String, AccountsError> {
    let at = timestamp::parse(text).ok_or_else(|| {
        AccountsError::BadRequest(format!(
            "{name} must be an ISO-8601 date or date-time, e.g. 2026-11-30 or \
             2026-11-30T08:00:00Z (got '{text}')"
        ))
    })?;
    let date_only = !text.contains(['T', ' ']);
    let at = if end && date_only {
        at + Duration::from_secs(86_400)
    } else {
        at
    };
    Ok(timestamp::format_system_time(at))
}

impl UsageReply {
    pub fn new(query: &UsageQuery, report: UsageReport) -> Self {
        Self {
            group_by: query.group_by.as_str().to_string(),
            since: query.since.clone(),
            until: query.until.clone(),
            totals: report.totals.into(),
            rows: report
                .rows
                .into_iter()
                .map(|r| UsageRowView {
                    key: r.key,
                    counts: r.totals.into(),
                })
                .collect(),
        }
    }
}

/// `GET /v1/api/admin/usage`.
pub async fn usage_report<S: AccountsHost>(
    State(host): State<Arc<S>>,
    Query(params): Query<HashMap<String, String>>,
) -> Result<Json<UsageReply>, AccountsError> {
    let query = parse_usage_query(&params)?;
    let store = store_of(&*host)?;
    let report = store
        .usage_report(query.clone())
        .await
        .map_err(AccountsError::storage)?;
    Ok(Json(UsageReply::new(&query, report)))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(pairs: &[(&str, &str)]) -> Result<UsageQuery, AccountsError> {
        let params = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        parse_usage_query(&params)
    }

    fn bad(pairs: &[(&str, &str)], naming: &str) {
        match parse(pairs) {
            Err(AccountsError::BadRequest(m)) => assert!(m.contains(naming), "{m}"),
            other => panic!("{pairs:?}: {other:?}"),
        }
    }

    #[test]
    fn defaults() {
        let q = parse(&[]).unwrap();
        assert_eq!(q.group_by, UsageGroup::Day);
        assert_eq!(q.limit, USAGE_DEFAULT_LIMIT);
        assert_eq!((q.since, q.until), (None, None));
    }

    #[test]
    fn ranges_in_store_form() {
        let q = parse(&[
            ("since", "2026-11-30T08:00:00+02:00"),
            ("until", "2026-12-01"),
            ("group_by", "model"),
            ("limit", "5"),
        ])
        .unwrap();
        assert_eq!(q.since.as_deref(), Some("2026-11-30T06:00:00.000000+00:00"));
        // A date alone as `until` includes that day.
        assert_eq!(q.until.as_deref(), Some("2026-12-02T00:00:00.000000+00:00"));
        assert_eq!(q.group_by, UsageGroup::Model);
        assert_eq!(q.limit, 5);
        let q = parse(&[("since", "2026-11-30")]).unwrap();
        assert_eq!(q.since.as_deref(), Some("2026-11-30T00:00:00.000000+00:00"));
    }

    #[test]
    fn bad_parameters_are_named() {
        bad(&[("group_by", "week")], "group_by");
        bad(&[("limit", "0")], "limit");
        bad(&[("limit", "1001")], "limit");
        bad(&[("limit", "ten")], "limit");
        bad(&[("since", "yesterday")], "since");
        bad(&[("until", "2026-13-01")], "until");
        bad(
            &[("since", "2026-12-02"), ("until", "2026-12-01T00:00:00Z")],
            "before",
        );
    }
}

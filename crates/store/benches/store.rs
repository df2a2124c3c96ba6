//! Store benchmark: sustained message writes through the batching [`Writer`] and full-text
//! search latency over a large history, on SQLite (temp file) and PostgreSQL (a fresh
//! database on 127.0.0.1:5432 as user `postgres`, dropped afterwards).
//!
//! `cargo bench -p turnstone-store --bench store` passes `--bench` and runs the full size
//! (1,000,000 messages per backend; `TURNSTONE_BENCH_MESSAGES` overrides it). Without
//! `--bench` (as under `cargo test --benches`) it runs a smoke size, so CI exercises the code.
//! `TURNSTONE_BENCH_BACKENDS=sqlite` (or `postgresql`) runs one backend only.
//!
//! Baselines measured in the same run, so the results are ratios as well as absolutes:
//! the message generator alone; `Store::write_batch` called directly with the writer's batch
//! size (no queue, no task); `recent_messages(20)` (an index scan through the same store
//! plumbing, no full-text work); `SELECT count(*)` over the table.
//!
//! PostgreSQL indexes search in the background (`search_indexer.rs`), so its part also
//! reports the indexer: the backlog when the writes end, one search over that backlog, and
//! how long the indexer takes to catch up (searches are timed after it has). Its physical
//! bounds: server-side `INSERT … SELECT` of the first `baseline` messages into a copy of the
//! table without search columns, with a generated `to_tsvector` column, and with that
//! column's GIN index as well.

use std::error::Error;
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use sqlx::Connection;
use sqlx::postgres::PgConnection;
use tokio::time::Instant;
use turnstone_store::{NewMessage, Store, StoreConfig, WriteOp, Writer, WriterConfig};

type BenchResult<T> = Result<T, Box<dyn Error + Send + Sync>>;

const PG_SERVER: &str = "postgres://postgres@127.0.0.1:5432";
/// Distinct words of the generated text.
const VOCAB_SIZE: usize = 4_000;
/// Zipf exponent of word frequencies (natural text is close to 1).
const ZIPF_S: f64 = 1.0;
/// Sessions writing at the same time; each writes a turn of `TURN_ROWS` rows in a row.
const LIVE_SESSIONS: usize = 64;
const TURN_ROWS: usize = 8;
/// Rows a session writes before it is replaced by a new one.
const SESSION_ROWS: usize = 1_000;
/// Unique words planted at evenly spaced messages (exactly one hit each).
const NEEDLES: usize = 10;
/// The search tool's default limit.
const SEARCH_LIMIT: usize = 20;

#[derive(Debug, Clone, Copy)]
struct Sizes {
    messages: usize,
    baseline_messages: usize,
    queries_per_class: usize,
}

impl Sizes {
    fn from_args() -> (Self, bool) {
        let full = std::env::args().any(|a| a == "--bench");
        if !full {
            return (
                Self {
                    messages: 3_000,
                    baseline_messages: 1_000,
                    queries_per_class: 4,
                },
                false,
            );
        }
        let messages = std::env::var("TURNSTONE_BENCH_MESSAGES")
            .ok()
            .and_then(|v| v.replace('_', "").parse().ok())
            .unwrap_or(1_000_000usize)
            .max(NEEDLES * 10);
        (
            Self {
                messages,
                baseline_messages: (messages / 10).max(1_000),
                queries_per_class: 34,
            },
            true,
        )
    }
}

// --- the corpus ------------------------------------------------------------------------------

/// Deterministic synthetic chat text: Zipf-distributed pseudo-words, 50–500 chars a message.
struct Corpus {
    words: Vec<String>,
    /// Cumulative Zipf weights, normalised to end at 1.0.
    cdf: Vec<f64>,
    needle_every: usize,
    rng: StdRng,
    /// Messages containing each word (document frequency), counted as generated.
    doc_freq: Vec<u32>,
    last_seen: Vec<usize>,
    produced: usize,
}

const SYLLABLES_C: &[u8] = b"bdfgklmnprstvz";
const SYLLABLES_V: &[u8] = b"aeiou";

/// A pronounceable word for `rank` (0-based): two syllables for the 1,000 most frequent
/// words, three for the rest, so frequent words are short, as in real text.
fn word_for(rank: usize) -> String {
    let n = SYLLABLES_C.len() * SYLLABLES_V.len();
    let syllables = if rank < 1_000 { 2 } else { 3 };
    let mut k = rank;
    let mut out = String::with_capacity(syllables * 2);
    for _ in 0..syllables {
        let s = k % n;
        k /= n;
        out.push(char::from(SYLLABLES_C[s / SYLLABLES_V.len()]));
        out.push(char::from(SYLLABLES_V[s % SYLLABLES_V.len()]));
    }
    out
}

fn needle_word(k: usize) -> String {
    format!("needle{k}q")
}

/// A word shaped like the vocabulary but never generated.
fn absent_word(k: usize) -> String {
    format!("{}x", word_for(VOCAB_SIZE + k))
}

impl Corpus {
    fn new(seed: u64, messages: usize) -> Self {
        let mut cdf = Vec::with_capacity(VOCAB_SIZE);
        let mut acc = 0.0;
        for rank in 1..=VOCAB_SIZE {
            acc += 1.0 / (rank as f64).powf(ZIPF_S);
            cdf.push(acc);
        }
        for c in &mut cdf {
            *c /= acc;
        }
        Self {
            words: (0..VOCAB_SIZE).map(word_for).collect(),
            cdf,
            needle_every: (messages / NEEDLES).max(1),
            rng: StdRng::seed_from_u64(seed),
            doc_freq: vec![0; VOCAB_SIZE],
            last_seen: vec![usize::MAX; VOCAB_SIZE],
            produced: 0,
        }
    }

    fn sample_rank(&mut self) -> usize {
        let u: f64 = self.rng.random();
        self.cdf.partition_point(|&c| c < u).min(VOCAB_SIZE - 1)
    }

    /// The next message: session, role and content as a node would write them.
    fn next_message(&mut self) -> NewMessage {
        let i = self.produced;
        self.produced += 1;
        let target = self.rng.random_range(50..=500);
        let mut text = String::with_capacity(target + 16);
        if i.is_multiple_of(self.needle_every) && i / self.needle_every < NEEDLES {
            text.push_str(&needle_word(i / self.needle_every));
        }
        let mut sentence = 0usize;
        while text.len() < target {
            let rank = self.sample_rank();
            if self.last_seen[rank] != i {
                self.last_seen[rank] = i;
                self.doc_freq[rank] += 1;
            }
            if !text.is_empty() {
                text.push(if sentence > 0 && sentence.is_multiple_of(12) {
                    '\n'
                } else {
                    ' '
                });
            }
            text.push_str(&self.words[rank]);
            sentence += 1;
            if sentence % 12 == 11 {
                text.push('.');
            }
        }
        // Sessions: LIVE_SESSIONS at a time, each writing turns of TURN_ROWS rows.
        let turn = i / TURN_ROWS;
        let slot = turn % LIVE_SESSIONS;
        let generation = i / (LIVE_SESSIONS * SESSION_ROWS);
        let ws = format!("{:032x}", generation * LIVE_SESSIONS + slot);
        match i % TURN_ROWS {
            0 => NewMessage::user(&ws, text),
            r if r == TURN_ROWS - 1 => NewMessage::assistant(&ws, Some(text)),
            r if r % 2 == 1 => NewMessage::assistant(&ws, Some(text)),
            _ => NewMessage::tool_result(&ws, &format!("call_{i}"), Some("bash"), text),
        }
    }

    /// Share of messages containing the word of `rank`, as generated so far.
    fn share(&self, rank: usize) -> f64 {
        f64::from(self.doc_freq[rank]) / self.produced.max(1) as f64
    }
}

// --- backends ----------------------------------------------------------------------------------

enum Target {
    Sqlite { dir: tempfile::TempDir },
    Postgres { name: String },
}

impl Target {
    async fn new_sqlite() -> BenchResult<Self> {
        Ok(Self::Sqlite {
            dir: tempfile::tempdir()?,
        })
    }

    async fn new_postgres(tag: &str) -> BenchResult<Self> {
        let name = format!("turnstone_bench_{tag}_{:08x}", rand::random::<u32>());
        let mut admin = PgConnection::connect(&format!("{PG_SERVER}/postgres"))
            .await
            .map_err(|e| {
                format!("the benchmark needs PostgreSQL on 127.0.0.1:5432 (user postgres): {e}")
            })?;
        sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {name}")))
            .execute(&mut admin)
            .await?;
        admin.close().await?;
        Ok(Self::Postgres { name })
    }

    fn config(&self) -> StoreConfig {
        match self {
            Self::Sqlite { dir } => StoreConfig::sqlite(self.sqlite_path(dir.path())),
            Self::Postgres { name } => StoreConfig::postgres(
                format!("{PG_SERVER}/{name}"),
                turnstone_store::DEFAULT_POOL_SIZE,
            ),
        }
    }

    fn sqlite_path(&self, dir: &Path) -> std::path::PathBuf {
        dir.join("bench.db")
    }

    /// Runs one administrative statement on the target database, returns the first column of
    /// the first row as text (if any), and the time it took.
    async fn admin_query(&self, sql: &str) -> BenchResult<(Option<i64>, Duration)> {
        match self {
            Self::Sqlite { dir } => {
                let opts = sqlx::sqlite::SqliteConnectOptions::new()
                    .filename(self.sqlite_path(dir.path()));
                let mut conn = sqlx::SqliteConnection::connect_with(&opts).await?;
                let start = Instant::now();
                let v: Option<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_string()))
                    .fetch_optional(&mut conn)
                    .await?;
                let took = start.elapsed();
                conn.close().await?;
                Ok((v, took))
            }
            Self::Postgres { name } => {
                let mut conn = PgConnection::connect(&format!("{PG_SERVER}/{name}")).await?;
                let start = Instant::now();
                let v: Option<i64> = sqlx::query_scalar(sqlx::AssertSqlSafe(sql.to_string()))
                    .fetch_optional(&mut conn)
                    .await?;
                let took = start.elapsed();
                conn.close().await?;
                Ok((v, took))
            }
        }
    }

    async fn size_bytes(&self) -> BenchResult<u64> {
        match self {
            Self::Sqlite { dir } => {
                let mut total = 0;
                for entry in std::fs::read_dir(dir.path())? {
                    total += entry?.metadata()?.len();
                }
                Ok(total)
            }
            Self::Postgres { .. } => {
                let (v, _) = self
                    .admin_query("SELECT pg_database_size(current_database())")
                    .await?;
                Ok(v.and_then(|v| u64::try_from(v).ok()).unwrap_or(0))
            }
        }
    }

    /// Drops the PostgreSQL database (the SQLite temp dir goes with the value).
    async fn cleanup(self) {
        if let Self::Postgres { name } = self
            && let Ok(mut admin) = PgConnection::connect(&format!("{PG_SERVER}/postgres")).await
        {
            let sql = format!("DROP DATABASE IF EXISTS {name} WITH (FORCE)");
            if let Err(e) = sqlx::raw_sql(sqlx::AssertSqlSafe(sql))
                .execute(&mut admin)
                .await
            {
                eprintln!("could not drop {name}: {e}");
            }
            let _ = admin.close().await;
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Sqlite,
    Postgres,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Self::Sqlite => "SQLite",
            Self::Postgres => "PostgreSQL",
        }
    }

    async fn fresh(self, tag: &str) -> BenchResult<Target> {
        match self {
            Self::Sqlite => Target::new_sqlite().await,
            Self::Postgres => Target::new_postgres(tag).await,
        }
    }
}

// --- measurements ------------------------------------------------------------------------------

fn rate(n: usize, d: Duration) -> f64 {
    n as f64 / d.as_secs_f64().max(1e-9)
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[idx.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

/// Generator alone: the cost floor of producing the messages.
fn generator_rate(n: usize) -> f64 {
    let mut corpus = Corpus::new(1, n);
    let start = Instant::now();
    let mut bytes = 0usize;
    for _ in 0..n {
        bytes += corpus.next_message().content.map_or(0, |c| c.len());
    }
    let took = start.elapsed();
    std::hint::black_box(bytes);
    rate(n, took)
}

/// `Store::write_batch` called directly with the writer's batch size; only the database time
/// is counted (generation happens between the timed calls).
async fn direct_rate(kind: Kind, n: usize) -> BenchResult<f64> {
    let target = kind.fresh("direct").await?;
    let result = async {
        let store = turnstone_store::connect(&target.config()).await?;
        let mut corpus = Corpus::new(2, n);
        let batch_size = WriterConfig::default().max_batch;
        let mut db_time = Duration::ZERO;
        let mut written = 0;
        while written < n {
            let ops: Vec<WriteOp> = (0..batch_size.min(n - written))
                .map(|_| WriteOp::Message(corpus.next_message()))
                .collect();
            let start = Instant::now();
            store.write_batch(&ops).await?;
            db_time += start.elapsed();
            written += ops.len();
        }
        store.close().await;
        BenchResult::Ok(rate(n, db_time))
    }
    .await;
    target.cleanup().await;
    result
}

struct WriteReport {
    rate_all: f64,
    rate_first: f64,
    first_n: usize,
    batches: u64,
    failed: u64,
}

/// Writes `n` messages through the writer from one producer task (back-pressure via
/// `Writer::write`), the time including the final flush.
async fn writer_run(
    store: &Arc<dyn Store>,
    corpus: &mut Corpus,
    n: usize,
    first_n: usize,
) -> BenchResult<WriteReport> {
    let writer = Writer::spawn(store.clone(), WriterConfig::default());
    let start = Instant::now();
    let mut first = None;
    for i in 0..n {
        writer
            .write(WriteOp::Message(corpus.next_message()))
            .await?;
        if i + 1 == first_n {
            // Committed, not merely queued: flush before reading the clock.
            writer.flush().await?;
            first = Some(start.elapsed());
        }
        if (i + 1).is_multiple_of(100_000) {
            eprintln!(
                "  … {} messages queued, {:.0} s",
                i + 1,
                start.elapsed().as_secs_f64()
            );
        }
    }
    let counters = writer.shutdown().await;
    let took = start.elapsed();
    if counters.written != n as u64 {
        return Err(format!("writer wrote {} of {n}: {counters:?}", counters.written).into());
    }
    Ok(WriteReport {
        rate_all: rate(n, took),
        rate_first: first.map_or(0.0, |d| rate(first_n, d)),
        first_n,
        batches: counters.batches,
        failed: counters.failed + counters.dropped,
    })
}

struct IndexReport {
    /// Messages committed but not yet indexed when the writer finished.
    backlog: i64,
    /// One needle search right then (it stems the whole backlog on the fly).
    backlog_search: Duration,
    /// Still pending after that search; the catch-up is timed from here.
    backlog_after_search: i64,
    /// From the end of that search until nothing is pending (nothing else running).
    catch_up: Duration,
}

/// PostgreSQL: the search indexer's backlog at the end of the writes, one search over it,
/// and the indexer's catch-up from there.
async fn index_catch_up(target: &Target, store: &Arc<dyn Store>) -> BenchResult<IndexReport> {
    const BACKLOG_SQL: &str = "SELECT count(*) FROM conversation_search_pending";
    let (backlog, _) = target.admin_query(BACKLOG_SQL).await?;
    let search_start = Instant::now();
    let hits = store.search(&needle_word(0), SEARCH_LIMIT).await?;
    let backlog_search = search_start.elapsed();
    if hits.len() != 1 {
        return Err(format!("needle 0 during the backlog: {} hits", hits.len()).into());
    }
    let start = Instant::now();
    let (backlog_after_search, _) = target.admin_query(BACKLOG_SQL).await?;
    loop {
        let (left, _) = target.admin_query(BACKLOG_SQL).await?;
        if left.unwrap_or(0) == 0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Ok(IndexReport {
        backlog: backlog.unwrap_or(0),
        backlog_search,
        backlog_after_search: backlog_after_search.unwrap_or(0),
        catch_up: start.elapsed(),
    })
}

/// PostgreSQL's physical bounds: server-side `INSERT … SELECT` of the first `rows` messages
/// into copies of the table without search columns, with a generated `to_tsvector` column,
/// and with its GIN index too (the pre-0014 write path).
async fn insert_bounds(target: &Target, rows: usize) -> BenchResult<Vec<(&'static str, Duration)>> {
    const TSV: &str = ", content_tsv TSVECTOR GENERATED ALWAYS AS \
                       (to_tsvector('english', COALESCE(content, ''))) STORED";
    const COLUMNS: &str =
        "ws_id, timestamp, role, content, tool_name, tool_args, tool_call_id, provider_data";
    let copies = [
        ("no search columns", "bound_plain", "", ""),
        ("+ generated tsvector column", "bound_tsv", TSV, ""),
        (
            "+ its GIN index (the write path before 0014)",
            "bound_gin",
            TSV,
            "CREATE INDEX ON bound_gin USING GIN (content_tsv)",
        ),
    ];
    let mut out = Vec::new();
    for (name, table, extra_column, index) in copies {
        target
            .admin_query(&format!(
                "CREATE TABLE {table} (LIKE conversations INCLUDING ALL{extra_column})"
            ))
            .await?;
        if !index.is_empty() {
            target.admin_query(index).await?;
        }
        let (_, took) = target
            .admin_query(&format!(
                "INSERT INTO {table} ({COLUMNS}) \
                 SELECT {COLUMNS} FROM conversations ORDER BY id LIMIT {rows}"
            ))
            .await?;
        out.push((name, took));
    }
    Ok(out)
}

struct QueryClass {
    name: &'static str,
    queries: Vec<String>,
    /// Median share of messages matching, from the generator's counts.
    share: f64,
}

fn query_classes(corpus: &Corpus, per_class: usize) -> Vec<QueryClass> {
    let pick = |lo: usize, hi: usize, k: usize| lo + (k * 7919) % (hi - lo);
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v.get(v.len() / 2).copied().unwrap_or(0.0)
    };
    let single = |name, lo, hi| {
        let ranks: Vec<usize> = (0..per_class).map(|k| pick(lo, hi, k)).collect();
        QueryClass {
            name,
            queries: ranks.iter().map(|&r| corpus.words[r].clone()).collect(),
            share: median(ranks.iter().map(|&r| corpus.share(r)).collect()),
        }
    };
    let pairs: Vec<(usize, usize)> = (0..per_class)
        .map(|k| (pick(0, 10, k), pick(2_000, VOCAB_SIZE, k)))
        .collect();
    vec![
        QueryClass {
            name: "needle (1 message)",
            queries: (0..per_class).map(|k| needle_word(k % NEEDLES)).collect(),
            share: 1.0 / corpus.produced.max(1) as f64,
        },
        QueryClass {
            name: "absent word",
            queries: (0..per_class).map(absent_word).collect(),
            share: 0.0,
        },
        single("rare (rank 2000-4000)", 2_000, VOCAB_SIZE),
        single("medium (rank 50-200)", 50, 200),
        single("common (rank 1-10)", 0, 10),
        QueryClass {
            name: "common AND rare",
            queries: pairs
                .iter()
                .map(|&(a, b)| format!("{} {}", corpus.words[a], corpus.words[b]))
                .collect(),
            share: median(
                pairs
                    .iter()
                    .map(|&(a, b)| corpus.share(a) * corpus.share(b))
                    .collect(),
            ),
        },
    ]
}

struct Latency {
    p50: Duration,
    p95: Duration,
    p99: Duration,
    max: Duration,
}

impl Latency {
    fn of(mut v: Vec<Duration>) -> Self {
        v.sort();
        Self {
            p50: percentile(&v, 0.50),
            p95: percentile(&v, 0.95),
            p99: percentile(&v, 0.99),
            max: v.last().copied().unwrap_or_default(),
        }
    }
}

// --- one backend -------------------------------------------------------------------------------

async fn bench_backend(kind: Kind, sizes: Sizes) -> BenchResult<()> {
    println!("\n## {} — {} messages", kind.name(), sizes.messages);
    let direct = direct_rate(kind, sizes.baseline_messages).await?;

    let target = kind.fresh("main").await?;
    let result = bench_main(kind, sizes, &target, direct).await;
    target.cleanup().await;
    result
}

async fn bench_main(kind: Kind, sizes: Sizes, target: &Target, direct: f64) -> BenchResult<()> {
    let store = turnstone_store::connect(&target.config()).await?;
    let mut corpus = Corpus::new(3, sizes.messages);
    let first_n = sizes.baseline_messages.min(sizes.messages);
    let w = writer_run(&store, &mut corpus, sizes.messages, first_n).await?;
    if w.failed > 0 {
        return Err(format!("{} writes failed or dropped", w.failed).into());
    }
    let indexing = if kind == Kind::Postgres {
        Some(index_catch_up(target, &store).await?)
    } else {
        None
    };
    let analyze = if kind == Kind::Postgres {
        let (_, took) = target.admin_query("ANALYZE").await?;
        Some(took)
    } else {
        None
    };

    // Sanity: every needle is found exactly once.
    for k in 0..NEEDLES.min(sizes.messages) {
        let hits = store.search(&needle_word(k), SEARCH_LIMIT).await?;
        if hits.len() != 1 {
            return Err(format!("needle {k}: {} hits", hits.len()).into());
        }
    }

    let classes = query_classes(&corpus, sizes.queries_per_class);
    // Interleave the classes so load changes affect them alike.
    let mut order: Vec<(usize, usize)> = (0..sizes.queries_per_class)
        .flat_map(|q| (0..classes.len()).map(move |c| (c, q)))
        .collect();
    let mut rng = StdRng::seed_from_u64(4);
    for i in (1..order.len()).rev() {
        order.swap(i, rng.random_range(0..=i));
    }
    // Warm-up: connections and statement caches.
    for c in &classes {
        if let Some(q) = c.queries.first() {
            store.search(q, SEARCH_LIMIT).await?;
        }
    }
    let mut per_class: Vec<Vec<Duration>> = vec![Vec::new(); classes.len()];
    let mut hits_per_class: Vec<usize> = vec![0; classes.len()];
    for &(c, q) in &order {
        let start = Instant::now();
        let hits = store.search(&classes[c].queries[q], SEARCH_LIMIT).await?;
        per_class[c].push(start.elapsed());
        hits_per_class[c] += hits.len();
    }
    let mut recent = Vec::new();
    for _ in 0..sizes.queries_per_class * 2 {
        let start = Instant::now();
        std::hint::black_box(store.recent_messages(SEARCH_LIMIT).await?);
        recent.push(start.elapsed());
    }
    let (count, count_took) = target
        .admin_query("SELECT count(*) FROM conversations")
        .await?;
    let size = target.size_bytes().await?;
    store.close().await;
    let bounds = if kind == Kind::Postgres {
        Some(insert_bounds(target, first_n).await?)
    } else {
        None
    };

    // --- report ---
    println!("\n| writes | messages/s | vs direct |");
    println!("|---|---|---|");
    println!(
        "| baseline: `write_batch` direct, {} rows per call, {} msgs, fresh db | {:.0} | 1.00 |",
        WriterConfig::default().max_batch,
        sizes.baseline_messages,
        direct
    );
    println!(
        "| Writer, first {} msgs (fresh db) | {:.0} | {:.2} |",
        w.first_n,
        w.rate_first,
        w.rate_first / direct
    );
    println!(
        "| **Writer, all {} msgs** ({} batches, avg {:.0} rows) | **{:.0}** | {:.2} |",
        sizes.messages,
        w.batches,
        sizes.messages as f64 / w.batches.max(1) as f64,
        w.rate_all,
        w.rate_all / direct
    );
    if let Some(ix) = &indexing {
        println!(
            "\nsearch indexer: backlog {} rows when the writes ended ({:.1} % of the messages); \
             a needle search over it took {}; then {} rows left, indexed in {:.1} s \
             ({:.0} rows/s, nothing else running)",
            ix.backlog,
            ix.backlog as f64 * 100.0 / sizes.messages as f64,
            ms(ix.backlog_search),
            ix.backlog_after_search,
            ix.catch_up.as_secs_f64(),
            rate(
                usize::try_from(ix.backlog_after_search).unwrap_or(0),
                ix.catch_up
            ),
        );
    }
    if let Some(bounds) = &bounds {
        let plain = bounds.first().map_or(Duration::ZERO, |b| b.1);
        println!("\n| server-side `INSERT … SELECT` of {first_n} rows | rows/s | vs plain |");
        println!("|---|---|---|");
        for (name, took) in bounds {
            println!(
                "| {name} | {:.0} | {:.2} |",
                rate(first_n, *took),
                plain.as_secs_f64() / took.as_secs_f64().max(1e-9)
            );
        }
    }
    if let Some(took) = analyze {
        println!("\nANALYZE took {}", ms(took));
    }
    println!(
        "\n`SELECT count(*)` = {} in {}; database size {:.0} MiB",
        count.unwrap_or(0),
        ms(count_took),
        size as f64 / (1024.0 * 1024.0)
    );
    let rl = Latency::of(recent);
    println!(
        "\n| search (limit {SEARCH_LIMIT}) | queries | match share (median) | avg hits | p50 | p95 | p99 | max |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    println!(
        "| baseline: `recent_messages` | {} | — | {SEARCH_LIMIT} | {} | {} | {} | {} |",
        sizes.queries_per_class * 2,
        ms(rl.p50),
        ms(rl.p95),
        ms(rl.p99),
        ms(rl.max)
    );
    let mut all = Vec::new();
    for (i, class) in classes.iter().enumerate() {
        let n = per_class[i].len();
        all.extend_from_slice(&per_class[i]);
        let l = Latency::of(per_class[i].clone());
        println!(
            "| {} | {n} | {:.4} % | {:.1} | {} | {} | {} | {} |",
            class.name,
            class.share * 100.0,
            hits_per_class[i] as f64 / n.max(1) as f64,
            ms(l.p50),
            ms(l.p95),
            ms(l.p99),
            ms(l.max)
        );
    }
    let total = all.len();
    let l = Latency::of(all);
    println!(
        "| **all classes** | {total} | — | — | **{}** | {} | {} | {} |",
        ms(l.p50),
        ms(l.p95),
        ms(l.p99),
        ms(l.max)
    );
    Ok(())
}

#[tokio::main]
async fn main() -> ExitCode {
    let (sizes, full) = Sizes::from_args();
    println!(
        "# turnstone-store benchmark ({}): {sizes:?}",
        if full { "full" } else { "smoke" }
    );
    println!(
        "generator alone: {:.0} messages/s",
        generator_rate(sizes.baseline_messages)
    );
    // `TURNSTONE_BENCH_BACKENDS=sqlite` (or `postgres`) runs one backend only.
    let only = std::env::var("TURNSTONE_BENCH_BACKENDS").unwrap_or_default();
    let mut ok = true;
    for kind in [Kind::Sqlite, Kind::Postgres] {
        if !only.is_empty()
            && !only
                .to_lowercase()
                .contains(kind.name().to_lowercase().as_str())
        {
            println!(
                "\n## {} — skipped (TURNSTONE_BENCH_BACKENDS={only})",
                kind.name()
            );
            continue;
        }
        if let Err(e) = bench_backend(kind, sizes).await {
            eprintln!("{} benchmark failed: {e}", kind.name());
            ok = false;
        }
    }
    if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}

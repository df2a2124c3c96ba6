//! The one error type of the store.

/// Everything that can go wrong in the store. Bad input is an error, never a panic.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The database driver failed (connection, I/O, constraint, SQL).
    #[error("database error: {0}")]
    Database(#[from] sqlx::Error),
    /// Applying the embedded migrations failed at start-up.
    #[error("migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    /// Could not reach the configured database at start-up.
    /// `target` names the backend (and the file for SQLite; never a URL, which may hold a
    /// password).
    #[error("cannot open {target}: {source}")]
    Connect {
        target: String,
        #[source]
        source: sqlx::Error,
    },
    /// No session, memory or approval matches.
    #[error("not found: {0}")]
    NotFound(String),
    /// An id prefix matches more than one session.
    #[error("ambiguous session prefix {prefix:?}: matches {matches} sessions")]
    Ambiguous { prefix: String, matches: i64 },
    /// The alias already names another session.
    #[error("alias {0:?} is already used by another session")]
    AliasTaken(String),
    /// The caller passed something the store cannot accept (empty name, bad enum value, ...).
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// A stored value could not be decoded (hand-edited or foreign database).
    #[error("corrupt stored value: {0}")]
    Corrupt(String),
    /// The batching writer's queue is full; the write was dropped and counted.
    #[error("write queue full: write dropped")]
    QueueFull,
    /// The batching writer has shut down; the write was dropped and counted.
    #[error("writer is shut down")]
    WriterClosed,
}

impl StoreError {
    /// Whether trying the same operation again later may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Database(e) | Self::Connect { source: e, .. } => {
                matches!(
                    e,
                    sqlx::Error::Io(_) | sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed
                ) || is_busy(e)
            }
            Self::QueueFull => true,
            _ => false,
        }
    }

    pub(crate) fn is_unique_violation(&self) -> bool {
        matches!(self, Self::Database(sqlx::Error::Database(e)) if e.is_unique_violation())
    }
}

fn is_busy(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::Database(db) => {
            // SQLITE_BUSY (5) / SQLITE_LOCKED (6); PostgreSQL serialization/deadlock.
            matches!(db.code().as_deref(), Some("5" | "6" | "40001" | "40P01"))
        }
        _ => false,
    }
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

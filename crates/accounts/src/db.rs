//! The storage flags of the node and the console (`--db-backend`, `--db-path`, `--db-url`,
//! `--db-pool-size`, each also `TURNSTONE_DB_*`; `TURNSTONE_DB_URL_FILE` through the
//! services' secret rule), and the store they name.

use std::path::PathBuf;

use turnstone_store::StoreConfig;

/// Flattened into a service's arguments.
#[derive(Debug, Clone, clap::Args)]
pub struct DbArgs {
    /// Storage backend: `sqlite` (default, one file) or `postgresql`.
    #[arg(long, env = "TURNSTONE_DB_BACKEND", default_value = "sqlite")]
    pub db_backend: String,
    /// SQLite file.
    #[arg(long, env = "TURNSTONE_DB_PATH", default_value = ".turnstone.db")]
    pub db_path: PathBuf,
    /// PostgreSQL URL (with `--db-backend postgresql`).
    #[arg(long, env = "TURNSTONE_DB_URL", hide_env_values = true)]
    pub db_url: Option<String>,
    /// PostgreSQL pool size.
    #[arg(long, env = "TURNSTONE_DB_POOL_SIZE", default_value_t = 2)]
    pub db_pool_size: u32,
}

impl DbArgs {
    /// The store these flags name; the error names the flag.
    pub fn store_config(&self) -> Result<StoreConfig, String> {
        match self.db_backend.as_str() {
            "sqlite" => Ok(StoreConfig::sqlite(&self.db_path)),
            "postgresql" | "postgres" => {
                let url = self.db_url.clone().ok_or_else(|| {
                    "--db-backend postgresql needs --db-url (or TURNSTONE_DB_URL / TURNSTONE_DB_URL_FILE)"
                        .to_string()
                })?;
                Ok(StoreConfig::postgres(url, self.db_pool_size))
            }
            other => Err(format!(
                "--db-backend {other}: expected sqlite or postgresql"
            )),
        }
    }

    /// What `--check-config` prints: the backend and where (never the URL, which may hold a
    /// password).
    pub fn display(&self) -> String {
        match self.db_backend.as_str() {
            "sqlite" => format!("sqlite {}", self.db_path.display()),
            other => format!("{other} (url redacted)"),
        }
    }
}

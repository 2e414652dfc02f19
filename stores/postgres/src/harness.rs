//! [`PostgresHarness`]: the conformance suite's harness for [`PostgresStore`] (feature
//! `conformance`).

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use reservation_conformance::{Capabilities, Harness, Settings};
use reservation_store::{ManualClock, StorageError};
use tokio::runtime::Runtime;

use crate::schema::quote;
use crate::{PostgresOptions, PostgresStore, Time};

/// The server the tests use: `RESERVATION_PG_URL`, or `postgres://postgres@127.0.0.1:5432/test`.
pub fn pg_url() -> String {
    std::env::var("RESERVATION_PG_URL").unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_owned())
}

/// Test schemas older than this are dropped by the next harness that connects: runs that ended
/// without dropping their own (a test binary keeps its harness in a static).
const STALE: Duration = Duration::from_secs(6 * 3600);

/// `PostgresStore`s on one database, in a schema of this harness's own
/// (`reservation_test_<seconds>_<process>_<n>`), so that runs never collide; dropped with the
/// harness. Every store the suite asks for shares one pool of up to 16 connections, each with
/// the suite's clock. Durable: [`Harness::reopen`] closes the store's pool and connects a new one
/// to the same tables, as a process restart would.
pub struct PostgresHarness {
    runtime: Runtime,
    url: String,
    options: PostgresOptions,
    base: PostgresStore<ManualClock>,
    settings: Settings,
}

impl PostgresHarness {
    /// A harness on the server at `url`, in a new schema; `options.schema` and
    /// `options.application_name` are replaced by the harness's own.
    pub fn connect(url: &str, options: PostgresOptions) -> Result<Self, StorageError> {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| StorageError::with_source("a tokio runtime", e))?;
        let secs = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
        let schema = format!("reservation_test_{secs}_{}_{}", std::process::id(), N.fetch_add(1, Ordering::Relaxed));
        let options = options.with_application_name(schema.clone()).with_schema(schema);
        let base = runtime.block_on(async {
            let store = PostgresStore::connect(
                url,
                Time::Local(ManualClock::new(reservation_conformance::START)),
                options.clone(),
            )
            .await?;
            drop_stale_schemas(&store, secs).await;
            Ok::<_, StorageError>(store)
        })?;
        let settings = Settings::default().with_cases(300).with_concurrency(8, 3_000, 10_000);
        Ok(PostgresHarness { runtime, url: url.to_owned(), options, base, settings })
    }

    /// This harness with `settings` for the randomized checks.
    pub fn with_settings(mut self, settings: Settings) -> Self {
        self.settings = settings;
        self
    }

    /// The runtime the stores' futures run on.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// The server's URL.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The options of the harness's stores: its schema, its connections' `application_name`.
    pub fn options(&self) -> &PostgresOptions {
        &self.options
    }

    /// A store on the harness's pool and tables that decides expiry by `time`.
    pub fn store_with<C>(&self, time: Time<C>) -> PostgresStore<C> {
        self.base.with_time(time)
    }
}

/// Drops the test schemas older than [`STALE`]; best effort.
async fn drop_stale_schemas<C: reservation_store::Clock>(store: &PostgresStore<C>, now_secs: u64) {
    let Ok(client) = store.client().await else { return };
    let Ok(rows) =
        client.query("SELECT nspname::text FROM pg_namespace WHERE nspname LIKE 'reservation\\_test\\_%'", &[]).await
    else {
        return;
    };
    for row in rows {
        let name: String = row.get(0);
        let secs = name.split('_').nth(2).and_then(|s| s.parse::<u64>().ok());
        if secs.is_some_and(|s| s.saturating_add(STALE.as_secs()) < now_secs) {
            let _ = client.batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", quote(&name))).await;
        }
    }
}

impl Drop for PostgresHarness {
    fn drop(&mut self) {
        let schema = quote(&self.options.schema);
        let base = &self.base;
        self.runtime.block_on(async {
            if let Ok(client) = base.client().await {
                let _ = client.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE")).await;
            }
            base.close();
        });
    }
}

impl Harness for PostgresHarness {
    type Store = PostgresStore<ManualClock>;

    fn store(&self, clock: ManualClock) -> Self::Store {
        self.base.with_time(Time::Local(clock))
    }

    fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::default().with_durable(true)
    }

    fn reopen(&self, store: Self::Store, clock: ManualClock) -> Option<Self::Store> {
        // The first store shares the harness's pool: dropping the handle, not closing the pool,
        // is what a restarting process does to it; the new store has a pool of its own.
        drop(store);
        let reopened =
            self.runtime.block_on(PostgresStore::connect(&self.url, Time::Local(clock), self.options.clone()));
        Some(reopened.unwrap_or_else(|e| {
            panic!("reopening the PostgreSQL store failed: {}", reservation_store::error_chain(&e))
        }))
    }

    fn settings(&self) -> Settings {
        self.settings
    }
}

//! [`RedisHarness`]: the conformance suite's harness for [`RedisStore`] (feature `conformance`),
//! and [`AofServer`], a Redis server of its own that keeps everything on disk.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant as WallInstant};

use reservation_conformance::{Capabilities, Harness, START, Settings};
use reservation_store::{ManualClock, StorageError};
use tokio::runtime::Runtime;

use crate::{RedisOptions, RedisStore, Time};

/// The server the tests use: `RESERVATION_REDIS_URL`, or `redis://127.0.0.1:6379/`.
pub fn redis_url() -> String {
    std::env::var("RESERVATION_REDIS_URL").unwrap_or_else(|_| "redis://127.0.0.1:6379/".to_owned())
}

/// A `redis-server` of its own, in a temporary directory, on a free loopback port, with
/// `appendonly yes` and `appendfsync always`: every acknowledged write is on disk before the
/// answer, so a killed server restarts with all of them. Killed (by its process id) and its
/// directory removed when dropped. A [`RedisHarness::durable`] starts one, and hands it out by
/// [`RedisHarness::server`].
pub struct AofServer {
    port: u16,
    dir: PathBuf,
    child: Mutex<Option<Child>>,
}

impl AofServer {
    /// Starts a server (the `redis-server` on the `PATH`) and waits until it answers.
    fn start() -> Result<AofServer, StorageError> {
        let port = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| StorageError::with_source("a free loopback port", e))?
            .port();
        let dir = std::env::temp_dir().join(format!("reservation-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| StorageError::with_source("the server's directory", e))?;
        let server = AofServer { port, dir, child: Mutex::new(None) };
        server.spawn()?;
        Ok(server)
    }

    /// The server's URL.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    fn spawn(&self) -> Result<(), StorageError> {
        let child = Command::new("redis-server")
            .args(["--port", &self.port.to_string(), "--bind", "127.0.0.1", "--appendonly", "yes"])
            .args(["--appendfsync", "always", "--save", "", "--daemonize", "no"])
            .arg("--dir")
            .arg(&self.dir)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| StorageError::with_source("starting redis-server", e))?;
        *self.child.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some(child);
        let deadline = WallInstant::now() + Duration::from_secs(10);
        while WallInstant::now() < deadline {
            if self.answers() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        self.kill();
        Err(StorageError::new(format!("redis-server on port {} did not answer within 10 s", self.port)))
    }

    /// Whether the server answers `PING` with `PONG` and has loaded its data.
    fn answers(&self) -> bool {
        let Ok(mut stream) = TcpStream::connect(("127.0.0.1", self.port)) else { return false };
        let _ = stream.set_read_timeout(Some(Duration::from_millis(500)));
        let mut answer = [0u8; 7];
        stream.write_all(b"PING\r\n").is_ok() && stream.read_exact(&mut answer).is_ok() && &answer == b"+PONG\r\n"
    }

    fn kill(&self) {
        if let Some(mut child) = self.child.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Kills the server (SIGKILL: nothing is flushed at exit) and starts it again on the same
    /// port and directory, where it reloads its append-only file.
    pub fn restart(&self) -> Result<(), StorageError> {
        self.kill();
        self.spawn()
    }
}

impl Drop for AofServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `RedisStore`s on one server under a key prefix of this harness's own, so that runs never
/// collide; its keys are deleted when the harness is dropped. Every store the suite asks for
/// shares one pool of up to 16 connections, each with the suite's clock.
///
/// [`RedisHarness::connect`] uses a shared server, such as the one at [`redis_url`] (which, as
/// configured for the tests, keeps nothing on disk: not durable). [`RedisHarness::durable`]
/// starts an [`AofServer`] of its own and declares the durable capability: [`Harness::reopen`]
/// kills and restarts that server and connects a new pool, as a crash and a process restart
/// would.
pub struct RedisHarness {
    runtime: Runtime,
    url: String,
    options: RedisOptions,
    base: RedisStore<ManualClock>,
    settings: Settings,
    server: Option<AofServer>,
}

impl RedisHarness {
    /// A harness on a new [`AofServer`], durable.
    pub fn durable() -> Result<Self, StorageError> {
        let server = AofServer::start()?;
        let mut harness = Self::connect(&server.url(), RedisOptions::default())?;
        harness.server = Some(server);
        Ok(harness)
    }

    /// A harness on the server at `url`; `options.prefix` is replaced by the harness's own.
    pub fn connect(url: &str, options: RedisOptions) -> Result<Self, StorageError> {
        use std::sync::atomic::{AtomicU32, Ordering};
        static N: AtomicU32 = AtomicU32::new(0);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| StorageError::with_source("a tokio runtime", e))?;
        let prefix = format!(
            "rsv-test:{}:{}:{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed),
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos())
        );
        let options = options.with_prefix(prefix);
        let base = runtime.block_on(RedisStore::connect(url, Time::Local(ManualClock::new(START)), options.clone()))?;
        let settings = Settings::default().with_cases(300).with_concurrency(8, 3_000, 10_000);
        Ok(RedisHarness { runtime, url: url.to_owned(), options, base, settings, server: None })
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

    /// The options of the harness's stores: its key prefix.
    pub fn options(&self) -> &RedisOptions {
        &self.options
    }

    /// The harness's own server, if it runs one.
    pub fn server(&self) -> Option<&AofServer> {
        self.server.as_ref()
    }

    /// A store on the harness's pool and keys that decides expiry by `time`.
    pub fn store_with<C>(&self, time: Time<C>) -> RedisStore<C> {
        self.base.with_time(time)
    }
}

impl Drop for RedisHarness {
    fn drop(&mut self) {
        if self.server.is_some() {
            return;
        }
        // Deletes the harness's keys from the shared server; best effort.
        let pattern = format!("{}:*", self.options.prefix);
        let base = &self.base;
        self.runtime.block_on(async {
            let Ok(mut conn) = base.pool.get().await else { return };
            let mut cursor = 0u64;
            loop {
                let Ok((next, keys)): Result<(u64, Vec<Vec<u8>>), _> = redis::cmd("SCAN")
                    .arg(cursor)
                    .arg("MATCH")
                    .arg(&pattern)
                    .arg("COUNT")
                    .arg(1000)
                    .query_async(&mut *conn)
                    .await
                else {
                    return;
                };
                if !keys.is_empty() {
                    let _: Result<u64, _> = redis::cmd("UNLINK").arg(&keys).query_async(&mut *conn).await;
                }
                if next == 0 {
                    break;
                }
                cursor = next;
            }
            conn.keep();
        });
    }
}

impl Harness for RedisHarness {
    type Store = RedisStore<ManualClock>;

    fn store(&self, clock: ManualClock) -> Self::Store {
        self.base.with_time(Time::Local(clock))
    }

    fn block_on<F: std::future::Future>(&self, future: F) -> F::Output {
        self.runtime.block_on(future)
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::default().with_durable(self.server.is_some())
    }

    fn reopen(&self, store: Self::Store, clock: ManualClock) -> Option<Self::Store> {
        let server = self.server.as_ref()?;
        drop(store);
        server
            .restart()
            .unwrap_or_else(|e| panic!("restarting the Redis server failed: {}", reservation_store::error_chain(&e)));
        let reopened = self.runtime.block_on(RedisStore::connect(&self.url, Time::Local(clock), self.options.clone()));
        Some(reopened.unwrap_or_else(|e| {
            panic!("reconnecting to the restarted Redis server failed: {}", reservation_store::error_chain(&e))
        }))
    }

    fn settings(&self) -> Settings {
        self.settings
    }
}

//! `reservation`: the project's one command line.
//!
//! - `reservation check`, `reservation explore` and `reservation swarm [flags]`: the protocol's model
//!   (`reservation_model::cli`, the same flags as `reservation-model`).
//! - `reservation conform [memory|sqlite|postgres|redis|all]`: the whole conformance suite against
//!   the built-in stores.
//! - `reservation all`: the main job, the model check and then the suite against every built-in
//!   store; exits 0 only if everything holds.
#![deny(missing_docs)]

use std::process::ExitCode;
use std::time::Instant;

use reservation_conformance::sqlite::SqliteHarness;
use reservation_conformance::{MemoryHarness, Report, Settings, run_all};
use reservation_postgres::{PostgresHarness, PostgresOptions};
use reservation_redis::{RedisHarness, RedisOptions};

const USAGE: &str = "usage:
  reservation check [the flags of reservation-model check]
  reservation explore [the flags of reservation-model explore]
  reservation swarm [the flags of reservation-model swarm]
  reservation conform [memory|sqlite|postgres|redis|all]
  reservation conform --command \"ADAPTER COMMAND\" [--json]
  reservation serve
  reservation vectors --write DIR | --check DIR
  reservation all

check, explore and swarm are the protocol's model (reservation check --help lists their flags).
conform runs the whole conformance suite (every named check, the differential test and the
linearizability check) against the built-in stores: MemoryStore, SqliteStore, PostgresStore
(on the server at RESERVATION_PG_URL, by default postgres://postgres@127.0.0.1:5432/test, in a
schema of its own), RedisStore (on the server at RESERVATION_REDIS_URL, by default
redis://127.0.0.1:6379/, under a key prefix of its own; its durable check on a redis-server of
its own with an append-only file), or all of them (the default; a store whose server does not
answer is skipped, saying so, unless RESERVATION_REQUIRE_SERVICES=1). all checks the model with its default configuration, then runs conform all.

conform --command runs the same suite against a store in any language, behind an adapter
process that speaks the JSON-lines protocol of PROTOCOL.md (run by sh -c); one line per check,
or JSON objects with --json. serve is such an adapter for MemoryStore, on standard input and
output.

vectors writes the test vectors (the deterministic checks' requests with their expected answers,
one JSON file per rule family) into DIR, or checks that DIR holds exactly those files.

Exit codes: 0 when everything holds, 1 when a property or a check fails, 2 when a model run did
not complete, 64 on bad arguments.";

/// Which built-in stores `conform` runs the suite against.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stores {
    Memory,
    Sqlite,
    Postgres,
    Redis,
    All,
}

fn section(name: &str, run: impl FnOnce() -> Report) -> bool {
    println!("conformance suite against {name}:");
    let started = Instant::now();
    let report = run();
    print!("{report}");
    println!("{name}: {} in {:.2?}\n", if report.is_ok() { "conforms" } else { "DOES NOT CONFORM" }, started.elapsed());
    report.is_ok()
}

/// Runs the suite against the chosen stores; whether every one conforms.
fn conform(stores: Stores) -> bool {
    let mut ok = true;
    if matches!(stores, Stores::Memory | Stores::All) {
        ok &= section("MemoryStore", || run_all(&MemoryHarness));
    }
    if matches!(stores, Stores::Postgres | Stores::All) {
        let url = reservation_postgres::pg_url();
        let harness = PostgresHarness::connect(&url, PostgresOptions::default());
        ok &= conform_service("PostgresStore", &url, harness, stores == Stores::Postgres);
    }
    if matches!(stores, Stores::Redis | Stores::All) {
        let url = reservation_redis::redis_url();
        ok &= conform_service(
            "RedisStore",
            &url,
            RedisHarness::connect(&url, RedisOptions::default()),
            stores == Stores::Redis,
        );
        // Durability needs a server that keeps its writes: one of its own, restarted at every reopen.
        if let Ok(durable) = RedisHarness::durable() {
            ok &= section("RedisStore on an append-only redis-server", || run_only(&durable, "p1_durable"));
        }
    }
    if matches!(stores, Stores::Sqlite | Stores::All) {
        ok &= match SqliteHarness::new() {
            Ok(harness) => {
                let harness = harness.with_settings(Settings::default().with_cases(1_000));
                section("SqliteStore", || run_all(&harness))
            }
            Err(e) => {
                println!("SqliteStore: cannot open a scratch database: {e}");
                false
            }
        };
    }
    ok
}

/// The suite against a store on a server at `url` (in a schema or key prefix of its own, removed
/// afterwards). Without a server it says so and passes, unless the store was asked for by name or
/// `RESERVATION_REQUIRE_SERVICES=1`.
fn conform_service<H: reservation_conformance::Harness>(
    name: &str,
    url: &str,
    harness: Result<H, reservation_store::StorageError>,
    named: bool,
) -> bool {
    match harness {
        Ok(harness) => section(name, || run_all(&harness)),
        Err(e) => {
            let required = named || reservation_conformance::services::services_required();
            let verdict = if required { "DOES NOT CONFORM" } else { "skipped" };
            println!("{name}: {verdict}: no server at {url}: {e}\n");
            !required
        }
    }
}

/// The suite against the store behind the adapter `command`, through the driver: one line per
/// check, or with `json` one JSON object per check and a summary.
fn conform_command(command: &str, json: bool) -> ExitCode {
    let harness = match reservation_conformance::driver::CommandHarness::start(command) {
        Ok(h) => h,
        Err(e) => {
            // The driver's error says that the adapter did not start, and why.
            eprintln!("{e}");
            return ExitCode::from(1);
        }
    };
    let started = Instant::now();
    let report = run_all(&harness);
    if json {
        for (name, result, took) in &report.checks {
            let (verdict, detail) = match result {
                reservation_conformance::CheckResult::Passed => ("passed", String::new()),
                reservation_conformance::CheckResult::Skipped(why) => ("skipped", (*why).to_owned()),
                reservation_conformance::CheckResult::Failed(f) => ("failed", f.to_string()),
            };
            let line = serde_json::json!({"check": name, "result": verdict, "detail": detail, "millis": took.as_millis() as u64});
            println!("{line}");
        }
        println!(
            "{}",
            serde_json::json!({"command": command, "conforms": report.is_ok(), "millis": started.elapsed().as_millis() as u64})
        );
    } else {
        print!("{report}");
        println!(
            "{command}: {} in {:.2?}",
            if report.is_ok() { "conforms" } else { "DOES NOT CONFORM" },
            started.elapsed()
        );
    }
    if report.is_ok() { ExitCode::SUCCESS } else { ExitCode::from(1) }
}

/// The checks of `harness` whose names start with `prefix`.
fn run_only<H: reservation_conformance::Harness>(harness: &H, prefix: &str) -> Report {
    reservation_conformance::run_matching(harness, |name| name.starts_with(prefix))
}

fn run(argv: &[String]) -> ExitCode {
    let bad = |message: String| {
        eprintln!("error: {message}\n{USAGE}");
        ExitCode::from(64)
    };
    match argv.first().map(String::as_str) {
        Some("check" | "explore" | "swarm") => reservation_model::cli::run(argv),
        Some("serve") => {
            if argv.len() > 1 {
                return bad("serve takes no flags".into());
            }
            match reservation_conformance::driver::serve(std::io::stdin().lock(), std::io::stdout().lock()) {
                Ok(()) => ExitCode::SUCCESS,
                Err(e) => {
                    eprintln!("serve: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Some("vectors") => {
            let (Some(flag), Some(dir), None) = (argv.get(1), argv.get(2), argv.get(3)) else {
                return bad("vectors takes --write DIR or --check DIR".into());
            };
            let dir = std::path::Path::new(dir);
            let done = match flag.as_str() {
                "--write" => reservation_conformance::vectors::write(dir),
                "--check" => reservation_conformance::vectors::check(dir),
                other => return bad(format!("vectors: unknown flag {other:?}: --write or --check")),
            };
            match done {
                Ok(()) => {
                    println!(
                        "vectors: {} {}",
                        if flag == "--write" { "written to" } else { "in sync in" },
                        dir.display()
                    );
                    ExitCode::SUCCESS
                }
                Err(e) => {
                    eprintln!("vectors: {e}");
                    ExitCode::from(1)
                }
            }
        }
        Some("conform") if argv.get(1).is_some_and(|a| a == "--command") => {
            let Some(command) = argv.get(2) else { return bad("conform --command takes the adapter's command".into()) };
            let json = match argv.get(3).map(String::as_str) {
                None => false,
                Some("--json") if argv.len() == 4 => true,
                Some(other) => return bad(format!("conform --command CMD takes only --json after it, not {other:?}")),
            };
            conform_command(command, json)
        }
        Some("conform") => {
            let stores = match argv.get(1).map(String::as_str) {
                None | Some("all") => Stores::All,
                Some("memory") => Stores::Memory,
                Some("sqlite") => Stores::Sqlite,
                Some("postgres") => Stores::Postgres,
                Some("redis") => Stores::Redis,
                Some(other) => {
                    return bad(format!("conform: unknown store {other:?}: memory, sqlite, postgres, redis or all"));
                }
            };
            if argv.len() > 2 {
                return bad("conform takes at most one store".into());
            }
            if conform(stores) { ExitCode::SUCCESS } else { ExitCode::from(1) }
        }
        Some("all") => {
            if argv.len() > 1 {
                return bad("all takes no flags".into());
            }
            let model = reservation_model::cli::run(&["check".to_owned()]);
            let stores = conform(Stores::All);
            if model != ExitCode::SUCCESS {
                model
            } else if stores {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            }
        }
        Some("--help" | "-h" | "help") => {
            println!("{USAGE}");
            ExitCode::SUCCESS
        }
        Some(other) => bad(format!("unknown command {other:?}")),
        None => bad("missing command: check, explore, conform or all".into()),
    }
}

fn main() -> ExitCode {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    run(&argv)
}

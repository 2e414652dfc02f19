//! `reservation`: the project's one command line.
//!
//! - `reservation check`, `reservation explore` and `reservation swarm [flags]`: the protocol's model
//!   (`reservation_model::cli`, the same flags as `reservation-model`).
//! - `reservation conform [memory|sqlite|postgres|all]`: the whole conformance suite against the
//!   built-in stores.
//! - `reservation all`: the main job, the model check and then the suite against every built-in
//!   store; exits 0 only if everything holds.
#![deny(missing_docs)]

use std::process::ExitCode;
use std::time::Instant;

use reservation_conformance::sqlite::SqliteHarness;
use reservation_conformance::{MemoryHarness, Report, Settings, run_all};
use reservation_postgres::{PostgresHarness, PostgresOptions};

const USAGE: &str = "usage:
  reservation check [the flags of reservation-model check]
  reservation explore [the flags of reservation-model explore]
  reservation swarm [the flags of reservation-model swarm]
  reservation conform [memory|sqlite|postgres|all]
  reservation all

check, explore and swarm are the protocol's model (reservation check --help lists their flags).
conform runs the whole conformance suite (every named check, the differential test and the
linearizability check) against the built-in stores: MemoryStore, SqliteStore, PostgresStore
(on the server at RESERVATION_PG_URL, by default postgres://postgres@127.0.0.1:5432/test, in a
schema of its own), or all of them (the default; PostgresStore is skipped, saying so, when no
server answers, unless RESERVATION_REQUIRE_SERVICES=1). all checks the model with its default configuration, then runs conform all.

Exit codes: 0 when everything holds, 1 when a property or a check fails, 2 when a model run did
not complete, 64 on bad arguments.";

/// Which built-in stores `conform` runs the suite against.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Stores {
    Memory,
    Sqlite,
    Postgres,
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
        ok &= conform_postgres(stores == Stores::Postgres);
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

/// The suite against `PostgresStore` on the server at `RESERVATION_PG_URL` (by default the
/// local one), in a schema of its own that is dropped afterwards. Without a server it says so and
/// passes, unless the store was asked for by name or `RESERVATION_REQUIRE_SERVICES=1`.
fn conform_postgres(named: bool) -> bool {
    let url = reservation_postgres::pg_url();
    match PostgresHarness::connect(&url, PostgresOptions::default()) {
        Ok(harness) => section("PostgresStore", || run_all(&harness)),
        Err(e) => {
            let required = named || reservation_conformance::services::services_required();
            let verdict = if required { "DOES NOT CONFORM" } else { "skipped" };
            println!("PostgresStore: {verdict}: no server at {url}: {e}\n");
            !required
        }
    }
}

fn run(argv: &[String]) -> ExitCode {
    let bad = |message: String| {
        eprintln!("error: {message}\n{USAGE}");
        ExitCode::from(64)
    };
    match argv.first().map(String::as_str) {
        Some("check" | "explore" | "swarm") => reservation_model::cli::run(argv),
        Some("conform") => {
            let stores = match argv.get(1).map(String::as_str) {
                None | Some("all") => Stores::All,
                Some("memory") => Stores::Memory,
                Some("sqlite") => Stores::Sqlite,
                Some("postgres") => Stores::Postgres,
                Some(other) => {
                    return bad(format!("conform: unknown store {other:?}: memory, sqlite, postgres or all"));
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

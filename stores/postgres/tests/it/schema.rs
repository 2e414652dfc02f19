//! The tables at connect: created once under concurrent connects, and anything this build did
//! not create refused with a message that names it.

use reservation_postgres::{PostgresOptions, PostgresStore, SCHEMA_VERSION, Time};
use reservation_store::SystemClock;
use reservation_store::error_chain;

use reservation_postgres::PostgresHarness;

use crate::{admin, harness};

fn fresh_schema(label: &str) -> String {
    use std::time::{SystemTime, UNIX_EPOCH};
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs());
    format!("reservation_test_{secs}_{}_{label}", std::process::id())
}

fn connect(h: &PostgresHarness, schema: &str) -> Result<PostgresStore<SystemClock>, String> {
    h.runtime()
        .block_on(PostgresStore::connect(
            h.url(),
            Time::Local(SystemClock),
            PostgresOptions::default().with_schema(schema).with_max_connections(2),
        ))
        .map_err(|e| error_chain(&e))
}

fn sql(h: &PostgresHarness, statements: &str) {
    h.runtime().block_on(async { admin().await.batch_execute(statements).await.expect("the admin statements ran") });
}

fn drop_schema(h: &PostgresHarness, schema: &str) {
    sql(h, &format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"));
}

#[test]
fn concurrent_first_connects_create_the_tables_once() {
    let Some(h) = harness() else { return };
    let schema = fresh_schema("concurrent");
    let results: Vec<_> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..4).map(|_| s.spawn(|| connect(&h, &schema).map(drop))).collect();
        handles.into_iter().map(|h| h.join().expect("no panic")).collect()
    });
    drop_schema(&h, &schema);
    assert!(results.iter().all(Result::is_ok), "{results:?}");
}

/// A schema of version 1 (no clock table) is migrated at connect: the clock table added, the
/// version set, the rows kept.
#[test]
fn a_version_1_schema_is_migrated_at_connect() {
    use reservation_store::*;
    let Some(h) = harness() else { return };
    let schema = fresh_schema("migrate");
    let store = connect(&h, &schema).expect("a new schema is created");
    let scope = ReservationScope::parse("user", Some("acme"), "user-name").unwrap();
    let alice = AggregateRef::parse("user", Some("acme"), "alice-id").unwrap();
    let key = Key::new("alice").unwrap();
    h.runtime().block_on(store.confirm(&scope, &key, &alice, Version::stream(1).unwrap())).unwrap();
    store.close();
    sql(
        &h,
        &format!("DROP TABLE \"{schema}\".reservation_clock; UPDATE \"{schema}\".reservation_schema SET version = 1"),
    );
    let migrated = connect(&h, &schema);
    let found = migrated.as_ref().ok().map(|store| {
        let found = h.runtime().block_on(store.lookup(&scope, &key)).unwrap();
        store.close();
        found.map(|r| r.owner().clone())
    });
    let version = h.runtime().block_on(async {
        let row = admin()
            .await
            .query_one(&format!("SELECT version FROM \"{schema}\".reservation_schema"), &[])
            .await
            .unwrap();
        row.get::<_, i32>(0)
    });
    drop_schema(&h, &schema);
    migrated.expect("a version 1 schema is migrated");
    assert_eq!(found, Some(Some(alice)));
    assert_eq!(version, SCHEMA_VERSION);
}

#[test]
fn an_unknown_schema_version_is_refused() {
    let Some(h) = harness() else { return };
    let schema = fresh_schema("version");
    connect(&h, &schema).expect("a new schema is created");
    sql(&h, &format!("UPDATE \"{schema}\".reservation_schema SET version = {}", SCHEMA_VERSION + 1));
    let refused = connect(&h, &schema).expect_err("a later version was accepted");
    drop_schema(&h, &schema);
    assert!(refused.contains(&format!("records version [{}]", SCHEMA_VERSION + 1)), "{refused}");
    assert!(refused.contains(&format!("reads version {SCHEMA_VERSION} only")), "{refused}");
}

#[test]
fn a_foreign_reservation_table_is_refused() {
    let Some(h) = harness() else { return };
    let schema = fresh_schema("foreign");
    sql(&h, &format!("CREATE SCHEMA \"{schema}\"; CREATE TABLE \"{schema}\".reservation (id integer PRIMARY KEY)"));
    let refused = connect(&h, &schema).expect_err("a foreign table was accepted");
    drop_schema(&h, &schema);
    assert!(refused.contains("a table `reservation` that this store did not create"), "{refused}");
}

#[test]
fn a_version_table_without_its_table_is_refused() {
    let Some(h) = harness() else { return };
    let schema = fresh_schema("orphan");
    connect(&h, &schema).expect("a new schema is created");
    sql(&h, &format!("DROP TABLE \"{schema}\".reservation"));
    let refused = connect(&h, &schema).expect_err("a schema without its table was accepted");
    drop_schema(&h, &schema);
    assert!(refused.contains("but no `reservation` table"), "{refused}");
}

#[test]
fn altered_columns_primary_key_or_index_are_refused() {
    let Some(h) = harness() else { return };
    let cases = [
        ("column", "ALTER TABLE {t} ADD COLUMN note text", "has columns"),
        ("type", "ALTER TABLE {t} ALTER COLUMN expires_at TYPE numeric", "has columns"),
        ("nullable", "ALTER TABLE {t} ALTER COLUMN holds SET NOT NULL", "has columns"),
        (
            "pkey",
            "ALTER TABLE {t} DROP CONSTRAINT reservation_pkey; ALTER TABLE {t} ADD PRIMARY KEY (aggregate_type, tenant, key, namespace)",
            "has primary key",
        ),
        ("index", "DROP INDEX {s}.reservation_expiry", "lacks its expiry index"),
        (
            "partial",
            "DROP INDEX {s}.reservation_expiry; CREATE INDEX reservation_expiry ON {t} (expires_at)",
            "lacks its expiry index",
        ),
    ];
    for (label, alter, expected) in cases {
        let schema = fresh_schema(label);
        connect(&h, &schema).expect("a new schema is created");
        let s = format!("\"{schema}\"");
        sql(&h, &alter.replace("{t}", &format!("{s}.reservation")).replace("{s}", &s));
        let refused = connect(&h, &schema);
        drop_schema(&h, &schema);
        let refused = refused.expect_err(label);
        assert!(refused.contains(expected), "{label}: {refused}");
    }
}

#[test]
fn a_bad_connection_string_or_a_closed_port_is_a_storage_error() {
    let Some(h) = harness() else { return };
    for url in [
        "postgres://postgres@127.0.0.1:1/test",
        "not a url at all =",
        "postgres://postgres@127.0.0.1:5432/no_such_database_here",
    ] {
        let mut options = PostgresOptions::default();
        options.connect_timeout = std::time::Duration::from_secs(2);
        let result = h.runtime().block_on(PostgresStore::connect(url, Time::Local(SystemClock), options));
        let error = result.expect_err(url);
        assert!(error_chain(&error).starts_with("PostgreSQL: "), "{url}: {}", error_chain(&error));
        assert!(!error.is_indeterminate(), "{url}: {}", error_chain(&error));
    }
}

/// Whether a schema named `name` exists.
fn schema_exists(h: &PostgresHarness, name: &str) -> bool {
    h.runtime().block_on(async {
        let row = admin()
            .await
            .query_one("SELECT count(*) FROM pg_namespace WHERE nspname = $1", &[&name])
            .await
            .expect("counted");
        row.get::<_, i64>(0) == 1
    })
}

#[test]
fn a_harness_drops_its_schema_and_the_next_one_drops_test_schemas_older_than_six_hours() {
    let Some(h) = harness() else { return };
    let own = h.options().schema.clone();
    assert!(schema_exists(&h, &own));
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    // Left by runs that ended without dropping theirs (the process ids are made up).
    let stale = format!("reservation_test_{}_1_0", secs - 6 * 3600 - 60);
    let recent = format!("reservation_test_{}_1_0", secs - 6 * 3600 + 600);
    let unrelated = format!("reservation_{}_1_0", secs - 7 * 3600);
    for name in [&stale, &recent, &unrelated] {
        sql(&h, &format!("CREATE SCHEMA IF NOT EXISTS \"{name}\""));
    }
    let next = harness().expect("a second harness");
    let left = [&stale, &recent, &unrelated].map(|name| schema_exists(&h, name));
    for name in [&recent, &unrelated] {
        drop_schema(&h, name);
    }
    assert_eq!(left, [false, true, true], "[stale, recent, not a test schema] after the next harness connected");
    drop(h);
    assert!(!schema_exists(&next, &own), "a dropped harness left its schema");
}

#[test]
fn a_test_schema_exactly_six_hours_old_is_kept() {
    // Only schemas older than six hours go. The harness reads the clock itself, so the case is
    // tried until the clock reads the same second before and after the harness connects.
    let Some(h) = harness() else { return };
    let secs = || std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    for _ in 0..20 {
        let before = secs();
        let name = format!("reservation_test_{}_2_0", before - 6 * 3600);
        sql(&h, &format!("CREATE SCHEMA IF NOT EXISTS \"{name}\""));
        let next = harness().expect("a second harness");
        // Read before the clock again: any harness connecting in between read the same second.
        let kept = schema_exists(&h, &name);
        let after = secs();
        drop(next);
        drop_schema(&h, &name);
        if before == after {
            assert!(kept, "a schema exactly six hours old was dropped");
            return;
        }
    }
    panic!("the clock changed its second during each of 20 connects");
}

#[test]
fn a_short_statement_timeout_still_waits_for_another_connects_turn_on_the_tables() {
    // Another connect holds the tables' advisory lock for longer than this store's statement
    // timeout (as a busy server does with many stores connecting at once): the connect waits
    // for its turn, bounded by the response timeout, and does not fail on the statement
    // timeout.
    let Some(h) = harness() else { return };
    let holder = h.runtime().block_on(async {
        let admin = admin().await;
        admin.batch_execute("BEGIN").await.expect("begun");
        admin.execute("SELECT pg_advisory_xact_lock($1, 0)", &[&0x5253_5256_i32]).await.expect("locked");
        admin
    });
    let mut options = PostgresOptions::default().with_max_connections(1);
    options.statement_timeout = std::time::Duration::from_millis(100);
    let url = h.url().to_owned();
    let connecting = std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime");
        runtime
            .block_on(PostgresStore::connect(&url, Time::Local(SystemClock), options))
            .map(drop)
            .map_err(|e| error_chain(&e))
    });
    std::thread::sleep(std::time::Duration::from_millis(600));
    h.runtime().block_on(holder.batch_execute("ROLLBACK")).expect("released");
    let connected = connecting.join().expect("the connect ended");
    assert_eq!(connected, Ok(()), "a connect that waited 600 ms for the tables' lock");
}

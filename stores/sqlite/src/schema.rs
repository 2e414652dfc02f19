//! The file's schema: the reservations' table and its index, the scopes' clock table, the
//! application id and the schema version, the checks that a file holds exactly these before a
//! store uses it, and the migration of a file of the previous version.

use reservation_store::{Clock, MAX_KEY_LEN, MAX_NAME_LEN, StorageError};
use rusqlite::Connection;

use crate::SqliteStore;

/// The version of the table layout this build writes and reads, kept in `PRAGMA user_version`.
/// Version 2 added the `reservation_clock` table; a file of version 1 is migrated at open.
pub const SCHEMA_VERSION: i32 = 2;

/// The version before [`SCHEMA_VERSION`]: the `reservation` table and its index, without the
/// scopes' clocks. Opening such a file adds the clock table (an empty one: no scope has a
/// persisted instant yet) and sets the version, in one transaction.
const PREVIOUS_VERSION: i32 = 1;

/// `PRAGMA application_id` of a reservation store file: the bytes `RSRV`.
const APPLICATION_ID: i32 = 0x5253_5256;

/// The table, its length checks written from the same `MAX_*` constants that the types enforce,
/// so that the schema and the Rust limits cannot drift apart. An existing file's table must
/// equal it byte for byte.
fn create_table() -> String {
    format!(
        "CREATE TABLE reservation (
    aggregate_type BLOB NOT NULL CHECK (typeof(aggregate_type) = 'blob' AND length(aggregate_type) BETWEEN 1 AND {MAX_NAME_LEN}),
    tenant BLOB NOT NULL CHECK (typeof(tenant) = 'blob' AND length(tenant) <= {MAX_NAME_LEN}),
    namespace BLOB NOT NULL CHECK (typeof(namespace) = 'blob' AND length(namespace) BETWEEN 1 AND {MAX_NAME_LEN}),
    key BLOB NOT NULL CHECK (typeof(key) = 'blob' AND length(key) BETWEEN 1 AND {MAX_KEY_LEN}),
    owner_tenant BLOB NOT NULL CHECK (typeof(owner_tenant) = 'blob' AND length(owner_tenant) <= {MAX_NAME_LEN}),
    owner_id BLOB NOT NULL CHECK (typeof(owner_id) = 'blob' AND length(owner_id) BETWEEN 1 AND {MAX_NAME_LEN}),
    state INTEGER NOT NULL CHECK (state IN (0, 1)),
    holds BLOB,
    expires_at INTEGER,
    version INTEGER,
    PRIMARY KEY (aggregate_type, tenant, namespace, key),
    CHECK (length(tenant) = 0 OR owner_tenant = tenant),
    CHECK (
        (state = 0 AND typeof(holds) = 'blob' AND length(holds) > 2 AND typeof(expires_at) = 'integer'
            AND version IS NULL)
        OR (state = 1 AND holds IS NULL AND expires_at IS NULL AND typeof(version) = 'integer')
    )
) WITHOUT ROWID"
    )
}

const CREATE_INDEX: &str = "CREATE INDEX reservation_expiry ON reservation (expires_at) WHERE state = 0";

/// The latest instant at which the store changed a reservation of each scope (rule D10 across a
/// restart), stored offset by 2⁶³ as the row's instants are; one row per scope that has had a
/// change since the table was created.
fn create_clock_table() -> String {
    format!(
        "CREATE TABLE reservation_clock (
    aggregate_type BLOB NOT NULL CHECK (typeof(aggregate_type) = 'blob' AND length(aggregate_type) BETWEEN 1 AND {MAX_NAME_LEN}),
    tenant BLOB NOT NULL CHECK (typeof(tenant) = 'blob' AND length(tenant) <= {MAX_NAME_LEN}),
    namespace BLOB NOT NULL CHECK (typeof(namespace) = 'blob' AND length(namespace) BETWEEN 1 AND {MAX_NAME_LEN}),
    latest INTEGER NOT NULL CHECK (typeof(latest) = 'integer'),
    PRIMARY KEY (aggregate_type, tenant, namespace)
) WITHOUT ROWID"
    )
}

impl<C: Clock> SqliteStore<C> {
    /// Checks that the file is a reservation store of this schema version, or empty; creates the
    /// schema in an empty one. Never writes to a file it refuses.
    pub(crate) fn prepare_schema(&self, conn: &Connection) -> Result<(), StorageError> {
        let identify = |conn: &Connection| -> Result<(i32, i32, i64), rusqlite::Error> {
            // One statement, so one snapshot: another process may be creating the schema.
            conn.query_row(
                "SELECT (SELECT application_id FROM pragma_application_id),
                        (SELECT user_version FROM pragma_user_version),
                        (SELECT count(*) FROM sqlite_schema)",
                [],
                |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
            )
        };
        let found = self
            .until_not_busy(|| identify(conn))
            .map_err(|e| self.error("cannot read the file as an SQLite database", e))?;
        self.judge_schema(conn, found)?;
        // SQLite does not call the busy handler for this switch: another process creating the
        // file at the same moment makes it fail at once, so it is retried here.
        let mode: String = self
            .until_not_busy(|| conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get(0)))
            .map_err(|e| self.error("cannot switch to WAL mode", e))?;
        if !mode.eq_ignore_ascii_case("wal") {
            return Err(self.fail(format_args!("the file cannot be put in WAL mode (it is in {mode} mode)")));
        }
        if found.0 == APPLICATION_ID {
            return if found.1 == PREVIOUS_VERSION { self.migrate(conn) } else { Ok(()) };
        }
        // An empty database: create the schema, unless another connection just did.
        let created = self.write_txn(conn, |conn| {
            let found = identify(conn)?;
            if found == (0, 0, 0) {
                conn.execute_batch(&create_table())?;
                conn.execute_batch(CREATE_INDEX)?;
                conn.execute_batch(&create_clock_table())?;
                conn.pragma_update(None, "application_id", APPLICATION_ID)?;
                conn.pragma_update(None, "user_version", SCHEMA_VERSION)?;
            }
            Ok(found)
        });
        let found = created.map_err(|f| self.convert(f))?;
        self.judge_schema(conn, found)?;
        // Another connection, of an older build, may have just created a file of the previous version.
        if found.0 == APPLICATION_ID && found.1 == PREVIOUS_VERSION { self.migrate(conn) } else { Ok(()) }
    }

    /// Migrates a file of [`PREVIOUS_VERSION`], verified as such, to [`SCHEMA_VERSION`]: creates
    /// the clock table and sets the version, in one transaction, unless another connection just
    /// did; then verifies the result.
    fn migrate(&self, conn: &Connection) -> Result<(), StorageError> {
        let migrated = self.write_txn(conn, |conn| {
            let version: i32 = conn.query_row("SELECT user_version FROM pragma_user_version", [], |r| r.get(0))?;
            if version == PREVIOUS_VERSION {
                conn.execute_batch(&create_clock_table())?;
                conn.pragma_update(None, "user_version", SCHEMA_VERSION)?;
            }
            Ok(version)
        });
        let version = migrated.map_err(|f| self.convert(f))?;
        if version != PREVIOUS_VERSION && version != SCHEMA_VERSION {
            return Err(self.fail(format_args!(
                "the reservation schema is version {version}, this build knows only version {SCHEMA_VERSION}"
            )));
        }
        self.verify_objects(conn, SCHEMA_VERSION)
    }

    fn judge_schema(&self, conn: &Connection, (app, version, objects): (i32, i32, i64)) -> Result<(), StorageError> {
        if app == APPLICATION_ID {
            if version == PREVIOUS_VERSION {
                // Migrated once the file is in WAL mode; verified as what it is until then.
                return self.verify_objects(conn, PREVIOUS_VERSION);
            }
            if version != SCHEMA_VERSION {
                return Err(self.fail(format_args!(
                    "the reservation schema is version {version}, this build knows only version {SCHEMA_VERSION}"
                )));
            }
            self.verify_objects(conn, SCHEMA_VERSION)
        } else if (app, version, objects) == (0, 0, 0) {
            Ok(())
        } else {
            Err(self.fail(format_args!(
                "not a reservation store: application_id {app:#x}, user_version {version}, {objects} schema objects"
            )))
        }
    }

    /// Verifies every object of the file's schema: exactly the `reservation` table, its expiry
    /// index and (from version 2) the `reservation_clock` table, each as schema `version` defines
    /// it. A trigger, a view, another table or index (SQLite's own `sqlite_*` statistics
    /// excepted), or a missing or altered object could change what the store reads back, so each
    /// is refused, named.
    fn verify_objects(&self, conn: &Connection, version: i32) -> Result<(), StorageError> {
        let found: Vec<(String, String, Option<String>)> = conn
            .prepare("SELECT type, name, sql FROM sqlite_schema ORDER BY type, name")
            .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect())
            .map_err(|e| self.error("cannot read the schema", e))?;
        let mut expected =
            vec![("table", "reservation", create_table()), ("index", "reservation_expiry", CREATE_INDEX.to_owned())];
        if version >= SCHEMA_VERSION {
            expected.push(("table", "reservation_clock", create_clock_table()));
        }
        for (kind, name, want) in &expected {
            match found.iter().find(|(k, n, _)| k == kind && n == name) {
                None => return Err(self.fail(format_args!("the {name} {kind} is missing"))),
                Some((_, _, sql)) if sql.as_deref() != Some(want.as_str()) => {
                    return Err(
                        self.fail(format_args!("the {name} {kind} is not the one schema version {version} defines"))
                    );
                }
                Some(_) => {}
            }
        }
        for (kind, name, _) in &found {
            if name.starts_with("sqlite_") && kind == "table" {
                continue;
            }
            if !expected.iter().any(|(k, n, _)| k == kind && n == name) {
                return Err(self.fail(format_args!(
                    "the file holds the {kind} {name:?}, which a reservation store does not have; \
                     it could change what the store reads back, so the file is refused"
                )));
            }
        }
        Ok(())
    }
}

//! The file's schema: the one table and its index, the application id and the schema version,
//! and the checks that a file holds exactly these before a store uses it.

use reservation_store::{Clock, MAX_KEY_LEN, MAX_NAME_LEN, StorageError};
use rusqlite::Connection;

use crate::SqliteStore;

/// The version of the table layout this build writes and reads, kept in `PRAGMA user_version`.
pub const SCHEMA_VERSION: i32 = 1;

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
            return Ok(());
        }
        // An empty database: create the schema, unless another connection just did.
        let created = self.write_txn(conn, |conn| {
            let found = identify(conn)?;
            if found == (0, 0, 0) {
                conn.execute_batch(&create_table())?;
                conn.execute_batch(CREATE_INDEX)?;
                conn.pragma_update(None, "application_id", APPLICATION_ID)?;
                conn.pragma_update(None, "user_version", SCHEMA_VERSION)?;
            }
            Ok(found)
        });
        let found = created.map_err(|f| self.convert(f))?;
        self.judge_schema(conn, found)
    }

    fn judge_schema(&self, conn: &Connection, (app, version, objects): (i32, i32, i64)) -> Result<(), StorageError> {
        if app == APPLICATION_ID {
            if version != SCHEMA_VERSION {
                return Err(self.fail(format_args!(
                    "the reservation schema is version {version}, this build knows only version {SCHEMA_VERSION}"
                )));
            }
            self.verify_objects(conn)
        } else if (app, version, objects) == (0, 0, 0) {
            Ok(())
        } else {
            Err(self.fail(format_args!(
                "not a reservation store: application_id {app:#x}, user_version {version}, {objects} schema objects"
            )))
        }
    }

    /// Verifies every object of the file's schema: exactly the `reservation` table and its
    /// expiry index, each as this schema version defines it. A trigger, a view, another table or
    /// index (SQLite's own `sqlite_*` statistics excepted), or a missing or altered object could
    /// change what the store reads back, so each is refused, named.
    fn verify_objects(&self, conn: &Connection) -> Result<(), StorageError> {
        let found: Vec<(String, String, Option<String>)> = conn
            .prepare("SELECT type, name, sql FROM sqlite_schema ORDER BY type, name")
            .and_then(|mut s| s.query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))?.collect())
            .map_err(|e| self.error("cannot read the schema", e))?;
        let expected =
            [("table", "reservation", create_table()), ("index", "reservation_expiry", CREATE_INDEX.to_owned())];
        for (kind, name, want) in &expected {
            match found.iter().find(|(k, n, _)| k == kind && n == name) {
                None => return Err(self.fail(format_args!("the {name} {kind} is missing"))),
                Some((_, _, sql)) if sql.as_deref() != Some(want.as_str()) => {
                    return Err(self.fail(format_args!(
                        "the {name} {kind} is not the one schema version {SCHEMA_VERSION} defines"
                    )));
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

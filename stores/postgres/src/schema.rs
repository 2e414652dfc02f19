//! The store's tables: their statements, their creation, and their verification at connect.

use std::time::Duration;

use deadpool_postgres::Object;
use reservation_store::{MAX_KEY_LEN, MAX_NAME_LEN, StorageError};

use crate::KeyLock;

/// The version of the table layout this build writes and reads, kept in the one row of the
/// table `reservation_schema`. Version 2 added the table `reservation_clock`; a schema of
/// version 1 is migrated at connect.
pub const SCHEMA_VERSION: i32 = 2;

/// The version before [`SCHEMA_VERSION`], which [`prepare`] migrates: the same tables without
/// `reservation_clock`.
const PREVIOUS_VERSION: i32 = 1;

/// The store's statements, on its schema's tables.
#[derive(Clone, Debug)]
pub(crate) struct Sql {
    pub(crate) lock: String,
    pub(crate) lock_shared: String,
    pub(crate) select: String,
    pub(crate) select_for_write: String,
    pub(crate) clock: String,
    pub(crate) latest: String,
    pub(crate) advance: String,
    pub(crate) upsert: String,
    pub(crate) delete: String,
    pub(crate) sweep: String,
    pub(crate) count: String,
    schema: String,
}

/// `name` as a quoted SQL identifier.
pub(crate) fn quote(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// The columns of `reservation_clock`, as [`COLUMNS`] describes `reservation`'s.
const CLOCK_COLUMNS: [(&str, &str, bool); 4] = [
    ("aggregate_type", "bytea", true),
    ("tenant", "bytea", true),
    ("namespace", "bytea", true),
    ("latest", "bigint", true),
];

/// The columns of `reservation` as `pg_attribute` and `format_type` describe them: name, type,
/// not null. An existing table must have exactly these.
const COLUMNS: [(&str, &str, bool); 10] = [
    ("aggregate_type", "bytea", true),
    ("tenant", "bytea", true),
    ("namespace", "bytea", true),
    ("key", "bytea", true),
    ("owner_tenant", "bytea", true),
    ("owner_id", "bytea", true),
    ("state", "smallint", true),
    ("holds", "bytea[]", false),
    ("expires_at", "bigint", false),
    ("version", "bigint", false),
];

impl Sql {
    pub(crate) fn new(schema: &str, key_lock: KeyLock) -> Result<Sql, StorageError> {
        if schema.is_empty() || schema.len() > 63 || schema.contains('\0') {
            return Err(StorageError::new(format!(
                "PostgreSQL: the schema name {schema:?} is not an identifier of 1 to 63 bytes"
            )));
        }
        let s = quote(schema);
        let table = format!("{s}.reservation");
        let clocks = format!("{s}.reservation_clock");
        let pk = "aggregate_type = $1 AND tenant = $2 AND namespace = $3 AND key = $4";
        let columns = "owner_tenant, owner_id, state, holds, expires_at, version";
        let select = format!("SELECT {columns} FROM {table} WHERE {pk}");
        let (lock, select_for_write) = match key_lock {
            KeyLock::Advisory => ("SELECT pg_advisory_xact_lock($1, $2)".to_owned(), select.clone()),
            KeyLock::RowOnly => ("SELECT $1::int4, $2::int4".to_owned(), format!("{select} FOR UPDATE")),
        };
        Ok(Sql {
            lock,
            lock_shared: match key_lock {
                KeyLock::Advisory => "SELECT pg_advisory_xact_lock_shared($1, $2)".to_owned(),
                KeyLock::RowOnly => "SELECT $1::int4, $2::int4".to_owned(),
            },
            select,
            select_for_write,
            clock: "SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint".to_owned(),
            latest: format!("SELECT latest FROM {clocks} WHERE aggregate_type = $1 AND tenant = $2 AND namespace = $3"),
            // The later of the two instants, written only when the new one is later: an upsert
            // that finds a later or equal instant leaves the row as it is.
            advance: format!(
                "INSERT INTO {clocks} (aggregate_type, tenant, namespace, latest) VALUES ($1, $2, $3, $4)
                 ON CONFLICT (aggregate_type, tenant, namespace) DO UPDATE SET latest = EXCLUDED.latest
                 WHERE reservation_clock.latest < EXCLUDED.latest"
            ),
            upsert: format!(
                "INSERT INTO {table} (aggregate_type, tenant, namespace, key, {columns})
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)
                 ON CONFLICT (aggregate_type, tenant, namespace, key) DO UPDATE SET
                 owner_tenant = EXCLUDED.owner_tenant, owner_id = EXCLUDED.owner_id, state = EXCLUDED.state,
                 holds = EXCLUDED.holds, expires_at = EXCLUDED.expires_at, version = EXCLUDED.version"
            ),
            delete: format!("DELETE FROM {table} WHERE {pk}"),
            // The one statement that restates a rule (D1: a pending reservation is expired from
            // its expiry on), proven equal to `spec::lookup` by the tests; the index makes it a
            // range scan. A deletion is a change: the sweep's instant is persisted for every
            // scope it deleted from, in the same statement (D10 across a restart).
            sweep: format!(
                "WITH gone AS (
                     DELETE FROM {table} WHERE state = 0 AND expires_at <= $1
                     RETURNING aggregate_type, tenant, namespace
                 ), advanced AS (
                     INSERT INTO {clocks} (aggregate_type, tenant, namespace, latest)
                     SELECT DISTINCT aggregate_type, tenant, namespace, $1::bigint FROM gone
                     ORDER BY 1, 2, 3
                     ON CONFLICT (aggregate_type, tenant, namespace) DO UPDATE SET latest = EXCLUDED.latest
                     WHERE reservation_clock.latest < EXCLUDED.latest
                 )
                 SELECT count(*) FROM gone"
            ),
            count: format!("SELECT count(*) FROM {table}"),
            schema: s,
        })
    }

    /// The statement that creates `reservation_clock`: the latest instant at which the store
    /// changed a reservation of each scope (rule D10 across a restart), offset by 2⁶³ as the rows'
    /// instants are.
    fn create_clock(&self) -> String {
        let s = &self.schema;
        format!(
            "CREATE TABLE {s}.reservation_clock (
    aggregate_type bytea NOT NULL CHECK (length(aggregate_type) BETWEEN 1 AND {MAX_NAME_LEN}),
    tenant bytea NOT NULL CHECK (length(tenant) <= {MAX_NAME_LEN}),
    namespace bytea NOT NULL CHECK (length(namespace) BETWEEN 1 AND {MAX_NAME_LEN}),
    latest bigint NOT NULL,
    PRIMARY KEY (aggregate_type, tenant, namespace)
);"
        )
    }

    /// The statements that create the schema's tables, with the length checks written from the
    /// same `MAX_*` constants that the types enforce.
    fn create(&self) -> String {
        let s = &self.schema;
        let clock = self.create_clock();
        format!(
            "CREATE SCHEMA IF NOT EXISTS {s};
{clock}
CREATE TABLE {s}.reservation (
    aggregate_type bytea NOT NULL CHECK (length(aggregate_type) BETWEEN 1 AND {MAX_NAME_LEN}),
    tenant bytea NOT NULL CHECK (length(tenant) <= {MAX_NAME_LEN}),
    namespace bytea NOT NULL CHECK (length(namespace) BETWEEN 1 AND {MAX_NAME_LEN}),
    key bytea NOT NULL CHECK (length(key) BETWEEN 1 AND {MAX_KEY_LEN}),
    owner_tenant bytea NOT NULL CHECK (length(owner_tenant) <= {MAX_NAME_LEN}),
    owner_id bytea NOT NULL CHECK (length(owner_id) BETWEEN 1 AND {MAX_NAME_LEN}),
    state smallint NOT NULL CHECK (state IN (0, 1)),
    holds bytea[],
    expires_at bigint,
    version bigint,
    PRIMARY KEY (aggregate_type, tenant, namespace, key),
    CHECK (length(tenant) = 0 OR owner_tenant = tenant),
    CHECK (
        (state = 0 AND cardinality(holds) > 0 AND expires_at IS NOT NULL AND version IS NULL)
        OR (state = 1 AND holds IS NULL AND expires_at IS NULL AND version IS NOT NULL)
    )
);
CREATE INDEX reservation_expiry ON {s}.reservation (expires_at) WHERE state = 0;
CREATE TABLE {s}.reservation_schema (version integer NOT NULL);
INSERT INTO {s}.reservation_schema (version) VALUES ({SCHEMA_VERSION});"
        )
    }
}

fn failed(what: &str) -> impl FnOnce(tokio_postgres::Error) -> StorageError + '_ {
    move |e| StorageError::with_source(format!("PostgreSQL: {what}"), e)
}

/// Creates the tables in `schema` if neither exists, then verifies them. Concurrent connects
/// take turns on an advisory lock, so that one creates and the others verify. Its statements,
/// the wait for that turn included, run for up to `limit` (the connect's own bound) rather than
/// the store's statement timeout, which may be far shorter than another connect's turn on a
/// busy server.
pub(crate) async fn prepare(client: &mut Object, sql: &Sql, schema: &str, limit: Duration) -> Result<(), StorageError> {
    let tx = client.transaction().await.map_err(failed("begin"))?;
    tx.batch_execute(&format!("SET LOCAL statement_timeout = {}", limit.as_millis().max(1)))
        .await
        .map_err(failed("bound the connect's statements"))?;
    tx.execute("SELECT pg_advisory_xact_lock($1, 0)", &[&0x5253_5256_i32]).await.map_err(failed("lock the schema"))?;
    let s = &sql.schema;
    let found = tx
        .query_one(
            "SELECT to_regclass($1)::oid, to_regclass($2)::oid",
            &[&format!("{s}.reservation"), &format!("{s}.reservation_schema")],
        )
        .await
        .map_err(failed("look for the tables"))?;
    let table: Option<u32> = found.try_get(0).map_err(failed("look for the tables"))?;
    let version_table: Option<u32> = found.try_get(1).map_err(failed("look for the tables"))?;
    match (table, version_table) {
        (None, None) => tx.batch_execute(&sql.create()).await.map_err(failed("create the tables"))?,
        (Some(_), None) => {
            return Err(StorageError::new(format!(
                "PostgreSQL: schema {schema:?} has a table `reservation` that this store did not create (no `reservation_schema` table beside it); use another schema"
            )));
        }
        (None, Some(_)) => {
            return Err(StorageError::new(format!(
                "PostgreSQL: schema {schema:?} has a `reservation_schema` table but no `reservation` table; use another schema"
            )));
        }
        (Some(_), Some(_)) => {}
    }
    let versions = tx
        .query(&format!("SELECT version FROM {s}.reservation_schema"), &[])
        .await
        .map_err(failed("read the schema version"))?;
    let mut versions: Vec<i32> = versions.iter().filter_map(|r| r.try_get(0).ok()).collect();
    if versions == [PREVIOUS_VERSION] {
        // The migration, under the schema's lock: the clock table, empty (no scope has a
        // persisted instant yet), and the new version, in this one transaction.
        tx.batch_execute(&format!(
            "{} UPDATE {s}.reservation_schema SET version = {SCHEMA_VERSION};",
            sql.create_clock()
        ))
        .await
        .map_err(failed("migrate the tables to version 2"))?;
        versions = vec![SCHEMA_VERSION];
    }
    if versions != [SCHEMA_VERSION] {
        return Err(StorageError::new(format!(
            "PostgreSQL: schema {schema:?} records version {versions:?}; this build reads version {SCHEMA_VERSION} only"
        )));
    }
    verify(&tx, s, schema).await?;
    tx.commit().await.map_err(failed("commit"))
}

/// Refuses a `reservation` table whose columns, primary key or expiry index differ from the ones
/// this build creates, naming the difference.
async fn verify(tx: &deadpool_postgres::Transaction<'_>, s: &str, schema: &str) -> Result<(), StorageError> {
    let refuse =
        |what: String| StorageError::new(format!("PostgreSQL: schema {schema:?}: the `reservation` table {what}"));
    let found = columns(tx, &format!("{s}.reservation")).await?;
    let expected: Vec<(String, String, bool)> =
        crate::schema::COLUMNS.iter().map(|(n, t, nn)| ((*n).to_owned(), (*t).to_owned(), *nn)).collect();
    if found != expected {
        return Err(refuse(format!("has columns {found:?}; this build expects {expected:?}")));
    }
    let pk = primary_key(tx, &format!("{s}.reservation")).await?;
    if pk.as_deref() != Some("aggregate_type,tenant,namespace,key") {
        return Err(refuse(format!(
            "has primary key {pk:?}; this build expects (aggregate_type, tenant, namespace, key)"
        )));
    }
    let clock_found = columns(tx, &format!("{s}.reservation_clock")).await?;
    let clock_expected: Vec<(String, String, bool)> =
        CLOCK_COLUMNS.iter().map(|(n, t, nn)| ((*n).to_owned(), (*t).to_owned(), *nn)).collect();
    if clock_found != clock_expected {
        return Err(StorageError::new(format!(
            "PostgreSQL: schema {schema:?}: the `reservation_clock` table has columns {clock_found:?}; this build expects {clock_expected:?}"
        )));
    }
    if primary_key(tx, &format!("{s}.reservation_clock")).await?.as_deref() != Some("aggregate_type,tenant,namespace") {
        return Err(StorageError::new(format!(
            "PostgreSQL: schema {schema:?}: the `reservation_clock` table's primary key is not (aggregate_type, tenant, namespace)"
        )));
    }
    let index: Option<String> = tx
        .query_one(
            "SELECT (SELECT pg_get_indexdef(i.indexrelid) FROM pg_index i
                     WHERE i.indexrelid = to_regclass($1) AND i.indrelid = to_regclass($2))",
            &[&format!("{s}.reservation_expiry"), &format!("{s}.reservation")],
        )
        .await
        .map_err(failed("read the expiry index"))?
        .get(0);
    match index {
        Some(def) if def.ends_with("USING btree (expires_at) WHERE (state = 0)") => Ok(()),
        other => Err(refuse(format!(
            "lacks its expiry index `reservation_expiry` on (expires_at) WHERE state = 0 (found {other:?})"
        ))),
    }
}

/// The columns of `table` (schema-qualified): name, type, not null, in order.
async fn columns(
    tx: &deadpool_postgres::Transaction<'_>,
    table: &str,
) -> Result<Vec<(String, String, bool)>, StorageError> {
    let rows = tx
        .query(
            "SELECT attname::text, format_type(atttypid, atttypmod), attnotnull FROM pg_attribute
             WHERE attrelid = to_regclass($1) AND attnum > 0 AND NOT attisdropped ORDER BY attnum",
            &[&table],
        )
        .await
        .map_err(failed("read the columns"))?;
    Ok(rows.iter().map(|r| (r.get(0), r.get(1), r.get(2))).collect())
}

/// The columns of `table`'s primary key, in order, joined by commas; `None` without one.
async fn primary_key(tx: &deadpool_postgres::Transaction<'_>, table: &str) -> Result<Option<String>, StorageError> {
    Ok(tx
        .query_one(
            "SELECT (SELECT string_agg(a.attname::text, ',' ORDER BY k.n)
                     FROM pg_index i CROSS JOIN LATERAL unnest(i.indkey) WITH ORDINALITY AS k(attnum, n)
                     JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = k.attnum
                     WHERE i.indrelid = to_regclass($1) AND i.indisprimary)",
            &[&table],
        )
        .await
        .map_err(failed("read the primary key"))?
        .get(0))
}

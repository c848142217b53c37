package sqldriver

import (
	"hash/fnv"
	"strconv"
	"strings"
)

// Row modes: the value of the mode column.
const (
	modeAnchor          = 0  // MySQL: the row (owner '') that acquires lock; token 0, or an older version's counter
	modeClock           = -1 // not stored: the pseudo-row of queries.rows that carries the database's clock
	modeExclusive       = 1  // an exclusive hold
	modeShared          = 2  // a shared hold
	modeQueuedExclusive = 3  // a wait-queue entry for an exclusive hold
	modeQueuedShared    = 4  // a wait-queue entry for a shared hold
)

// queries holds the statements of one dialect and table. They are written
// with '?' placeholders and turned into $1, $2… for PostgreSQL. No value is
// ever part of a statement's text: the table name is validated and quoted,
// everything else is a bind parameter.
type queries struct {
	dialect Dialect
	create  string
	// lock serialises the acquires of one lock. PostgreSQL: a
	// transaction-scoped advisory lock (lockID), which writes nothing, so
	// that a refused attempt commits without a WAL flush. MySQL: an
	// upsert of the lock's anchor row (name) that changes nothing when the
	// row exists and creates it otherwise; either way it takes the
	// record's exclusive lock until the transaction ends.
	lock string
	// upgrade adds the columns of counted holds and values to a table
	// created by an older version of the package (PostgreSQL; on MySQL
	// see columns).
	upgrade string
	// columns are the columns that upgrade adds: name and definition.
	columns [][2]string
	// rows reads every row of a lock (name): owner, mode, token, the
	// microseconds left by the database's clock at the statement's start
	// (NULL for an anchor), the µs that clock had run on when the row was
	// read (see row.remaining), limit and weight, followed by a pseudo-row
	// ('', modeClock, the clock in µs since the Unix epoch, read when the
	// pseudo-row is produced on PostgreSQL, NULL, 0, 0, 0).
	rows string
	// state reads every row of a lock (name) for Inspect: owner, mode,
	// token, µs left, µs elapsed when read (as in rows), limit, weight
	// and value.
	state string
	// grant upserts the owner's row (name, owner, mode, token, ttl µs,
	// limit, weight, value).
	grant string
	// extend renews the owner's row (mode, ttl µs, name, owner).
	extend string
	// purge deletes the lock's expired rows (name), and on PostgreSQL
	// the counter row an older version of the package kept.
	purge string
	// refresh extends a live hold (ttl µs, name, owner, mode, token,
	// token); PostgreSQL returns its token, MySQL reports rows affected.
	refresh string
	// release deletes a live hold. PostgreSQL: (name, owner, mode, token,
	// token, channel, name) → released, notified; it also deletes the
	// owner's queue entry or expired row and notifies when it deleted
	// anything. MySQL: (name, owner, mode, token, token) → rows affected.
	release string
	// leave deletes the owner's queue entry or expired row (name, owner):
	// MySQL's Release when release deleted nothing.
	leave string
	// unanchor deletes the lock's anchor row (name): MySQL's Release
	// after release or leave deleted a row, by its primary key (a lock on
	// that one record).
	unanchor string
	// notify sends a notification (channel, name): PostgreSQL only.
	notify string
	// batch refreshes many leases (PostgreSQL: arrays of names, owners,
	// modes, tokens and ttls in µs; returns name, owner of each extended
	// row).
	batch string
	// now is the database clock's current time, as in expires.
	now string
	// table is the quoted table name.
	table string
}

// clocksOf returns the SQL expressions of d's clock readings:
//   - now, the statement's start: liveness is judged by it (expires > now),
//     the earlier reading and the safe one;
//   - clock, the token clock of queries.rows in µs since the Unix epoch,
//     read after the key's lock;
//   - after, now plus a number of µs (?): a grant's or renewal's expiry;
//   - left, the µs a row has left by now;
//   - elapsed, the µs from now to the moment a row is produced (see
//     row.remaining).
//
// On PostgreSQL, statement_timestamp() is the receipt of the statement's
// message. With the simple protocol (pgx's
// default_query_exec_mode=simple_protocol, as behind PgBouncer) one
// message carries BEGIN, the lock and the read, received before the
// acquire waited for the lock: a token taken from it could be older than
// one granted, and released, while it waited. So the token clock is
// clock_timestamp(), read when the read produces the clock's row. On
// MySQL the read is a statement of its own, sent after the lock's has
// returned: its UTC_TIMESTAMP(6) is after the lock. SYSDATE(6) is read
// for each row as it is evaluated, and NOW(6) at the statement's start,
// both in the session's time zone; a server started with --sysdate-is-now
// makes elapsed 0.
func clocksOf(d Dialect) (now, clock, after, left, elapsed string) {
	if d == MySQL {
		return "UTC_TIMESTAMP(6)",
			"TIMESTAMPDIFF(MICROSECOND, '1970-01-01 00:00:00', UTC_TIMESTAMP(6))",
			"UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND",
			"TIMESTAMPDIFF(MICROSECOND, UTC_TIMESTAMP(6), expires)",
			"TIMESTAMPDIFF(MICROSECOND, NOW(6), SYSDATE(6))"
	}
	return "statement_timestamp()",
		"CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000000 AS bigint)",
		"statement_timestamp() + CAST(? AS bigint) * interval '1 microsecond'",
		"CAST(EXTRACT(EPOCH FROM (expires - statement_timestamp())) * 1000000 AS bigint)",
		"CAST(EXTRACT(EPOCH FROM (clock_timestamp() - statement_timestamp())) * 1000000 AS bigint)"
}

// schemaOf returns the dialect's CREATE TABLE of table, the clause of an
// INSERT that overwrites a row of the same name and owner, and the columns
// added since the first version of the table, with their types (see
// queries.upgrade).
func schemaOf(d Dialect, table string) (create, upsert string, columns [][2]string) {
	upsert = "ON CONFLICT (name, owner) DO UPDATE SET mode = EXCLUDED.mode, token = EXCLUDED.token, expires = EXCLUDED.expires," +
		" lim = EXCLUDED.lim, weight = EXCLUDED.weight, val = EXCLUDED.val"
	columns = [][2]string{{"lim", "bigint NOT NULL DEFAULT 0"}, {"weight", "bigint NOT NULL DEFAULT 0"}, {"val", "bytea"}}
	create = `CREATE TABLE IF NOT EXISTS ` + table + ` (
	name    text COLLATE "C" NOT NULL,
	owner   text COLLATE "C" NOT NULL,
	mode    smallint NOT NULL,
	token   bigint NOT NULL,
	expires timestamptz,
	lim     bigint NOT NULL DEFAULT 0,
	weight  bigint NOT NULL DEFAULT 0,
	val     bytea,
	PRIMARY KEY (name, owner)
)`
	if d == MySQL {
		upsert = "ON DUPLICATE KEY UPDATE mode = VALUES(mode), token = VALUES(token), expires = VALUES(expires)," +
			" lim = VALUES(lim), weight = VALUES(weight), val = VALUES(val)"
		columns[2][1] = "varbinary(4096) NULL"
		create = "CREATE TABLE IF NOT EXISTS " + table + ` (
	name    varbinary(512) NOT NULL,
	owner   varbinary(64) NOT NULL,
	mode    tinyint NOT NULL,
	token   bigint NOT NULL,
	expires datetime(6) NULL,
	lim     bigint NOT NULL DEFAULT 0,
	weight  bigint NOT NULL DEFAULT 0,
	val     varbinary(4096) NULL,
	PRIMARY KEY (name, owner)
) ENGINE=InnoDB`
	}
	return create, upsert, columns
}

func newQueries(d Dialect, table string) queries {
	now, clock, after, left, elapsed := clocksOf(d)
	create, upsert, columns := schemaOf(d, table)
	live := "mode = ? AND (? = 0 OR token = ?) AND expires > " + now
	if d == PostgreSQL {
		live = "mode = ? AND (CAST(? AS bigint) = 0 OR token = ?) AND expires > " + now
	}
	q := queries{
		dialect: d,
		create:  create,
		table:   table,
		now:     now,
		lock:    "INSERT INTO " + table + " (name, owner, mode, token) VALUES (?, '', 0, 0) ON DUPLICATE KEY UPDATE mode = mode",
		columns: columns,
		rows: "SELECT owner, mode, token, " + left + ", " + elapsed + ", lim, weight FROM " + table + " WHERE name = ?" +
			" UNION ALL SELECT '', -1, " + clock + ", NULL, 0, 0, 0",
		state:    "SELECT owner, mode, token, " + left + ", " + elapsed + ", lim, weight, val FROM " + table + " WHERE name = ?",
		grant:    "INSERT INTO " + table + " (name, owner, mode, token, expires, lim, weight, val) VALUES (?, ?, ?, ?, " + after + ", ?, ?, ?) " + upsert,
		extend:   "UPDATE " + table + " SET mode = ?, expires = " + after + " WHERE name = ? AND owner = ?",
		purge:    "DELETE FROM " + table + " WHERE name = ? AND owner <> '' AND expires <= " + now,
		refresh:  "UPDATE " + table + " SET expires = " + after + " WHERE name = ? AND owner = ? AND " + live,
		leave:    "DELETE FROM " + table + " WHERE name = ? AND owner = ? AND (mode IN (3, 4) OR expires <= " + now + ")",
		release:  "DELETE FROM " + table + " WHERE name = ? AND owner = ? AND " + live,
		unanchor: "DELETE FROM " + table + " WHERE name = ? AND owner = ''",
	}
	if d == PostgreSQL {
		adds := make([]string, len(columns))
		for i, c := range columns {
			adds[i] = "ADD COLUMN IF NOT EXISTS " + c[0] + " " + c[1]
		}
		q.upgrade = "ALTER TABLE " + table + " " + strings.Join(adds, ", ")
		q.lock = "SELECT pg_advisory_xact_lock(?)"
		q.purge = "DELETE FROM " + table + " WHERE name = ? AND (owner = '' OR expires <= " + now + ")"
		q.refresh += " RETURNING token"
		q.release = "WITH d AS (DELETE FROM " + table + " WHERE name = ? AND owner = ? AND owner <> '' AND (" +
			"(mode = ? AND (CAST(? AS bigint) = 0 OR token = ?)) OR mode IN (3, 4) OR expires <= " + now + ")" +
			" RETURNING mode, expires > " + now + " AS live)," +
			" n AS (SELECT pg_notify(?, ?) FROM d LIMIT 1)" +
			" SELECT COALESCE(bool_or(live AND mode IN (1, 2)), false), (SELECT count(*) FROM n) FROM d"
		q.notify = "SELECT pg_notify(?, ?)"
		q.batch = "UPDATE " + table + " AS t SET expires = " + now + " + b.ttl * interval '1 microsecond'" +
			" FROM unnest(CAST(? AS text[]), CAST(? AS text[]), CAST(? AS smallint[]), CAST(? AS bigint[]), CAST(? AS bigint[]))" +
			" AS b(name, owner, mode, token, ttl)" +
			" WHERE t.name = b.name AND t.owner = b.owner AND t.mode = b.mode AND (b.token = 0 OR t.token = b.token)" +
			" AND t.expires > " + now + " RETURNING t.name, t.owner"
		for _, s := range []*string{&q.lock, &q.rows, &q.state, &q.grant, &q.extend, &q.purge, &q.refresh,
			&q.leave, &q.release, &q.notify, &q.batch} {
			*s = numbered(*s)
		}
	}
	return q
}

// numbered replaces the '?' placeholders of s with $1, $2… The statements
// contain no other '?'.
func numbered(s string) string {
	var b strings.Builder
	n := 0
	for _, r := range s {
		if r == '?' {
			n++
			b.WriteString("$" + strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// lockID is the PostgreSQL advisory lock that serialises the acquires of
// key: a 64-bit FNV-1a hash of the key. It does not depend on the table,
// whose name may be written in several ways ("t", "public.t"). Two keys
// that share a hash, or the same key in two tables, only wait for each
// other's transactions; the advisory lock space is the database's, shared
// with the application's own advisory locks.
func lockID(key string) int64 {
	h := fnv.New64a()
	h.Write([]byte(key))
	return int64(h.Sum64())
}

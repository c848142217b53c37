// Package sqldriver is a locker driver for PostgreSQL and MySQL/MariaDB,
// over the user's [database/sql.DB]: pgx's stdlib driver
// (github.com/jackc/pgx/v5/stdlib, driver name "pgx") for PostgreSQL, and
// github.com/go-sql-driver/mysql for MySQL and MariaDB.
//
//	db, err := sql.Open("pgx", "postgres://app@db.internal/app") // or "mysql", a DSN with interpolateParams=true
//	if err != nil {
//		return err
//	}
//	if err := sqldriver.CreateTable(ctx, db, nil); err != nil { // or DDL's statement, in a migration
//		return err
//	}
//	d, err := sqldriver.New(db, nil)
//	if err != nil {
//		return err
//	}
//	c := locker.New(d) // one Client per process, shared by every handle
//	defer c.Close(ctx)
//	h, err := c.Mutex("orders/42").Acquire(ctx)
//
// Every lock type works on it: RWMutex (a row per reader, each expiring on
// its own), ReentrantMutex, Semaphore, Election and MultiLock. Waiters
// that have waited a moment (locker.WithFairnessThreshold) join a queue of
// rows, served in order across processes, so a waiting writer is not
// starved by a stream of readers. Renewals due together go out in one
// statement (PostgreSQL) or a few transactions (MySQL). A lost hold is
// learnt from a refused renewal or the front-end's local deadline: the
// database does not report it. TTLs are kept in microseconds, between
// [MinTTL] and [MaxTTL].
//
// # The lease table
//
// All locks live in one table, DefaultTable ("locker_leases") unless
// Options.Table names another. The driver never creates it: call
// [CreateTable] (every process may, at startup: concurrent calls all
// succeed), or put the statement that [DDL] returns in your migrations
// (PostgreSQL, then MySQL and MariaDB):
//
//	CREATE TABLE IF NOT EXISTS "locker_leases" (
//		name    text COLLATE "C" NOT NULL,
//		owner   text COLLATE "C" NOT NULL,
//		mode    smallint NOT NULL,
//		token   bigint NOT NULL,
//		expires timestamptz,
//		lim     bigint NOT NULL DEFAULT 0,
//		weight  bigint NOT NULL DEFAULT 0,
//		val     bytea,
//		PRIMARY KEY (name, owner)
//	)
//
//	CREATE TABLE IF NOT EXISTS `locker_leases` (
//		name    varbinary(512) NOT NULL,
//		owner   varbinary(64) NOT NULL,
//		mode    tinyint NOT NULL,
//		token   bigint NOT NULL,
//		expires datetime(6) NULL,
//		lim     bigint NOT NULL DEFAULT 0,
//		weight  bigint NOT NULL DEFAULT 0,
//		val     varbinary(4096) NULL,
//		PRIMARY KEY (name, owner)
//	) ENGINE=InnoDB
//
// A table made by an older version, without lim, weight and val, fails
// with an error wrapping [ErrOldTable]. CreateTable adds the columns, or
// run the statement [UpgradeDDL] returns (a moment's ALTER TABLE on
// PostgreSQL 11, MariaDB 10.3, MySQL 8.0.12 or later; PostgreSQL, then
// MySQL and MariaDB):
//
//	ALTER TABLE "locker_leases"
//		ADD COLUMN IF NOT EXISTS lim bigint NOT NULL DEFAULT 0,
//		ADD COLUMN IF NOT EXISTS weight bigint NOT NULL DEFAULT 0,
//		ADD COLUMN IF NOT EXISTS val bytea
//
//	ALTER TABLE `locker_leases`
//		ADD COLUMN lim bigint NOT NULL DEFAULT 0,
//		ADD COLUMN weight bigint NOT NULL DEFAULT 0,
//		ADD COLUMN val varbinary(4096) NULL
//
// Older versions keep working on the upgraded table but know nothing of
// limits: do not let them take shared holds of a key used as a semaphore.
//
// Keys are stored as they are and compared byte by byte, so keys that
// differ only in case, accents or trailing spaces are different locks. On
// PostgreSQL the database's encoding must be UTF8 (the default) for keys
// outside ASCII. A released lock keeps no row.
//
// # Waiting
//
// On PostgreSQL through pgx a release sends NOTIFY, and the driver LISTENs
// on one pooled connection of its own while waiters exist. On MySQL and
// MariaDB each waiter blocks in GET_LOCK on a user-level lock (a "bell")
// of the owner ahead of it in the key's queue, so a release wakes exactly
// the next waiter. Bells are wake-ups only: the lease rows stay the truth.
// With Options.NoNotify, and on PostgreSQL through other database/sql
// drivers, waiters poll with the front-end's backoff (up to 250ms by
// default; locker.WithBackoff(time.Millisecond, 10*time.Millisecond)
// trades more queries for handoffs in milliseconds).
//
// # Connection pools
//
// Every operation is one statement or one short transaction, and no
// session state stays on a pooled connection, so any *sql.DB settings
// work, and so do transaction-pooling proxies such as PgBouncer, except
// for LISTEN: there set Options.NoNotify or connect directly (and, before
// PgBouncer 1.21 or without max_prepared_statements, set
// default_query_exec_mode=exec in the DSN). Count in SetMaxOpenConns the
// listening connection, and on MySQL one connection per waiting key and
// process and per exclusive hold granted after a wait. With
// go-sql-driver/mysql add interpolateParams=true to the DSN: one round
// trip per statement instead of three, values still escaped by the client.
//
// # Fencing tokens and durability
//
// A grant's token is max(the greatest token among the lock's rows + 1,
// the database's clock in microseconds): large numbers with gaps, never 0.
// A released lock keeps no row, so tokens strictly increase per key as
// long as the database's clock does not step back, between two grants of
// a key, by as much as the time between them (NTP's slewing is safe; a
// step back, or a failover to a server whose clock is behind, may not
// be). Expiry is judged by the database's clock, never the client's.
// Holds are committed rows, as durable as the database: with the default
// fsync settings a crash loses no hold, but asynchronous replication can
// lose the latest grants on a failover; rely on this driver across a
// failover only with synchronous replication.
//
// # Errors
//
// The table name is validated and quoted; every other value is a bind
// parameter. Errors wrap the database driver's error (*pgconn.PgError,
// *mysql.MySQLError) and name the operation and key. [ErrNoTable],
// [ErrOldTable], errors no retry can cure (syntax, privileges) and every
// call after the *sql.DB was closed ([driver.ErrClosed]) are marked
// [driver.Permanent]; connection failures are retried by package locker,
// deadlocks and serialisation failures by the driver (three tries).
//
// # Counted holds and values
//
// Semaphores are counted shared holds: every live shared hold of a key
// must have the same limit, or the request fails with a
// [*driver.LimitError]. Every grant stores Request.Value (at most
// [driver.MaxValueLen] bytes), which [Driver.Inspect] reports.
//
// The rows, each operation's statements, the token's clock and the MySQL
// bells are described in docs/sqldriver.md at the repository's root.
package sqldriver

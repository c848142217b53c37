// Package sqldriver is a locker driver for PostgreSQL and MySQL/MariaDB,
// over the user's [database/sql.DB]: pgx's stdlib driver
// (github.com/jackc/pgx/v5/stdlib, driver name "pgx") for PostgreSQL, and
// github.com/go-sql-driver/mysql for MySQL and MariaDB.
//
//	db, err := sql.Open("pgx", "postgres://app@db.internal/app") // or "mysql", a DSN with interpolateParams=true
//	if err != nil {
//		return err
//	}
//	if err := sqldriver.CreateTable(ctx, db, nil); err != nil { // or the DDL below, in a migration
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
// starved by a stream of readers; on PostgreSQL they are
// woken by NOTIFY, on MySQL by the release of a user-level lock held by
// the owner ahead of them (see Waiting). Renewals due together
// go out in one statement (PostgreSQL) or a few transactions (MySQL). A
// lost hold is learnt from a refused renewal or the front-end's local
// deadline: the database does not report it. Holds are committed rows, as
// durable as the rest of the database. TTLs are kept in microseconds,
// between [MinTTL] and [MaxTTL].
//
// # The lease table
//
// All locks live in one table, DefaultTable ("locker_leases") unless
// Options.Table names another. The driver never creates it: call
// [CreateTable], or put the statement that [DDL] returns in your own
// migrations. CreateTable may be called by every process at startup: any
// number of concurrent calls, from any number of processes, serialise on
// the database and all succeed. For PostgreSQL:
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
// For MySQL and MariaDB (InnoDB):
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
// The key is stored as it is, compared byte by byte (the "C" collation;
// varbinary), so that keys that differ only in case, accents or trailing
// spaces are different locks. On PostgreSQL the database's encoding must
// be UTF8 (the default) for keys outside ASCII. Expiry is judged by the
// database's clock, never the client's. A released lock keeps no row.
//
// # Upgrading the table
//
// Versions of this package before counted holds and values created the
// table without the columns lim, weight and val. CreateTable adds them to
// such a table (under the same lock as the CREATE TABLE, and only when one
// is missing, so that every process may still call it at startup). In
// your own migrations, run the statement [UpgradeDDL] returns; on
// PostgreSQL (11 or later adds the columns without rewriting the table):
//
//	ALTER TABLE "locker_leases"
//		ADD COLUMN IF NOT EXISTS lim bigint NOT NULL DEFAULT 0,
//		ADD COLUMN IF NOT EXISTS weight bigint NOT NULL DEFAULT 0,
//		ADD COLUMN IF NOT EXISTS val bytea
//
// and on MySQL and MariaDB (MySQL has no ADD COLUMN IF NOT EXISTS):
//
//	ALTER TABLE `locker_leases`
//		ADD COLUMN lim bigint NOT NULL DEFAULT 0,
//		ADD COLUMN weight bigint NOT NULL DEFAULT 0,
//		ADD COLUMN val varbinary(4096) NULL
//
// The ALTER TABLE holds up the table's other statements while it runs,
// which is a moment: PostgreSQL 11 and later, MariaDB 10.3 and later and
// MySQL 8.0.12 and later add such columns without copying the table.
// This version on a table that lacks them fails with an error wrapping
// [ErrOldTable], marked [driver.Permanent]. The older versions keep
// working on the upgraded table (their rows take the defaults: uncounted,
// no value), but they know nothing of limits: do not let them take shared
// holds of a key that this version uses as a semaphore.
//
// # Waiting
//
// On PostgreSQL through pgx, New returns a [*Driver] that notifies
// (its Capabilities report Notify): Release (and an
// acquire that removes expired queue entries) calls pg_notify on the
// channel "locker:<table>" with the key as payload, and the driver LISTENs
// on one connection of its own, taken from the pool while waiters are
// subscribed (and for a second after the last one leaves, or until
// [Driver.Close]), and reconnecting when that connection fails. The
// connection hears the releases of every key in the table and passes on
// those of the keys it has subscribers for.
//
// On MySQL and MariaDB (without Options.NoNotify) New returns a driver
// whose Capabilities report Acquire: the waiter at the head of a
// process's line for a key waits in [Driver.Acquire], in the key's wait
// queue, woken by a bell rather than by polling. Every waiting or
// holding owner has a bell: a user-level lock (GET_LOCK) named "locker:"
// and 32 hex digits of a SHA-256 of the database, the table, the key and
// the owner (lock names are the server's, and at most 64 characters
// long). Bells are wake-ups only: the lease rows stay the truth for
// grants, TTLs, tokens and losses.
//
//   - A waiter takes a connection of its own from the pool and its own
//     bell on it, then makes a queued attempt on it. Refused, it blocks in
//     GET_LOCK on the bell of the owner just ahead of it, which the
//     attempt read (the queue entry before its own or, at the head, the
//     one live hold), for at most the time the holds in its way may last
//     and a third of its TTL (to renew its queue entry), and releases
//     that bell in the same statement. Woken, it attempts again.
//   - An exclusive holder granted by Acquire keeps its bell, and the
//     connection, until its Release, which releases the bell
//     (RELEASE_ALL_LOCKS) after deleting the hold and returns the
//     connection to the pool: that wakes exactly the waiter behind it,
//     the next in the queue's order, which is granted the key in one
//     attempt. The bell is also released when a renewal finds the hold
//     gone, or when the hold's TTL passes without a renewal. A shared
//     grant gives its bell back at once, waking the waiter behind, which
//     may be a reader granted beside it.
//   - A holder or waiter that dies drops its connection, and the server
//     releases its bell: the waiter behind finds the dead owner's hold or
//     queue entry still live and waits for it to run out, as before.
//   - A waiter whose owner ahead has no bell (a holder granted without
//     waiting, several readers, a hold whose bell was lost) polls, with a
//     backoff from 1ms to 50ms capped by the hold's remaining lease: only
//     the queue's head meets holds, so at most one waiter of a key polls.
//   - A waiter whose context ends returns at once: its connection is
//     closed, which ends its GET_LOCK and releases whatever its session
//     held (MariaDB notices a closed connection while GET_LOCK waits;
//     the package's tests check it), and its queue entry is deleted in
//     the background.
//
// With Options.NoNotify, and on PostgreSQL through other database/sql
// drivers, waiters poll TryAcquire with exponential backoff, each wait capped by the
// remaining lease that the refused attempt reported
// ([driver.LockedError]). The front-end's default backoff grows to
// 250ms, which bounds a contended lock to a few handoffs per second;
// locker.WithBackoff(time.Millisecond, 10*time.Millisecond) trades more
// queries for handoffs in milliseconds (see BENCHMARKS.md).
//
// # Connection pools
//
// Every operation is one statement or one short transaction, and the
// driver keeps no session state on pooled connections: no advisory locks,
// no temporary tables, no session variables. MySQL's bells are held on
// connections taken out of the pool (DB.Conn) and released before a
// connection goes back, or the connection is closed. It therefore works
// with any *sql.DB pool settings and behind transaction-pooling proxies
// such as PgBouncer, except for LISTEN, which needs a session of its own: behind a
// transaction-pooling PgBouncer, set Options.NoNotify (waiters then poll)
// or give the driver a *sql.DB that connects to PostgreSQL directly. The
// statements use pgx's query execution mode as configured on the pool
// (prepared and cached by default), so the usual pgx advice applies:
// behind PgBouncer older than 1.21, or without its max_prepared_statements,
// set default_query_exec_mode=exec in the DSN. The transaction-scoped
// advisory lock of an acquire ends with its transaction and is safe under
// transaction pooling. The listening connection is one more connection of
// the pool while waiters exist; count it in SetMaxOpenConns.
//
// On MySQL each waiting key (one waiter per key and process at a time)
// and each exclusive hold granted after a wait takes one connection of
// the pool for as long as it waits or holds: count them in
// SetMaxOpenConns, or set Options.NoNotify to poll instead.
//
// With go-sql-driver/mysql, add interpolateParams=true to the DSN: each
// statement then takes one round trip instead of a prepare, an execute and
// a close. The values are still escaped by the client, never concatenated
// into SQL by this package.
//
// # Fencing tokens
//
// A grant's token is the database's clock in microseconds since the Unix
// epoch, read by the acquire's transaction once the key's acquires are
// serialised, or one more than the greatest token among the lock's rows
// when that is greater: max(last+1, clock). Tokens are therefore large
// numbers (about 1.8e15 in 2026) with gaps, never 0. Queue entries take
// their places in line the same way; a refused attempt takes nothing.
//
// No row remembers the tokens of a released lock: the clock stands for
// them. Tokens are strictly increasing per key on this assumption: the
// database's clock does not step back, between two grants of a key, by as
// much as the time that passed between them (the clock read at a grant is
// later than at the key's previous grant). A clock that only moves forward
// (NTP slews small corrections) meets it; a step back of the server's
// clock, or a failover to a server whose clock is behind, by more than
// the time since a key was last granted can give that key a smaller token
// than before. While a key has rows, their tokens keep its next token
// greater whatever the clock does.
//
// Holds are committed with the same durability as the rest of the
// database: with PostgreSQL's default fsync and synchronous_commit, and
// InnoDB's default innodb_flush_log_at_trx_commit=1, a crash loses no
// hold (the package's tests crash and restart both databases while locks
// are held). Asynchronous replication can lose the latest commits on a
// failover, and with them holds; rely on this driver across a failover
// only with synchronous replication.
//
// Versions of this package before tokens came from the clock counted them
// 1, 2, 3… in a counter row per key (owner empty). Their counter rows are
// read as rows of the lock (the next token is greater) and deleted on
// PostgreSQL by the key's next acquire. Do not run them on the same table
// as this version: they would count on from a counter that is gone.
//
// # Safety of the SQL
//
// The table name is validated (letters, digits and underscores, optionally
// one qualifier: "schema.table" or "database.table") and quoted in every
// statement; every other value (keys, owners, tokens, TTLs) is a bind
// parameter. Keys are stored as they are, so any key package locker
// accepts works.
//
// # Errors
//
// Errors wrap the database driver's error (reach it with errors.As, for
// example as *pgconn.PgError or *mysql.MySQLError) and name the operation
// and key. A missing table gives an error wrapping [ErrNoTable] that names
// the table; it, and other errors no retry can cure (syntax, privileges),
// are marked [driver.Permanent], so that Lock returns them at once instead
// of retrying. So are the errors of every call after the *sql.DB was
// closed, which wrap [ErrClosed]: the driver learns that the pool is
// closed by asking it (DB.Conn with a context that has already ended
// answers without a connection), not from the text of database/sql's
// unexported error. Connection failures and lock timeouts are retried by
// package locker. The driver itself runs a statement or transaction again,
// up to three times in all, when the database says that it applied
// nothing: it was the victim of a deadlock or could not be serialised
// (MySQL error 1213, SQLSTATE 40P01 and 40001; on MySQL, concurrent
// acquires of a key can deadlock, rarely, on the gap locks around the
// key's anchor row), or the server ended the session (SQLSTATE
// 57P01–57P03: pg_terminate_backend, a shutdown, a restart; on another
// pooled connection). A caller does not see a deadlock unless it happened
// three times in a row.
//
// # Internals: rows and clocks
//
// The key is stored as it is, compared byte by byte (the "C" collation;
// varbinary), so that keys that differ only in case, accents or trailing
// spaces are different locks. On PostgreSQL the database's encoding must
// be UTF8 (the default) for keys outside ASCII. A lock has one row per
// holder and per queued waiter (owner = the front-end's 32 hex digits),
// and on MySQL one anchor row (owner is the empty string) while it is in
// use:
//
//	mode 0  MySQL's anchor row, which acquires lock: token 0, expires NULL
//	mode 1  exclusive hold, mode 2 shared hold: token is the hold's fencing token
//	mode 3  queued exclusive waiter, mode 4 queued shared waiter: token is its place in line
//	expires the end of the hold or queue entry, by the database's clock
//	lim     the limit of a counted shared hold or queue entry (a semaphore's units), else 0
//	weight  the units a counted hold or queue entry takes, else 0
//	val     the value published with a hold (Request.Value), NULL when empty
//
// A hold is live while expires is later than the database's clock
// (statement_timestamp() on PostgreSQL, UTC_TIMESTAMP(6) on MySQL); the
// client's clock is never used. That clock is read when a statement
// starts. The time a hold has left, which a refusal reports
// ([driver.LockedError].Remaining) and Inspect shows, is measured when
// the statement read the hold's row instead: the time left by the
// statement's clock less the time the database's clock ran from the
// statement's start to the read (clock_timestamp() on PostgreSQL,
// SYSDATE(6) on MySQL; a MySQL server started with --sysdate-is-now
// reads SYSDATE at the statement's start too). A read may see a renewal
// that committed after the statement started, whose expiry is then more
// than its TTL after the statement's clock; measured at the read, it is
// at most the TTL. Whether a hold is live is still judged by the
// statement's start, the earlier reading: a hold that expires while the
// statement waits or reads still counts.
//
// Expired rows are deleted by the next acquire of the same lock. A
// released lock keeps no row: Release deletes the owner's row, and on
// MySQL the anchor, which the next acquire of the key creates again.
// Rows remain only for keys that are held or waited for, and for holds
// and queue entries that expired without a release, until the key's next
// acquire or release.
//
// # Internals: operations
//
//   - TryAcquire, queued (Request.Queued) or not, runs one short transaction. It first
//     serialises with the other acquires of the key: on PostgreSQL with
//     pg_advisory_xact_lock of a 64-bit hash of the key (a
//     transaction-scoped lock, released at commit, never held on an idle
//     pooled connection), which writes nothing; on MySQL with INSERT … ON
//     DUPLICATE KEY UPDATE of the lock's anchor row, which locks that one
//     record, and writes only when it creates it. It then reads the lock's
//     rows with the time each has left, and the database's clock, and,
//     decided in Go from what it read, runs one statement that grants (an
//     upsert of the owner's row with the next token), extends the owner's
//     own hold (same token), or joins or renews the wait queue, and
//     commits. Expired rows found on the way are deleted in the
//     same transaction. Through pgx the driver pipelines these
//     statements on one pooled connection: BEGIN, the lock and the read in
//     one round trip, the write and COMMIT in a second (each statement
//     still takes its snapshot when the server starts it, after the lock;
//     for the clocks see "Internals: the token's clock"). Through other drivers (go-sql-driver/mysql, lib/pq) it is
//     a database/sql transaction of five round trips (BEGIN, lock, read,
//     write, COMMIT). A refused attempt that does not queue writes
//     nothing (on MySQL, unless the key's anchor row had gone with a
//     release: the first attempt after it creates it again), and takes two
//     round trips through pgx (the second is the COMMIT) and four through
//     database/sql.
//   - Refresh is one UPDATE that extends the owner's live hold in its mode
//     (and with its token, unless the lease's token is 0).
//   - Release is one DELETE of the owner's live hold in its mode and token;
//     it also removes the owner's queue entry. On PostgreSQL the same
//     statement sends the NOTIFY. On MySQL a second DELETE removes a queue
//     entry when there was no hold, and, once one of them has deleted a
//     row, a last one deletes the lock's anchor row by its primary key
//     (two round trips; three without a hold). An anchor deleted while others still hold
//     the lock is created again by the next acquire; deleting it only with
//     the lock's last row would need a locking read of the lock's rows,
//     which in InnoDB also locks the first row of the next key, and
//     deadlocks with that key's releases. On PostgreSQL a Release whose
//     lease has token 0 runs the DELETE in a transaction after the key's
//     advisory lock (pipelined in one round trip through pgx; four round
//     trips through database/sql), for the reason below.
//   - RefreshBatch is one UPDATE … FROM unnest(…) for up to 1000 leases on
//     PostgreSQL, and one transaction (a locking SELECT and one UPDATE,
//     both by primary-key lookups) per 200 leases on MySQL; a batch of one
//     lease is a Refresh.
//
// Re-acquiring by the same owner is idempotent: it extends the hold and
// returns its token. Refresh and Release check the owner, mode and token,
// and never touch an expired or foreign hold. A context that ends during
// an acquire rolls its transaction back, unless it ends while the COMMIT
// is on its way: the acquire then fails, and the COMMIT may still apply
// on the server after it has returned. A Release of the same owner with
// token 0, which is how a caller cleans up after a failed acquire (the
// locker front-end does), waits for that transaction to end and removes
// what it left: on PostgreSQL it takes the key's advisory lock first (a
// plain DELETE neither sees nor waits for rows inserted by a transaction
// that has not committed yet), on MySQL its DELETE's locking read waits
// for the rows that transaction wrote.
//
// # Internals: the token's clock
//
// The token's clock is read by the statement that reads the lock's rows,
// which runs once the acquire holds the key's lock, and so after the
// commit of every earlier grant of the key. On PostgreSQL it is
// clock_timestamp(), read when the statement produces the clock's row, not
// statement_timestamp(): that is the receipt of the statement's message,
// and with pgx's simple protocol (default_query_exec_mode=simple_protocol,
// as behind PgBouncer) BEGIN, the lock and the read are one message,
// received before the acquire waited for the lock; a token taken from it
// could be smaller than one granted, and released, while the acquire
// waited. clock_timestamp() is after the lock with either protocol, and
// with database/sql drivers such as lib/pq. On MySQL it is the read
// statement's UTC_TIMESTAMP(6), its start: go-sql-driver/mysql sends the
// lock and the read as statements of their own, the read once the lock's
// has returned. Liveness keeps the statement's start (see Internals: rows
// and clocks): the earlier reading, and the safe one for it.
//
// # Internals: shared holds and fairness
//
// Every shared holder has its own row, expiry and token, so a reader that
// dies expires on its own while others renew. The driver keeps a wait
// queue with the queue rows above, judged by the database's
// clock: once waiters are queued, the key goes only to the head of the
// queue, or to a run of readers at its head, so that a waiting writer is
// not starved by a stream of readers, and a waiter in one process is not
// overtaken by a newcomer in another.
//
// # Internals: counted holds and values
//
// A counted shared request (Request.Limit > 0, for locker.Semaphore) is a
// shared hold whose row also records the key's limit (lim) and the units
// it takes (weight). The acquire's transaction, serialised with the key's
// other acquires as above, grants it when no other owner holds the key
// exclusively, when the weights of the key's live holds plus its own are
// at most its limit, and when the wait queue lets it: a newcomer waits
// behind any live queue entry, and a queued request is served only if
// every entry ahead of it is shared and their weights, added to the
// holds' and its own, still fit in the limit, so that a large request is
// not overtaken by small ones. A refusal's [driver.LockedError] reports
// the time until the first hold or queue entry in its way may expire (the
// last, for an uncounted request). Queue entries record their limit and
// weight too. Every live shared hold and shared queue entry of a key must
// have the same limit (0 for uncounted shared holds): a shared request
// whose limit differs is refused with an error wrapping a
// [*driver.LimitError] that carries theirs, and writes nothing but the
// purge of expired rows. An exclusive request is not concerned by limits:
// it waits for every holder, counted or not. Grants of counted requests
// take tokens as every grant does.
//
// Every grant stores Request.Value (at most [driver.MaxValueLen] bytes,
// any content) in val, a binary column; [Driver.Inspect] reports it as
// Holder.Value, with Holder.Weight and KeyState.Limit. A re-acquire by the
// holder extends its row and keeps the weight, value and token of the
// grant. The value goes with the hold's row: a released key keeps no row,
// as before. Inspect reads the values in a statement of its own;
// acquires never read them back.
package sqldriver

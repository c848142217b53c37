package sqldriver

import (
	"context"
	"database/sql"
	sqldrv "database/sql/driver"
	"errors"
	"fmt"
	"regexp"
	"strings"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"
)

// DefaultTable is the lease table used when Options.Table is empty.
const DefaultTable = "locker_leases"

// TTL limits reported by Capabilities. Expiry times are kept in microseconds:
// a TTL is truncated to a multiple of a microsecond, and the lease reports
// the truncated TTL.
const (
	MinTTL = time.Millisecond
	MaxTTL = 365 * 24 * time.Hour
)

// Dialect is the SQL flavour of the database.
type Dialect uint8

const (
	// Detect picks the dialect from the *sql.DB's driver: pgx's stdlib
	// driver means PostgreSQL, go-sql-driver/mysql means MySQL.
	Detect Dialect = iota
	// PostgreSQL is PostgreSQL 11 or later (or a compatible server).
	PostgreSQL
	// MySQL is MySQL 5.7 or later, or MariaDB 10.3 or later, with InnoDB.
	MySQL
)

// String returns "postgresql", "mysql" or "detect".
func (d Dialect) String() string {
	switch d {
	case Detect:
		return "detect"
	case PostgreSQL:
		return "postgresql"
	case MySQL:
		return "mysql"
	}
	return fmt.Sprintf("Dialect(%d)", uint8(d))
}

// Options configures a Driver. The zero value, like a nil *Options,
// selects the defaults.
type Options struct {
	// Table is the lease table: a name of letters, digits and
	// underscores, not starting with a digit, at most 63 bytes, optionally
	// qualified by a schema (PostgreSQL) or database (MySQL) name of the
	// same form ("locks.leases"). It is quoted in every statement. Empty
	// means DefaultTable.
	Table string
	// Dialect is the database's SQL flavour. Detect (the zero value)
	// works for pgx's stdlib driver and go-sql-driver/mysql; set it for
	// other database/sql drivers.
	Dialect Dialect
	// NoNotify turns off the wake-ups of waiters, PostgreSQL's
	// LISTEN/NOTIFY and MySQL's bells (see Waiting in the package
	// documentation): New then returns a driver whose Capabilities report
	// neither Notify nor Acquire, whose waiters poll, and which never
	// takes a connection of its own from the pool.
	NoNotify bool
}

// Driver is a locker driver over a database/sql database. It implements
// driver.Driver, driver.BatchRefresher, driver.Inspector,
// driver.Notifier and driver.Acquirer, and its Capabilities report shared
// and counted holds, values, a wait queue (Request.Queued) and TTL
// limits. It is safe for concurrent use. Create it with New.
//
// How its waiters are woken depends on the database, which a method set
// cannot say: on PostgreSQL through pgx's stdlib driver by LISTEN/NOTIFY
// (its Capabilities report Notify), on MySQL by a user-level lock that
// the owner ahead of them releases (its Capabilities report Acquire),
// each unless
// Options.NoNotify. Elsewhere Subscribe and Acquire fail with an error
// wrapping errors.ErrUnsupported, package locker calls neither, and
// waiters poll.
type Driver struct {
	db      *sql.DB
	dialect Dialect
	table   string // as given, for messages
	q       queries
	// pipeline: acquires pipeline their statements over pgx (PostgreSQL
	// through pgx's stdlib driver).
	pipeline bool
	// ln wakes waiters by LISTEN/NOTIFY; nil when the driver does not
	// notify.
	ln *listener
	// bells wake MySQL waiters (Acquire); nil elsewhere.
	bells *bells
	errs  driverkit.Errors // names the driver's errors
}

var (
	_ driver.Driver         = (*Driver)(nil)
	_ driver.Describer      = (*Driver)(nil)
	_ driver.BatchRefresher = (*Driver)(nil)
	_ driver.Notifier       = (*Driver)(nil)
	_ driver.Acquirer       = (*Driver)(nil)
)

// New returns a driver over db that keeps its leases in the table named by
// opts (see CreateTable). opts may be nil. The driver never closes db.
//
// On PostgreSQL through pgx's stdlib driver its waiters are woken by
// NOTIFY, and on MySQL by the release of the bell, a user-level lock, of
// the owner ahead of them (unless Options.NoNotify; see Waiting in the
// package documentation); otherwise they poll with a backoff bounded by the
// holder's remaining lease.
func New(db *sql.DB, opts *Options) (*Driver, error) {
	d, err := NewPolling(db, opts)
	if err != nil {
		return nil, err
	}
	if opts != nil && opts.NoNotify {
		return d, nil
	}
	if d.dialect == MySQL {
		d.bells = &bells{}
		return d, nil
	}
	if _, ok := db.Driver().(*stdlib.Driver); !ok {
		return d, nil
	}
	d.ln = &listener{Driver: d}
	return d, nil
}

// Subscribe implements driver.Notifier where the Capabilities report
// Notify (PostgreSQL through pgx's stdlib driver, made by New without
// Options.NoNotify),
// and otherwise fails with a permanent error wrapping
// errors.ErrUnsupported. It returns once the driver listens, so that every
// release after it returns is heard.
func (d *Driver) Subscribe(ctx context.Context, key string) (driver.Subscription, error) {
	if d.ln == nil {
		return nil, d.errs.Wrap(ctx, "subscribe", key, driver.Permanent(fmt.Errorf("LISTEN/NOTIFY (PostgreSQL through pgx, without Options.NoNotify): %w", errors.ErrUnsupported)))
	}
	return d.ln.Subscribe(ctx, key)
}

// Close stops listening at once, ending the driver's goroutine and closing
// its LISTEN connection, instead of a second after the last subscription
// was closed. Open subscriptions hear nothing more; a later Subscribe
// listens again. It never closes the *sql.DB and always returns nil.
func (d *Driver) Close() error {
	if d.ln == nil {
		return nil
	}
	return d.ln.Close()
}

// NewPolling is New without wake-ups (LISTEN/NOTIFY, MySQL's bells), as
// with Options.NoNotify.
func NewPolling(db *sql.DB, opts *Options) (*Driver, error) {
	if db == nil {
		return nil, errors.New("sqldriver: nil *sql.DB")
	}
	var o Options
	if opts != nil {
		o = *opts
	}
	if o.Table == "" {
		o.Table = DefaultTable
	}
	dialect, err := detect(db, o.Dialect)
	if err != nil {
		return nil, err
	}
	quoted, err := quoteTable(dialect, o.Table)
	if err != nil {
		return nil, err
	}
	_, pgx := db.Driver().(*stdlib.Driver)
	d := &Driver{db: db, dialect: dialect, table: o.Table, q: newQueries(dialect, quoted),
		pipeline: dialect == PostgreSQL && pgx}
	d.errs = d.newErrors()
	return d, nil
}

// detect returns d, or the dialect of db's driver when d is Detect.
func detect(db *sql.DB, d Dialect) (Dialect, error) {
	switch d {
	case PostgreSQL, MySQL:
		return d, nil
	case Detect:
		switch db.Driver().(type) {
		case *stdlib.Driver:
			return PostgreSQL, nil
		case *mysql.MySQLDriver:
			return MySQL, nil
		}
		return 0, fmt.Errorf("sqldriver: cannot tell the SQL dialect of database/sql driver %T; set Options.Dialect", db.Driver())
	}
	return 0, fmt.Errorf("sqldriver: unknown dialect %v", d)
}

// identifier is the form of a table name or of its qualifier.
var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)

// quoteTable checks name (see Options.Table) and returns it quoted for d.
func quoteTable(d Dialect, name string) (string, error) {
	parts := strings.Split(name, ".")
	if len(parts) > 2 {
		return "", fmt.Errorf("sqldriver: invalid table name %q: at most one qualifier", name)
	}
	q := `"`
	if d == MySQL {
		q = "`"
	}
	for i, p := range parts {
		if !identifier.MatchString(p) {
			return "", fmt.Errorf("sqldriver: invalid table name %q: want letters, digits and underscores, not starting with a digit, at most 63 bytes per part", name)
		}
		parts[i] = q + p + q
	}
	return strings.Join(parts, "."), nil
}

// Dialect returns the driver's SQL dialect.
func (d *Driver) Dialect() Dialect { return d.dialect }

// Table returns the name of the lease table.
func (d *Driver) Table() string { return d.table }

// Capabilities implements driver.Describer: the driver grants shared and
// counted requests (semaphores; see "Counted holds and values" in the
// package documentation), keeps each grant's value and reports it through
// Inspect, keeps a wait queue (Request.Queued) and refreshes in batches,
// with TTLs from MinTTL to MaxTTL. It reports Notify on PostgreSQL
// through pgx and Acquire on MySQL, unless made with Options.NoNotify.
func (d *Driver) Capabilities() driver.Capabilities {
	return driver.Capabilities{
		Shared: true, Counted: true, Values: true,
		MinTTL: MinTTL, MaxTTL: MaxTTL,
		Queue:        true,
		RefreshBatch: true, Inspect: true,
		Notify:  d.ln != nil,
		Acquire: d.bells != nil,
	}
}

// CreateTable creates the lease table if it does not exist, with the DDL
// shown in the package documentation, and upgrades a table created by an
// older version of the package: it adds the columns lim, weight and val
// when they are missing (see The lease table in the package
// documentation). Call it at startup or from a migration; the driver never
// creates or alters the table itself.
//
// It is safe to call from any number of processes at once, on the same
// database: the calls serialise on the database, so that one creates the
// table and the others find it. On PostgreSQL it runs CREATE TABLE IF NOT
// EXISTS in a transaction after pg_advisory_xact_lock(1819239275, 1), a
// transaction-scoped lock in the two-key space, which never meets the
// single 64-bit keys that acquires lock (CREATE TABLE IF NOT EXISTS alone
// races with itself there and fails with a duplicate key in pg_type). On
// MySQL it holds GET_LOCK('locker.CreateTable') on a connection of its own
// around the statements, and releases it, or discards the connection,
// before it returns. The upgrade runs under the same lock, and only when a
// column is missing. Should the statement still report that the table, or
// its row type, already exists (created meanwhile by a migration that does
// not take the lock), CreateTable checks that the table is there and
// returns nil.
func CreateTable(ctx context.Context, db *sql.DB, opts *Options) error {
	d, err := NewPolling(db, opts)
	if err != nil {
		return err
	}
	if d.dialect == PostgreSQL {
		err = d.inTx(ctx, func(tx *sql.Tx) error {
			if _, err := tx.ExecContext(ctx, createLockPG); err != nil {
				return err
			}
			if _, err := tx.ExecContext(ctx, d.q.create); err != nil {
				return err
			}
			return d.upgradePG(ctx, tx)
		})
	} else {
		err = d.createMySQL(ctx)
	}
	if err != nil && alreadyExists(err) && d.tableExists(ctx) {
		err = nil
	}
	if err != nil {
		return fmt.Errorf("sqldriver: creating table %s: %w", d.table, err)
	}
	return nil
}

// The locks that serialise CreateTable: a PostgreSQL advisory lock in the
// two-key space ("lock" in ASCII, 1), and a MySQL named lock.
const (
	createLockPG    = "SELECT pg_advisory_xact_lock(1819239275, 1)"
	createLockMySQL = "locker.CreateTable"
)

// createMySQL runs the DDL while it holds the MySQL named lock
// createLockMySQL on a connection of its own. The lock belongs to the
// session: when anything fails the connection is discarded, never
// returned to the pool with the lock possibly held.
func (d *Driver) createMySQL(ctx context.Context) error {
	conn, err := d.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	// GET_LOCK waits whole seconds: until ctx's deadline, rounded up, or
	// for a day without one (the lock is held for one statement).
	wait := int64(24 * time.Hour / time.Second)
	if dl, ok := ctx.Deadline(); ok {
		wait = max(1, int64((time.Until(dl)+time.Second-1)/time.Second))
	}
	var got sql.NullInt64
	err = conn.QueryRowContext(ctx, "SELECT GET_LOCK(?, ?)", createLockMySQL, wait).Scan(&got)
	if err == nil && got.Int64 != 1 {
		err = fmt.Errorf("GET_LOCK(%q) not granted within %ds", createLockMySQL, wait)
		if ctx.Err() != nil {
			err = fmt.Errorf("%w: %w", err, ctx.Err())
		}
	}
	if err != nil {
		discard(conn)
		return err
	}
	_, err = conn.ExecContext(ctx, d.q.create)
	if err == nil {
		err = d.upgradeMySQL(ctx, conn)
	}
	var released sql.NullInt64
	if rerr := conn.QueryRowContext(ctx, "SELECT RELEASE_LOCK(?)", createLockMySQL).Scan(&released); rerr != nil || released.Int64 != 1 {
		discard(conn)
	}
	return err
}

// upgradePG adds the columns that a table created by an older version of
// the package lacks, in CreateTable's transaction. The ALTER TABLE, which
// waits for every transaction on the table and holds up the others while
// it runs, is sent only when pg_attribute says a column is missing.
func (d *Driver) upgradePG(ctx context.Context, tx *sql.Tx) error {
	names := make([]string, len(d.q.columns))
	for i, c := range d.q.columns {
		names[i] = "'" + c[0] + "'" // the package's own names, never input
	}
	var n int
	err := tx.QueryRowContext(ctx, "SELECT count(*) FROM pg_attribute WHERE attrelid = to_regclass($1)"+
		" AND attname IN ("+strings.Join(names, ", ")+") AND attnum > 0 AND NOT attisdropped", d.q.table).Scan(&n)
	if err != nil || n == len(names) {
		return err
	}
	_, err = tx.ExecContext(ctx, d.q.upgrade)
	return err
}

// upgradeMySQL adds the columns that a table created by an older version
// of the package lacks, in one ALTER TABLE (MySQL has no ADD COLUMN IF NOT
// EXISTS; CreateTable's named lock keeps its callers from racing). A
// column added meanwhile by a migration that does not take the lock fails
// the ALTER TABLE with a duplicate column; the columns are then read
// again.
func (d *Driver) upgradeMySQL(ctx context.Context, conn *sql.Conn) error {
	missing, err := d.missingColumnsMySQL(ctx, conn)
	if err != nil || len(missing) == 0 {
		return err
	}
	_, err = conn.ExecContext(ctx, "ALTER TABLE "+d.q.table+" "+strings.Join(missing, ", "))
	var me *mysql.MySQLError
	if errors.As(err, &me) && me.Number == 1060 { // ER_DUP_FIELDNAME
		if again, aerr := d.missingColumnsMySQL(ctx, conn); aerr == nil && len(again) == 0 {
			return nil
		}
	}
	return err
}

// missingColumnsMySQL returns the "ADD COLUMN" clauses of the columns the
// table lacks.
func (d *Driver) missingColumnsMySQL(ctx context.Context, conn *sql.Conn) ([]string, error) {
	var schema any // the connection's database
	name := d.table
	if db, t, ok := strings.Cut(d.table, "."); ok {
		schema, name = db, t
	}
	rs, err := conn.QueryContext(ctx, "SELECT column_name FROM information_schema.columns"+
		" WHERE table_schema = COALESCE(?, DATABASE()) AND table_name = ?", schema, name)
	if err != nil {
		return nil, err
	}
	defer rs.Close()
	have := map[string]bool{}
	for rs.Next() {
		var c string
		if err := rs.Scan(&c); err != nil {
			return nil, err
		}
		have[strings.ToLower(c)] = true
	}
	if err := rs.Err(); err != nil {
		return nil, err
	}
	var missing []string
	for _, c := range d.q.columns {
		if !have[c[0]] {
			missing = append(missing, "ADD COLUMN "+c[0]+" "+c[1])
		}
	}
	return missing, nil
}

// discard closes conn's session instead of returning it to the pool.
func discard(conn *sql.Conn) {
	_ = conn.Raw(func(any) error { return sqldrv.ErrBadConn })
}

// alreadyExists reports an error by which a CREATE TABLE says that the
// table, or on PostgreSQL its row type, exists.
func alreadyExists(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		switch pe.Code {
		case "42P07", // duplicate_table
			"42710", // duplicate_object
			"23505": // unique_violation: pg_type_typname_nsp_index, of a concurrent CREATE
			return true
		}
		return false
	}
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1050 // ER_TABLE_EXISTS_ERROR
}

// tableExists reports whether the driver's table exists.
func (d *Driver) tableExists(ctx context.Context) bool {
	rs, err := d.db.QueryContext(ctx, "SELECT 1 FROM "+d.q.table+" WHERE 1 = 0")
	if err != nil {
		return false
	}
	_ = rs.Close()
	return true
}

// DDL returns the statement that CreateTable runs for the dialect and
// table name (DefaultTable when empty), for use in the user's own
// migrations.
func DDL(dialect Dialect, table string) (string, error) {
	q, err := statements("DDL", dialect, table)
	return q.create, err
}

// UpgradeDDL returns the ALTER TABLE that adds to a table created by an
// older version of the package the columns of counted holds and values
// (see The lease table in the package documentation), for the
// user's own migrations. On PostgreSQL it adds each column only if it does
// not exist; on MySQL, which has no such clause, run it once (CreateTable
// adds only the missing columns).
func UpgradeDDL(dialect Dialect, table string) (string, error) {
	q, err := statements("UpgradeDDL", dialect, table)
	if err != nil || dialect == PostgreSQL {
		return q.upgrade, err
	}
	adds := make([]string, len(q.columns))
	for i, c := range q.columns {
		adds[i] = "ADD COLUMN " + c[0] + " " + c[1]
	}
	return "ALTER TABLE " + q.table + " " + strings.Join(adds, ", "), nil
}

// statements returns the statements of dialect and table (DefaultTable
// when empty) for fn, DDL or UpgradeDDL.
func statements(fn string, dialect Dialect, table string) (queries, error) {
	if table == "" {
		table = DefaultTable
	}
	if dialect != PostgreSQL && dialect != MySQL {
		return queries{}, fmt.Errorf("sqldriver: %s needs PostgreSQL or MySQL, not %v", fn, dialect)
	}
	quoted, err := quoteTable(dialect, table)
	if err != nil {
		return queries{}, err
	}
	return newQueries(dialect, quoted), nil
}

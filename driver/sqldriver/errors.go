package sqldriver

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5/pgconn"
)

// ErrNoTable is wrapped by the errors of a driver whose lease table does
// not exist. Create it with CreateTable or the DDL in the package
// documentation.
var ErrNoTable = errors.New("lease table does not exist")

// ErrOldTable is wrapped by the errors of a driver whose lease table was
// created by an older version of the package and lacks the columns of
// this one. Upgrade it with CreateTable or the ALTER TABLE in the package
// documentation.
var ErrOldTable = errors.New("lease table lacks the columns of this version")

// newErrors returns the Errors that name d's errors: permanent when no
// retry cures them, or once the *sql.DB is closed (see closedErr), and
// saying what to do about a missing table or column.
func (d *Driver) newErrors() driverkit.Errors {
	return driverkit.Errors{Driver: "sqldriver", Closed: d.closedErr, Permanent: permanent, Explain: d.explain}
}

// explain says what to do about a missing table or column.
func (d *Driver) explain(err error) error {
	switch {
	case missingTable(err):
		return driver.Permanent(fmt.Errorf("table %s: %w (create it with sqldriver.CreateTable or the DDL in the package documentation): %w",
			d.table, ErrNoTable, err))
	case missingColumn(err):
		return driver.Permanent(fmt.Errorf("table %s: %w (upgrade it with sqldriver.CreateTable or the ALTER TABLE in the package documentation): %w",
			d.table, ErrOldTable, err))
	}
	return err
}

// closedErr is the Closed of d's Errors: errPoolClosed once d's *sql.DB
// is closed.
//
// database/sql reports a closed pool with an unexported error ("sql:
// database is closed"). The driver does not match its text: after a
// failure it asks the pool itself, with DB.Conn and a context that is
// already done, which answers without a connection: the closed pool's
// error, or the context's.
func (d *Driver) closedErr(error) error {
	if dbClosed(d.db) {
		return errPoolClosed
	}
	return nil
}

// errPoolClosed is why a driver whose *sql.DB is closed fails.
var errPoolClosed = errors.New("the *sql.DB is closed")

// errDBClosed stands for database/sql's error when the driver learns that
// the pool is closed without a call that returned it.
var errDBClosed = errors.New("sql: database is closed")

// done is a context that has ended: with it, DB.Conn checks whether the
// pool is closed, and then gives up before it takes a connection.
var done = func() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}()

// dbClosed reports whether db has been closed.
func dbClosed(db *sql.DB) bool {
	c, err := db.Conn(done)
	if c != nil {
		_ = c.Close()
	}
	return err != nil && !errors.Is(err, context.Canceled)
}

// missingTable reports whether err says that a table does not exist.
func missingTable(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "42P01" // undefined_table
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1146 // ER_NO_SUCH_TABLE
	}
	return false
}

// missingColumn reports whether err says that a column does not exist.
func missingColumn(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "42703" // undefined_column
	}
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1054 // ER_BAD_FIELD_ERROR
}

// permanent reports whether err is a database error that no retry of the
// same statement can cure: the statement or the schema is wrong, or the
// user lacks a privilege. Connection failures, deadlocks, serialization
// failures and lock timeouts are not.
func permanent(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) && len(pe.Code) == 5 {
		switch pe.Code[:2] {
		case "42", // syntax error or access rule violation
			"28", // invalid authorization
			"22", // data exception
			"0A": // feature not supported
			return true
		}
		return false
	}
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		switch me.Number {
		case 1044, 1045, 1142, 1143, // access denied
			1054, // unknown column
			1064, // syntax error
			1146, // no such table
			1406, // data too long
			1366: // incorrect value
			return true
		}
	}
	return false
}

// sessionEnded reports an error by which PostgreSQL says that it ended the
// session (pg_terminate_backend, a shutdown, a server still starting): the
// statement was not run, or its transaction was rolled back, so a retry
// on another connection cannot apply it twice. A pooled connection that
// the server ended while it was idle fails this way on its next use.
func sessionEnded(err error) bool {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return false
	}
	switch pe.Code {
	case "57P01", "57P02", "57P03": // admin_shutdown, crash_shutdown, cannot_connect_now
		return true
	}
	return false
}

// deadlocked reports an error by which the database says that it chose
// the statement's transaction as the victim of a deadlock, or could not
// serialise it, and rolled it back: InnoDB's ER_LOCK_DEADLOCK (concurrent
// acquires of a key whose anchor row a release has just deleted can
// deadlock on its gap locks), PostgreSQL's deadlock_detected and
// serialization_failure. Nothing of the transaction applied, so running it
// again is safe, and is what the databases ask of their clients.
func deadlocked(err error) bool {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code == "40P01" || pe.Code == "40001"
	}
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1213
}

// retryRolledBack runs f, again while it fails with sessionEnded or
// deadlocked, at most three times in all: each such failure has discarded
// a dead pooled connection, or rolled back all that f did.
func retryRolledBack(f func() error) error {
	var err error
	for range 3 {
		if err = f(); !sessionEnded(err) && !deadlocked(err) {
			return err
		}
	}
	return err
}

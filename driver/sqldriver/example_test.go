package sqldriver_test

import (
	"context"
	"database/sql"
	"fmt"
	"log"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver/sqldriver"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
)

// A Mutex on PostgreSQL whose fencing token guards a write to the same
// database: the UPDATE applies only if no later holder has written.
func Example() {
	db, err := sql.Open("pgx", "postgres://app@localhost/app")
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close() // the driver never closes db

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// At startup (safe in every process at once), or the DDL in a migration.
	if err := sqldriver.CreateTable(ctx, db, nil); err != nil {
		log.Fatal(err)
	}
	d, err := sqldriver.New(db, nil)
	if err != nil {
		log.Fatal(err)
	}

	c := locker.New(d) // one Client per process, shared by every handle
	defer c.Close(ctx)

	h, err := c.Mutex("orders/42").Acquire(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer h.Release(ctx)

	res, err := db.ExecContext(h.Context(),
		"UPDATE orders SET status = 'shipped', fence = $1 WHERE id = 42 AND fence <= $1", int64(h.Token()))
	if err != nil {
		log.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		log.Print("a later holder already wrote: this hold was lost")
	}
}

// The DDL for the user's own migrations.
func ExampleDDL() {
	ddl, err := sqldriver.DDL(sqldriver.MySQL, "app_locks")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(ddl)
	// Output:
	// CREATE TABLE IF NOT EXISTS `app_locks` (
	// 	name    varbinary(512) NOT NULL,
	// 	owner   varbinary(64) NOT NULL,
	// 	mode    tinyint NOT NULL,
	// 	token   bigint NOT NULL,
	// 	expires datetime(6) NULL,
	// 	lim     bigint NOT NULL DEFAULT 0,
	// 	weight  bigint NOT NULL DEFAULT 0,
	// 	val     varbinary(4096) NULL,
	// 	PRIMARY KEY (name, owner)
	// ) ENGINE=InnoDB
}

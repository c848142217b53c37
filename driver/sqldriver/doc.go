// Package sqldriver is a locker driver for PostgreSQL and MySQL/MariaDB,
// over the user's [database/sql.DB]: pgx's stdlib driver
// (github.com/jackc/pgx/v5/stdlib) for PostgreSQL, go-sql-driver/mysql for
// MySQL and MariaDB.
//
//	db, _ := sql.Open("pgx", "postgres://app@db/app")
//	_ = sqldriver.CreateTable(ctx, db, nil) // or the DDL below, in a migration
//	d, err := sqldriver.New(db, nil)
//	m := locker.NewMutex(d, "orders/42")
//
// TODO: full documentation.
package sqldriver

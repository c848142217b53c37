package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/etcddriver"
	"github.com/go-locker/locker/driver/redisdriver"
	"github.com/go-locker/locker/driver/sqldriver"
	"github.com/go-locker/locker/driver/zkdriver"
	"github.com/go-locker/locker/driver/zkdriver/zk"
	"github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// urlHelp documents the backend URLs, for -h.
const urlHelp = `Backend URLs (-url, or the LOCKER_URL environment variable):

  redis://[user:password@]host:port[/db]           Redis (rediss:// for TLS)
  redis+sentinel://[user:password@]host:port[,host:port...]/master[?db=N]
                                                   Redis through Sentinel
  etcd://host:port[,host:port...]                  etcd (http; etcds:// for https)
  zk://host:port[,host:port...][/root][?session=20s]
                                                   ZooKeeper (nodes under root, default /locker)
  postgres://user[:password]@host:port/db[?...]    PostgreSQL (pgx connection string)
  mysql://user[:password]@host:port/db             MySQL or MariaDB

Every URL takes ?locker_prefix=P (Redis, etcd: key prefix; ZooKeeper:
root; SQL: lease table, created if missing). Other query parameters are
the client library's (go-redis, pgx).`

// backend is an opened driver and what closes its client.
type backend struct {
	drv   driver.Driver
	close func() error
}

// openBackend makes the backend client and the driver that rawURL
// describes. Drivers never parse connection strings: that is done here.
func openBackend(ctx context.Context, rawURL string) (*backend, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errBadURL, err)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%w %q: no host", errBadURL, redact(u))
	}
	q := u.Query()
	prefix := q.Get("locker_prefix")
	q.Del("locker_prefix")
	u.RawQuery = q.Encode()
	switch u.Scheme {
	case "redis", "rediss":
		opts, err := redis.ParseURL(u.String())
		if err != nil {
			return nil, fmt.Errorf("%w: %w", errBadURL, err)
		}
		return redisBackend(redis.NewClient(opts), prefix)
	case "redis+sentinel":
		return sentinelBackend(u, prefix)
	case "etcd", "etcds":
		return etcdBackend(ctx, u, prefix)
	case "zk", "zookeeper":
		return zkBackend(ctx, u, prefix)
	case "postgres", "postgresql":
		db, err := sql.Open("pgx", u.String())
		if err != nil {
			return nil, err
		}
		return sqlBackend(ctx, db, sqldriver.PostgreSQL, prefix)
	case "mysql", "mariadb":
		db, err := mysqlDB(u)
		if err != nil {
			return nil, err
		}
		return sqlBackend(ctx, db, sqldriver.MySQL, prefix)
	}
	return nil, fmt.Errorf("%w %q: unknown scheme %q (see locker -h)", errBadURL, redact(u), u.Scheme)
}

// redact returns u without its password, for messages.
func redact(u *url.URL) string { return u.Redacted() }

func redisBackend(c redis.UniversalClient, prefix string) (*backend, error) {
	d, err := redisdriver.New(c, &redisdriver.Options{Prefix: prefix})
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return &backend{drv: d, close: c.Close}, nil
}

func sentinelBackend(u *url.URL, prefix string) (*backend, error) {
	master := strings.Trim(u.Path, "/")
	if master == "" {
		return nil, fmt.Errorf("%w %q: no master name (redis+sentinel://host:port/master)", errBadURL, redact(u))
	}
	opts := &redis.FailoverOptions{MasterName: master, SentinelAddrs: strings.Split(u.Host, ",")}
	if u.User != nil {
		opts.Username = u.User.Username()
		opts.Password, _ = u.User.Password()
	}
	if s := u.Query().Get("db"); s != "" {
		db, err := strconv.Atoi(s)
		if err != nil {
			return nil, fmt.Errorf("%w %q: db: %w", errBadURL, redact(u), err)
		}
		opts.DB = db
	}
	return redisBackend(redis.NewFailoverClient(opts), prefix)
}

func etcdBackend(ctx context.Context, u *url.URL, prefix string) (*backend, error) {
	scheme := "http://"
	if u.Scheme == "etcds" {
		scheme = "https://"
	}
	var eps []string
	for _, h := range strings.Split(u.Host, ",") {
		eps = append(eps, scheme+h)
	}
	cfg := clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop(), Context: context.Background()}
	if u.User != nil {
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, err
	}
	var opts etcddriver.Options
	if prefix != "" {
		opts.Prefix = prefix
	}
	d, err := etcddriver.New(cli, &opts)
	if err != nil {
		_ = cli.Close()
		return nil, err
	}
	return &backend{drv: d, close: func() error { d.Close(); return cli.Close() }}, nil
}

func zkBackend(ctx context.Context, u *url.URL, prefix string) (*backend, error) {
	timeout := 20 * time.Second
	if s := u.Query().Get("session"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			return nil, fmt.Errorf("%w %q: session: %w", errBadURL, redact(u), err)
		}
		timeout = d
	}
	root := prefix
	if p := strings.TrimSuffix(u.Path, "/"); root == "" && p != "" {
		root = p
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	d, err := zkdriver.Connect(cctx, strings.Split(u.Host, ","), timeout, &zkdriver.Options{Root: root}, zk.WithLogger(quietZK{}))
	if err != nil {
		return nil, err
	}
	return &backend{drv: d, close: d.Close}, nil
}

// quietZK drops go-zookeeper's connection log.
type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

// mysqlDB opens mysql://user:password@host:port/db as a
// go-sql-driver/mysql database.
func mysqlDB(u *url.URL) (*sql.DB, error) {
	cfg := mysql.NewConfig()
	cfg.Net, cfg.Addr = "tcp", u.Host
	cfg.DBName = strings.Trim(u.Path, "/")
	cfg.ParseTime = true
	if u.User != nil {
		cfg.User = u.User.Username()
		cfg.Passwd, _ = u.User.Password()
	}
	if cfg.DBName == "" {
		return nil, fmt.Errorf("%w %q: no database name", errBadURL, redact(u))
	}
	c, err := mysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(c), nil
}

func sqlBackend(ctx context.Context, db *sql.DB, dialect sqldriver.Dialect, table string) (*backend, error) {
	opts := &sqldriver.Options{Table: table, Dialect: dialect}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := sqldriver.CreateTable(cctx, db, opts); err != nil {
		_ = db.Close()
		return nil, err
	}
	d, err := sqldriver.New(db, opts)
	if err != nil {
		_ = db.Close()
		return nil, err
	}
	return &backend{drv: d, close: func() error {
		_ = d.Close()
		return db.Close()
	}}, nil
}

// errBadURL is wrapped by the errors of a URL that names no backend
// properly: a usage error.
var errBadURL = errors.New("bad backend URL")

var errNoURL = errors.New("no backend: set -url or LOCKER_URL (see locker -h)")

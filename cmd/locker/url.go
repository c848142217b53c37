package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/bradfitz/gomemcache/memcache"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/etcddriver"
	"github.com/go-locker/locker/driver/memcachedriver"
	"github.com/go-locker/locker/driver/mongodriver"
	"github.com/go-locker/locker/driver/natsdriver"
	"github.com/go-locker/locker/driver/redisdriver"
	"github.com/go-locker/locker/driver/sqldriver"
	"github.com/go-locker/locker/driver/zkdriver"
	"github.com/go-sql-driver/mysql"
	"github.com/go-zookeeper/zk"
	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
	"github.com/nats-io/nats.go"
	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// urlHelp documents the backend URLs, for -h.
const urlHelp = `Backend URLs (-url, or the LOCKER_URL environment variable):

  redis://[user:password@]host:port[/db]           Redis (rediss:// for TLS)
  redis+sentinel://[user:password@]host:port[,host:port...]/master[?db=N]
                                                   Redis through Sentinel
  etcd://[user:password@]host:port[,host:port...]  etcd (http; etcds:// for https)
  zk://host:port[,host:port...][/root][?session=20s]
                                                   ZooKeeper (nodes under root, default /locker)
  postgres://user[:password]@host:port/db[?...]    PostgreSQL (pgx connection string)
  mysql://user[:password]@host:port/db             MySQL or MariaDB
  memcached://host:port[,host:port...]             memcached (run it with -M)
  nats://[user:password@]host:port[,host:port...][?replicas=N]
                                                   NATS JetStream (a key-value bucket;
                                                   replicas: of a bucket created)
  mongodb://[user:password@]host:port[,host:port...][/db][?...]
                                                   MongoDB or FerretDB (database default locker;
                                                   mongodb+srv:// too)

Every URL takes ?locker_prefix=P (Redis, etcd, memcached: key prefix;
ZooKeeper: root; SQL: lease table, created if missing; NATS: bucket,
created if missing, default locker; MongoDB: lock collection, default
locker_locks). Other query parameters are the client library's
(go-redis, pgx, the MongoDB driver). Passwords never
appear in locker's output.`

// backend is an opened driver and what closes its client.
type backend struct {
	drv   driver.Driver
	close func() error
}

// dialer says how to reach a backend: within timeout, with the client
// libraries' logs written to log when verbose.
type dialer struct {
	timeout time.Duration
	verbose bool
	log     io.Writer
}

// open makes the backend client and the driver that rawURL describes,
// and waits for the backend's first answer for at most d.timeout (or
// until ctx is done). Drivers never parse connection strings: that is
// done here. Every error but a bad URL (errBadURL) means the backend
// could not be reached.
func (d dialer) open(ctx context.Context, rawURL string) (*backend, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Parse's error quotes the whole URL, password included.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%w: %w", errBadURL, err)
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%w %q: no host", errBadURL, redact(u))
	}
	q := u.Query()
	prefix := q.Get("locker_prefix")
	q.Del("locker_prefix")
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithTimeout(ctx, d.timeout)
	defer cancel()
	switch u.Scheme {
	case "redis", "rediss":
		return d.redis(u, prefix)
	case "redis+sentinel":
		return d.sentinel(u, prefix)
	case "etcd", "etcds":
		return d.etcd(u, prefix)
	case "zk", "zookeeper":
		return d.zk(ctx, u, prefix)
	case "postgres", "postgresql":
		db, err := sql.Open("pgx", u.String())
		if err != nil {
			return nil, fmt.Errorf("%w: %v", errBadURL, err)
		}
		return sqlBackend(ctx, db, sqldriver.PostgreSQL, prefix)
	case "mysql", "mariadb":
		db, err := d.mysqlDB(u)
		if err != nil {
			return nil, err
		}
		return sqlBackend(ctx, db, sqldriver.MySQL, prefix)
	case "memcached", "memcache":
		return d.memcached(u, prefix)
	case "nats":
		return d.nats(ctx, u, prefix)
	case "mongodb", "mongodb+srv":
		return d.mongo(u, prefix)
	}
	return nil, fmt.Errorf("%w %q: unknown scheme %q (see locker -h)", errBadURL, redact(u), u.Scheme)
}

// redact returns u without its password, nor the values of query
// parameters that name a password, secret or token, for messages.
func redact(u *url.URL) string {
	r := *u
	q := r.Query()
	for k := range q {
		if l := strings.ToLower(k); strings.Contains(l, "pass") || strings.Contains(l, "secret") || strings.Contains(l, "token") {
			q.Set(k, redacted)
		}
	}
	r.RawQuery = q.Encode()
	return r.Redacted()
}

func (d dialer) redis(u *url.URL, prefix string) (*backend, error) {
	opts, err := redis.ParseURL(u.String())
	if err != nil {
		return nil, fmt.Errorf("%w %q: %v", errBadURL, redact(u), err)
	}
	// Not ContextTimeoutEnabled: go-redis then bounds its reads by the
	// context's deadline only, and a signal's cancellation waited for
	// the dial (seen: 4.5s); without it, redisdriver abandons the request
	// when the context ends, deadline or cancellation.
	opts.DialTimeout = d.timeout
	return redisBackend(redis.NewClient(opts), prefix)
}

func redisBackend(c redis.UniversalClient, prefix string) (*backend, error) {
	d, err := redisdriver.New(c, &redisdriver.Options{Prefix: prefix})
	if err != nil {
		_ = c.Close()
		return nil, err
	}
	return &backend{drv: d, close: c.Close}, nil
}

func (d dialer) sentinel(u *url.URL, prefix string) (*backend, error) {
	master := strings.Trim(u.Path, "/")
	if master == "" {
		return nil, fmt.Errorf("%w %q: no master name (redis+sentinel://host:port/master)", errBadURL, redact(u))
	}
	opts := &redis.FailoverOptions{MasterName: master, SentinelAddrs: strings.Split(u.Host, ","), DialTimeout: d.timeout}
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

func (d dialer) etcd(u *url.URL, prefix string) (*backend, error) {
	scheme := "http://"
	if u.Scheme == "etcds" {
		scheme = "https://"
	}
	var eps []string
	for _, h := range strings.Split(u.Host, ",") {
		eps = append(eps, scheme+h)
	}
	// DialTimeout bounds New, which authenticates when a user is given.
	cfg := clientv3.Config{Endpoints: eps, DialTimeout: d.timeout, Logger: zapLogger(d.log, d.verbose), Context: context.Background()}
	if u.User != nil {
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
	}
	cli, err := clientv3.New(cfg)
	if err != nil {
		return nil, err
	}
	// New does no I/O: reach's inspection is the backend's first answer.
	var opts etcddriver.Options
	if prefix != "" {
		opts.Prefix = prefix
	}
	drv, err := etcddriver.New(cli, &opts)
	if err != nil {
		_ = cli.Close()
		return nil, err
	}
	return &backend{drv: drv, close: func() error { drv.Close(); return cli.Close() }}, nil
}

func (d dialer) zk(ctx context.Context, u *url.URL, prefix string) (*backend, error) {
	timeout := 20 * time.Second
	if s := u.Query().Get("session"); s != "" {
		t, err := time.ParseDuration(s)
		if err != nil || t <= 0 {
			return nil, fmt.Errorf("%w %q: session=%s is not a positive duration", errBadURL, redact(u), s)
		}
		timeout = t
	}
	root := prefix
	if p := strings.TrimSuffix(u.Path, "/"); root == "" && p != "" {
		root = p
	}
	drv, err := zkdriver.Connect(ctx, strings.Split(u.Host, ","), timeout, &zkdriver.Options{Root: root}, zk.WithLogger(zkLogger{d.log, d.verbose}))
	if err != nil {
		return nil, err
	}
	return &backend{drv: drv, close: drv.Close}, nil
}

// mysqlDB opens mysql://user:password@host:port/db as a
// go-sql-driver/mysql database.
func (d dialer) mysqlDB(u *url.URL) (*sql.DB, error) {
	cfg := mysql.NewConfig()
	cfg.Net, cfg.Addr, cfg.Timeout = "tcp", u.Host, d.timeout
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
		return nil, fmt.Errorf("%w %q: %v", errBadURL, redact(u), err)
	}
	return sql.OpenDB(c), nil
}

func sqlBackend(ctx context.Context, db *sql.DB, dialect sqldriver.Dialect, table string) (*backend, error) {
	opts := &sqldriver.Options{Table: table, Dialect: dialect}
	if err := sqldriver.CreateTable(ctx, db, opts); err != nil {
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

// memcached opens memcached://host:port[,host:port...]: the servers of
// one gomemcache client.
func (d dialer) memcached(u *url.URL, prefix string) (*backend, error) {
	mc := memcache.New(strings.Split(u.Host, ",")...)
	mc.MaxIdleConns = 16
	drv, err := memcachedriver.New(mc, &memcachedriver.Options{Prefix: prefix})
	if err != nil {
		return nil, fmt.Errorf("%w %q: %v", errBadURL, redact(u), err)
	}
	return &backend{drv: drv, close: func() error { _ = drv.Close(); return mc.Close() }}, nil
}

// nats opens nats://[user:password@]host:port[,host:port...]: one
// connection to those servers, and the bucket named by ?locker_prefix
// (natsdriver's default when empty), created with ?replicas=N replicas
// when it does not exist.
func (d dialer) nats(ctx context.Context, u *url.URL, bucket string) (*backend, error) {
	opts := natsdriver.Options{Bucket: bucket}
	if s := u.Query().Get("replicas"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%w %q: replicas=%s is not a positive number", errBadURL, redact(u), s)
		}
		opts.Replicas = n
	}
	var urls []string
	for _, h := range strings.Split(u.Host, ",") {
		urls = append(urls, (&url.URL{Scheme: "nats", User: u.User, Host: h}).String())
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.Timeout(d.timeout), nats.Name("locker"))
	if err != nil {
		return nil, err
	}
	drv, err := natsdriver.NewConn(ctx, nc, &opts)
	if err != nil {
		nc.Close()
		return nil, err
	}
	return &backend{drv: drv, close: func() error {
		_ = drv.Close()
		nc.Close()
		return nil
	}}, nil
}

// mongo opens mongodb://[user:password@]host:port[,host:port...][/db][?...]
// (or mongodb+srv://): the lock collection coll (default locker_locks) of
// database db (default locker), through the official driver, which parses
// the rest of the connection string.
func (d dialer) mongo(u *url.URL, coll string) (*backend, error) {
	opts := options.Client().ApplyURI(u.String()).SetConnectTimeout(d.timeout).SetServerSelectionTimeout(d.timeout)
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("%w %q: %v", errBadURL, redact(u), err)
	}
	c, err := mongo.Connect(opts)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %v", errBadURL, redact(u), err)
	}
	drv, err := mongodriver.New(c, &mongodriver.Options{Database: strings.TrimPrefix(u.Path, "/"), Collection: coll})
	if err != nil {
		_ = c.Disconnect(context.Background())
		return nil, fmt.Errorf("%w %q: %v", errBadURL, redact(u), err)
	}
	return &backend{drv: drv, close: func() error {
		_ = drv.Close()
		return c.Disconnect(context.Background())
	}}, nil
}

// errBadURL is wrapped by the errors of a URL that names no backend
// properly: a usage error.
var errBadURL = errors.New("bad backend URL")

var errNoURL = errors.New("no backend: set -url or LOCKER_URL (see locker -h)")

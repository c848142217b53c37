package sqldriver_test

import (
	"context"
	"database/sql"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver/sqldriver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/sqltest"
	"github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// The benchmarks compare locker's Mutex on sqldriver with the lock most
// teams write by hand on a database: a table with a unique key, INSERT to
// lock, busy retry on a duplicate key, DELETE to unlock, no expiry and no
// token. Both run in the same go test -bench run, against the same
// servers, each client on a pool of its own as separate processes would
// be.
//
//	go test -run '^$' -bench . -benchtime 3s -p 1 ./driver/sqldriver

// roundTrips counts the round trips of the connections it dialled: a
// write that follows a read (or is a connection's first) starts one.
type roundTrips struct{ n atomic.Int64 }

type countingConn struct {
	net.Conn
	rt      *roundTrips
	replied atomic.Bool
}

func (c *countingConn) Write(p []byte) (int, error) {
	if c.replied.Swap(false) {
		c.rt.n.Add(1)
	}
	return c.Conn.Write(p)
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.replied.Store(true)
	}
	return n, err
}

func (rt *roundTrips) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	cc := &countingConn{Conn: c, rt: rt}
	cc.replied.Store(true)
	return cc, nil
}

// countedDB opens a pool on s whose round trips rt counts.
func countedDB(tb testing.TB, s *sqltest.Server, rt *roundTrips) *sql.DB {
	tb.Helper()
	var db *sql.DB
	if s.Driver == "pgx" {
		cfg, err := pgx.ParseConfig(s.DSN)
		if err != nil {
			tb.Fatal(err)
		}
		cfg.DialFunc = rt.dial
		// pgx pings a pooled connection before reusing it when it has
		// been idle for more than a second: a round trip of the pool's,
		// not of the operation counted, that a loaded machine's pauses
		// between two operations would add to the count.
		db = stdlib.OpenDB(*cfg, stdlib.OptionShouldPing(func(context.Context, stdlib.ShouldPingParams) bool { return false }))
	} else {
		cfg, err := mysql.ParseDSN(s.DSN)
		if err != nil {
			tb.Fatal(err)
		}
		cfg.InterpolateParams = true
		cfg.DialFunc = rt.dial
		conn, err := mysql.NewConnector(cfg)
		if err != nil {
			tb.Fatal(err)
		}
		db = sql.OpenDB(conn)
	}
	tb.Cleanup(func() { _ = db.Close() })
	return db
}

// lockImpl is one way to lock a key: locker's Mutex or the naive lock.
type lockImpl struct {
	name string
	// newLocker returns a lock of key on a pool of its own, counted by rt.
	newLocker func(tb testing.TB, s *sqltest.Server, rt *roundTrips, key string) sync.Locker
}

var lockImpls = []lockImpl{
	{"locker", func(tb testing.TB, s *sqltest.Server, rt *roundTrips, key string) sync.Locker {
		return newMutex(tb, s, rt, key)
	}},
	// Waiters that poll (MySQL) retry at most every 10ms instead of the
	// default 250ms: lower latency for more queries.
	{"locker-backoff10ms", func(tb testing.TB, s *sqltest.Server, rt *roundTrips, key string) sync.Locker {
		return newMutex(tb, s, rt, key, locker.WithBackoff(time.Millisecond, 10*time.Millisecond))
	}},
	{"naive", func(tb testing.TB, s *sqltest.Server, rt *roundTrips, key string) sync.Locker {
		db := countedDB(tb, s, rt)
		createNaive(tb, db, s)
		n := &naiveLock{db: db, key: key, owner: owner(),
			insert: "INSERT INTO naive_locks (name, owner) VALUES (?, ?)",
			delete: "DELETE FROM naive_locks WHERE name = ? AND owner = ?"}
		if s.Driver == "pgx" {
			n.insert = "INSERT INTO naive_locks (name, owner) VALUES ($1, $2)"
			n.delete = "DELETE FROM naive_locks WHERE name = $1 AND owner = $2"
		}
		return n
	}},
}

// newMutex returns a locker.Mutex of key on sqldriver over a pool of its
// own.
func newMutex(tb testing.TB, s *sqltest.Server, rt *roundTrips, key string, opts ...locker.Option) *locker.Mutex {
	d, err := sqldriver.New(countedDB(tb, s, rt), nil)
	if err != nil {
		tb.Fatal(err)
	}
	closeAtCleanup(tb, d)
	return locker.NewMutex(d, key, append([]locker.Option{locker.WithTTL(30 * time.Second)}, opts...)...)
}

var naiveOnce sync.Map // DSN -> struct{}: naive_locks created

func createNaive(tb testing.TB, db *sql.DB, s *sqltest.Server) {
	tb.Helper()
	if _, done := naiveOnce.Load(s.DSN); done {
		return
	}
	if _, err := db.Exec("CREATE TABLE IF NOT EXISTS naive_locks (name varchar(255) PRIMARY KEY, owner varchar(64) NOT NULL)"); err != nil {
		tb.Fatal(err)
	}
	naiveOnce.Store(s.DSN, struct{}{})
}

// naiveLock is the hand-written lock: INSERT into a unique key, retried
// at once while it fails, DELETE to unlock.
type naiveLock struct {
	db             *sql.DB
	key, owner     string
	insert, delete string
	retries        atomic.Int64
}

func (n *naiveLock) Lock() {
	for {
		_, err := n.db.Exec(n.insert, n.key, n.owner)
		if err == nil {
			return
		}
		if !isDuplicate(err) && !isDeadlock(err) {
			panic(err)
		}
		n.retries.Add(1)
	}
}

func (n *naiveLock) Unlock() {
	if _, err := n.db.Exec(n.delete, n.key, n.owner); err != nil {
		panic(err)
	}
}

// isDeadlock reports InnoDB's deadlock error, which concurrent INSERTs of
// one unique key cause; the naive lock retries it as a failed attempt.
func isDeadlock(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1213
}

func isDuplicate(err error) bool {
	var me *mysql.MySQLError
	if errors.As(err, &me) {
		return me.Number == 1062
	}
	return strings.Contains(err.Error(), "23505") // unique_violation
}

// benchServers runs f against each database that is available.
func benchServers(b *testing.B, f func(b *testing.B, s *sqltest.Server)) {
	for _, s := range []struct {
		name string
		srv  *sqltest.Server
	}{{"postgres", pgServer}, {"mariadb", myServer}} {
		b.Run(s.name, func(b *testing.B) {
			if s.srv == nil {
				b.Skip("server not available")
			}
			f(b, s.srv)
		})
	}
}

// BenchmarkUncontended measures Lock and Unlock pairs on one key by one
// goroutine, and the round trips of each pair.
func BenchmarkUncontended(b *testing.B) {
	benchServers(b, func(b *testing.B, s *sqltest.Server) {
		for _, impl := range lockImpls {
			b.Run(impl.name, func(b *testing.B) {
				rt := &roundTrips{}
				m := impl.newLocker(b, s, rt, "bench/uncontended/"+owner())
				m.Lock() // connect and warm the statement caches
				m.Unlock()
				rt.n.Store(0)
				for b.Loop() {
					m.Lock()
					m.Unlock()
				}
				b.ReportMetric(float64(rt.n.Load())/float64(b.N), "roundtrips/op")
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
			})
		}
	})
}

// BenchmarkContended measures 8 goroutines, each with a lock of its own on
// a pool of its own (as 8 processes would), that lock one key over and
// over and hold it for 100µs. It reports acquisitions per second, round
// trips per acquisition, and the longest and median wait for the lock.
func BenchmarkContended(b *testing.B) {
	const workers = 8
	const critical = 100 * time.Microsecond
	benchServers(b, func(b *testing.B, s *sqltest.Server) {
		for _, impl := range lockImpls {
			b.Run(impl.name, func(b *testing.B) {
				rt := &roundTrips{}
				key := "bench/contended/" + owner()
				ms := make([]sync.Locker, workers)
				for i := range ms {
					ms[i] = impl.newLocker(b, s, rt, key)
					ms[i].Lock()
					ms[i].Unlock()
				}
				rt.n.Store(0)
				var (
					next  atomic.Int64
					mu    sync.Mutex
					waits []time.Duration
					wg    sync.WaitGroup
				)
				b.ResetTimer()
				for _, m := range ms {
					wg.Go(func() {
						var mine []time.Duration
						for next.Add(1) <= int64(b.N) {
							start := time.Now()
							m.Lock()
							mine = append(mine, time.Since(start))
							spin(critical)
							m.Unlock()
						}
						mu.Lock()
						waits = append(waits, mine...)
						mu.Unlock()
					})
				}
				wg.Wait()
				b.StopTimer()
				slices.Sort(waits)
				b.ReportMetric(float64(rt.n.Load())/float64(b.N), "roundtrips/op")
				b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "pairs/s")
				if len(waits) > 0 {
					b.ReportMetric(float64(waits[len(waits)/2].Microseconds())/1000, "p50-wait-ms")
					b.ReportMetric(float64(waits[len(waits)-1].Microseconds())/1000, "max-wait-ms")
				}
			})
		}
	})
}

// spin holds the CPU for d, as a short critical section does: a sleep
// would last far longer than 100µs.
func spin(d time.Duration) {
	for start := time.Now(); time.Since(start) < d; {
	}
}

// BenchmarkRefreshBatch1000 measures RefreshBatch of 1000 leases.
func BenchmarkRefreshBatch1000(b *testing.B) {
	benchServers(b, func(b *testing.B, s *sqltest.Server) {
		rt := &roundTrips{}
		d, err := sqldriver.New(countedDB(b, s, rt), nil)
		if err != nil {
			b.Fatal(err)
		}
		drivertest.BenchRefreshBatch(b, d, 1000, func() { rt.n.Store(0) })
		b.ReportMetric(float64(rt.n.Load())/float64(b.N), "roundtrips/op")
	})
}

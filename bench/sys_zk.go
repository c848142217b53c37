package main

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/go-locker/locker/driver/zkdriver"
	"github.com/go-zookeeper/zk"
)

func zkSystems() []*system {
	return []*system{
		{
			name: "locker", server: "zk", kind: kindLocker, clients: 4,
			desc: "locker.Mutex over zkdriver (session timeout 10s, TTL 10s); contended cells: 4 drivers, each with its own connection and session, goroutine i on driver i%4",
			open: openLockerZK,
		},
		{
			name: "locker 1 driver", server: "zk", kind: kindLocker, clients: 1,
			desc: "as locker, but all goroutines on one driver (one process); in the parallel cell too, 16 goroutines on distinct keys of one driver (its uncontended and churn cells are locker's: one driver)",
			open: openLockerZK,
		},
		{
			name: "locker NewMutex 1 driver", server: "zk", kind: kindLocker, clients: 1, contendedOnly: true,
			desc: "as locker 1 driver in the contended cells, but each goroutine's handle made with locker.NewMutex(drv, key): the handles lock through the driver's default Client",
			open: openLockerZKNew,
		},
		{
			name: "zk.Lock", server: "zk", kind: kindPeer, clients: 4,
			desc: "go-zookeeper/zk v1.0.4 zk.NewLock(conn, path, WorldACL): Lock = CreateProtectedEphemeralSequential + Children (+ GetW on the predecessor when queued), Unlock = Delete; Lock ignores ctx",
			open: openZKLock,
		},
		{
			name: "zk.Lock 1 conn", server: "zk", kind: kindPeer, clients: 1, parallelOnly: true,
			desc: "as zk.Lock, but in the parallel cell all 16 goroutines on one connection (one session), as locker 1 driver's are",
			open: openZKLock,
		},
		{
			name: "raw", server: "zk", kind: kindRaw, clients: 4,
			desc: "Create(path, EPHEMERAL) + Delete (the path's parents are made once per parent); waiters ExistsW the node and all retry on its deletion (a herd)",
			open: openRawZK,
		},
	}
}

// zkVersion is the Debian package's version of ZooKeeper.
func zkVersion() string {
	out, err := exec.Command("dpkg-query", "-W", "-f", "${Version}", "zookeeper").Output()
	if err != nil {
		return "(unknown version)"
	}
	return strings.TrimSpace(string(out))
}

// lockerZKDrivers connects n zkdrivers, each with its own connection and
// session, whose writes are counted.
func lockerZKDrivers(e *env, n int, timeout time.Duration) ([]*zkdriver.Driver, func(), error) {
	var ds []*zkdriver.Driver
	closeAll := func() {
		for _, d := range ds {
			d.Close()
			d.Conn().Close()
		}
	}
	for range n {
		sess := &zkdriver.Session{Dialer: e.zkOps.dialTimeout}
		conn, _, err := zk.Connect([]string{e.zk.addr}, timeout, zk.WithLogger(nopLogger{}), sess.ConnOption())
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		d, err := zkdriver.New(conn, sess, nil)
		if err != nil {
			conn.Close()
			closeAll()
			return nil, nil, err
		}
		ds = append(ds, d)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = sess.Wait(ctx)
		cancel()
		if err != nil {
			closeAll()
			return nil, nil, err
		}
	}
	return ds, closeAll, nil
}

func openLockerZK(e *env, n int) (*instance, error) { return openLockerZKAs(e, n, false) }

func openLockerZKNew(e *env, n int) (*instance, error) { return openLockerZKAs(e, n, true) }

func openLockerZKAs(e *env, n int, viaNew bool) (*instance, error) {
	ds, closeAll, err := lockerZKDrivers(e, n, peerTTL)
	if err != nil {
		return nil, err
	}
	return lockerInstance(ds, viaNew, closeAll), nil
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// zkConns connects n sessions (timeout 10s) whose writes are counted.
func zkConns(e *env, n int, timeout time.Duration) ([]*zk.Conn, error) {
	cs := make([]*zk.Conn, 0, n)
	for range n {
		c, ev, err := zk.Connect([]string{e.zk.addr}, timeout, zk.WithDialer(e.zkOps.dialTimeout), zk.WithLogger(nopLogger{}))
		if err != nil {
			closeZK(cs)
			return nil, err
		}
		cs = append(cs, c)
		deadline := time.After(10 * time.Second)
	wait:
		for {
			select {
			case x := <-ev:
				if x.State == zk.StateHasSession {
					break wait
				}
			case <-deadline:
				closeZK(cs)
				return nil, errors.New("zk: no session within 10s")
			}
		}
	}
	return cs, nil
}

func closeZK(cs []*zk.Conn) {
	for _, c := range cs {
		c.Close()
	}
}

// zkPath turns a bench key into a znode path under /bench.
func zkPath(key string) string { return "/" + strings.ReplaceAll(key, " ", "_") }

// zkEnsure creates the parents of path.
func zkEnsure(c *zk.Conn, path string) error {
	parts := strings.Split(path, "/")
	p := ""
	for _, part := range parts[1 : len(parts)-1] {
		p += "/" + part
		if _, err := c.Create(p, nil, 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
	}
	return nil
}

// warmZK runs creates and deletes on 4 sessions for d, so that the JVM has
// compiled ZooKeeper's request path before anything is measured.
func warmZK(e *env, d time.Duration) error {
	cs, err := zkConns(e, 4, 10*time.Second)
	if err != nil {
		return err
	}
	defer closeZK(cs)
	if err := zkEnsure(cs[0], "/bench/warm/x"); err != nil {
		return err
	}
	end := time.Now().Add(d)
	return parallelDo(len(cs), len(cs), func(i int) error {
		p := fmt.Sprintf("/bench/warm/%d", i)
		for time.Now().Before(end) {
			if _, err := cs[i].Create(p, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll)); err != nil {
				return err
			}
			if err := cs[i].Delete(p, -1); err != nil {
				return err
			}
		}
		return nil
	})
}

type zkLockHandle struct{ l *zk.Lock }

func (h zkLockHandle) Lock(context.Context) error   { return h.l.Lock() }
func (h zkLockHandle) Unlock(context.Context) error { return h.l.Unlock() }

func openZKLock(e *env, n int) (*instance, error) {
	cs, err := zkConns(e, n, 10*time.Second)
	if err != nil {
		return nil, err
	}
	return &instance{
		newLock: func(i int, key string) (lockHandle, error) {
			return zkLockHandle{zk.NewLock(cs[i], zkPath(key), zk.WorldACL(zk.PermAll))}, nil
		},
		close: func() { closeZK(cs) },
	}, nil
}

type rawZKHandle struct {
	c    *zk.Conn
	path string
}

func (h *rawZKHandle) Lock(ctx context.Context) error {
	for {
		_, err := h.c.Create(h.path, nil, zk.FlagEphemeral, zk.WorldACL(zk.PermAll))
		if err == nil {
			return nil
		}
		if !errors.Is(err, zk.ErrNodeExists) {
			return err
		}
		ok, _, ch, err := h.c.ExistsW(h.path)
		if err != nil {
			return err
		}
		if !ok {
			continue
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (h *rawZKHandle) Unlock(context.Context) error { return h.c.Delete(h.path, -1) }

func openRawZK(e *env, n int) (*instance, error) {
	cs, err := zkConns(e, n, 10*time.Second)
	if err != nil {
		return nil, err
	}
	// The parents made so far: a new key under a known parent costs its
	// own node only (the churn cell).
	var mu sync.Mutex
	made := map[string]bool{}
	return &instance{
		newLock: func(i int, key string) (lockHandle, error) {
			p := zkPath(key)
			dir := p[:strings.LastIndexByte(p, '/')]
			mu.Lock()
			known := made[dir]
			mu.Unlock()
			if !known {
				if err := zkEnsure(cs[i], p); err != nil {
					return nil, err
				}
				mu.Lock()
				made[dir] = true
				mu.Unlock()
			}
			return &rawZKHandle{c: cs[i], path: p}, nil
		},
		close: func() { closeZK(cs) },
	}, nil
}

func zkManySystems() []*manySystem {
	return []*manySystem{
		{
			name: "locker", server: "zk", kind: kindLocker, minTTL: 3 * time.Second,
			desc: "locker.Mutex × n on one zkdriver (session timeout = ttl)",
			hold: func(e *env, n int, ttl time.Duration) (held, error) {
				ds, closeAll, err := lockerZKDrivers(e, 1, ttl)
				if err != nil {
					return nil, err
				}
				return holdLocker(ds[0], n, ttl, fmt.Sprintf("bench/many/%d", time.Now().UnixNano()), closeAll)
			},
		},
		{
			name: "zk.Lock", server: "zk", kind: kindPeer, minTTL: 3 * time.Second,
			desc: "zk.Lock × n on one session (timeout = ttl): renewal is the session's heartbeat",
			hold: holdZKLock,
		},
	}
}

type zkLockHeld struct {
	c  *zk.Conn
	ls []*zk.Lock
}

func holdZKLock(e *env, n int, ttl time.Duration) (held, error) {
	cs, err := zkConns(e, 1, ttl)
	if err != nil {
		return nil, err
	}
	h := &zkLockHeld{c: cs[0], ls: make([]*zk.Lock, n)}
	prefix := fmt.Sprintf("/bench/many/%d", time.Now().UnixNano())
	err = parallelDo(n, manyWorkers, func(i int) error {
		l := zk.NewLock(h.c, fmt.Sprintf("%s/%d", prefix, i), zk.WorldACL(zk.PermAll))
		if err := l.Lock(); err != nil {
			return err
		}
		h.ls[i] = l
		return nil
	})
	if err != nil {
		_ = h.release()
		return nil, err
	}
	return h, nil
}

func (h *zkLockHeld) lost() int {
	if h.c.State() != zk.StateHasSession {
		return len(h.ls)
	}
	return 0
}

func (h *zkLockHeld) release() error {
	err := parallelDo(len(h.ls), manyWorkers, func(i int) error {
		if h.ls[i] == nil {
			return nil
		}
		return h.ls[i].Unlock()
	})
	h.c.Close()
	return err
}

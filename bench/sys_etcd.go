package main

import (
	"context"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-locker/locker/driver/etcddriver"
	"go.etcd.io/etcd/api/v3/version"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.etcd.io/etcd/client/v3/concurrency"
	"go.uber.org/zap"
	"google.golang.org/grpc"
)

var etcdVersion = version.Version

func etcdSystems() []*system {
	return []*system{
		{
			name: "locker", server: "etcd", kind: kindLocker, clients: 4,
			desc: "locker.Mutex over etcddriver, TTL 10s; contended cells: 4 drivers (one etcd client each, like 4 processes), goroutine i on driver i%4",
			open: openLockerEtcd,
		},
		{
			name: "locker 1 driver", server: "etcd", kind: kindLocker, clients: 1, contendedOnly: true,
			desc: "as locker, but all goroutines on one driver (one process)",
			open: openLockerEtcd,
		},
		{
			name: "locker NewMutex 1 driver", server: "etcd", kind: kindLocker, clients: 1, contendedOnly: true,
			desc: "as locker 1 driver in the contended cells, but each goroutine's handle made with locker.NewMutex(drv, key): the handles lock through the driver's default Client",
			open: openLockerEtcdNew,
		},
		{
			name: "concurrency.Mutex", server: "etcd", kind: kindPeer, clients: 4,
			desc: "etcd client/v3/concurrency.Mutex v" + etcdVersion + ", a Session (TTL 10s) per handle; Lock = 1 Txn (+ Get and a Watch of the predecessor when queued), Unlock = Delete; waiters queue by create revision",
			open: openEtcdMutex,
		},
		{
			name: "raw", server: "etcd", kind: kindRaw, clients: 4,
			desc: "Txn(If CreateRevision(key)==0 Then Put) + Delete, no lease: one raft write (fsync) each; waiters Watch the key from the next revision and retry on DELETE",
			open: openRawEtcd,
		},
	}
}

func etcdClients(e *env, n int) ([]*clientv3.Client, error) {
	cs := make([]*clientv3.Client, 0, n)
	for range n {
		c, err := clientv3.New(clientv3.Config{
			Endpoints:   []string{e.etcd.addr},
			DialTimeout: 5 * time.Second,
			Logger:      zap.NewNop(),
			DialOptions: []grpc.DialOption{
				grpc.WithChainUnaryInterceptor(e.rpcs.unary),
				grpc.WithChainStreamInterceptor(e.rpcs.stream),
			},
		})
		if err != nil {
			closeEtcd(cs)
			return nil, err
		}
		cs = append(cs, c)
	}
	return cs, nil
}

func closeEtcd(cs []*clientv3.Client) {
	for _, c := range cs {
		_ = c.Close()
	}
}

// lockerEtcdDrivers makes n etcddrivers, each on a client of its own.
func lockerEtcdDrivers(e *env, n int) ([]*etcddriver.Driver, func(), error) {
	cs, err := etcdClients(e, n)
	if err != nil {
		return nil, nil, err
	}
	ds := make([]*etcddriver.Driver, 0, n)
	closeAll := func() {
		for _, d := range ds {
			_ = d.Close()
		}
		closeEtcd(cs)
	}
	for _, c := range cs {
		d, err := etcddriver.New(c, nil)
		if err != nil {
			closeAll()
			return nil, nil, err
		}
		ds = append(ds, d)
	}
	return ds, closeAll, nil
}

func openLockerEtcd(e *env, n int) (*instance, error) { return openLockerEtcdAs(e, n, false) }

func openLockerEtcdNew(e *env, n int) (*instance, error) { return openLockerEtcdAs(e, n, true) }

func openLockerEtcdAs(e *env, n int, viaNew bool) (*instance, error) {
	ds, closeAll, err := lockerEtcdDrivers(e, n)
	if err != nil {
		return nil, err
	}
	return lockerInstance(ds, viaNew, closeAll), nil
}

type etcdMutexHandle struct{ m *concurrency.Mutex }

func (h etcdMutexHandle) Lock(ctx context.Context) error   { return h.m.Lock(ctx) }
func (h etcdMutexHandle) Unlock(ctx context.Context) error { return h.m.Unlock(ctx) }

func openEtcdMutex(e *env, n int) (*instance, error) {
	cs, err := etcdClients(e, n)
	if err != nil {
		return nil, err
	}
	var sessions []*concurrency.Session
	return &instance{
		newLock: func(i int, key string) (lockHandle, error) {
			s, err := concurrency.NewSession(cs[i], concurrency.WithTTL(int(peerTTL/time.Second)))
			if err != nil {
				return nil, err
			}
			sessions = append(sessions, s)
			return etcdMutexHandle{concurrency.NewMutex(s, "/"+key)}, nil
		},
		close: func() {
			for _, s := range sessions {
				_ = s.Close()
			}
			closeEtcd(cs)
		},
	}, nil
}

var etcdSeq atomic.Uint64

type rawEtcdHandle struct {
	c   *clientv3.Client
	key string
}

func (h *rawEtcdHandle) Lock(ctx context.Context) error {
	tok := strconv.FormatUint(etcdSeq.Add(1), 36)
	for {
		resp, err := h.c.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(h.key), "=", 0)).
			Then(clientv3.OpPut(h.key, tok)).Commit()
		if err != nil {
			return err
		}
		if resp.Succeeded {
			return nil
		}
		// Wait for the holder's DELETE, from the next revision on (see
		// the research note: watching from the current revision waits
		// for the server's 100 ms resync).
		wctx, cancel := context.WithCancel(ctx)
		wch := h.c.Watch(wctx, h.key, clientv3.WithRev(resp.Header.Revision+1), clientv3.WithFilterPut())
	wait:
		for wr := range wch {
			if err := wr.Err(); err != nil {
				cancel()
				return err
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					break wait
				}
			}
		}
		cancel()
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

func (h *rawEtcdHandle) Unlock(ctx context.Context) error {
	_, err := h.c.Delete(ctx, h.key)
	return err
}

func openRawEtcd(e *env, n int) (*instance, error) {
	cs, err := etcdClients(e, n)
	if err != nil {
		return nil, err
	}
	return &instance{
		newLock: func(i int, key string) (lockHandle, error) { return &rawEtcdHandle{c: cs[i], key: "/" + key}, nil },
		close:   func() { closeEtcd(cs) },
	}, nil
}

func etcdManySystems() []*manySystem {
	return []*manySystem{
		{
			name: "locker", server: "etcd", kind: kindLocker, minTTL: 3 * time.Second,
			desc: "locker.Mutex × n on one etcddriver",
			hold: func(e *env, n int, ttl time.Duration) (held, error) {
				ds, closeAll, err := lockerEtcdDrivers(e, 1)
				if err != nil {
					return nil, err
				}
				return holdLocker(ds[0], n, ttl, fmt.Sprintf("bench/many/%d", time.Now().UnixNano()), closeAll)
			},
		},
		{
			name: "concurrency.Mutex", server: "etcd", kind: kindPeer, minTTL: 3 * time.Second,
			desc: "concurrency.Mutex × n on one Session (one lease for all, TTL = ttl in whole seconds): renewal is the session's keep-alive",
			hold: holdEtcdMutex,
		},
	}
}

type etcdMutexHeld struct {
	c  *clientv3.Client
	s  *concurrency.Session
	ms []*concurrency.Mutex
}

func holdEtcdMutex(e *env, n int, ttl time.Duration) (held, error) {
	cs, err := etcdClients(e, 1)
	if err != nil {
		return nil, err
	}
	s, err := concurrency.NewSession(cs[0], concurrency.WithTTL(max(int(ttl/time.Second), 1)))
	if err != nil {
		closeEtcd(cs)
		return nil, err
	}
	h := &etcdMutexHeld{c: cs[0], s: s, ms: make([]*concurrency.Mutex, n)}
	prefix := fmt.Sprintf("/bench/many/%d", time.Now().UnixNano())
	err = parallelDo(n, manyWorkers, func(i int) error {
		m := concurrency.NewMutex(s, fmt.Sprintf("%s/%d", prefix, i))
		if err := m.Lock(context.Background()); err != nil {
			return err
		}
		h.ms[i] = m
		return nil
	})
	if err != nil {
		_ = h.release()
		return nil, err
	}
	return h, nil
}

func (h *etcdMutexHeld) lost() int {
	select {
	case <-h.s.Done():
		return len(h.ms)
	default:
		return 0
	}
}

func (h *etcdMutexHeld) release() error {
	err := parallelDo(len(h.ms), manyWorkers, func(i int) error {
		if h.ms[i] == nil {
			return nil
		}
		return h.ms[i].Unlock(context.Background())
	})
	_ = h.s.Close()
	_ = h.c.Close()
	return err
}

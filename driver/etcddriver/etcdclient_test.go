package etcddriver_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/go-locker/locker/internal/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// newEtcdClient returns a new client of the given endpoints, with logging
// off, closed at tb's cleanup.
func newEtcdClient(tb testing.TB, endpoints ...string) *clientv3.Client {
	tb.Helper()
	c, err := clientv3.New(clientConfig(endpoints...))
	if err != nil {
		tb.Fatalf("new etcd client: %v", err)
	}
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// clientConfig returns the configuration newEtcdClient uses.
func clientConfig(endpoints ...string) clientv3.Config {
	return clientv3.Config{
		Endpoints:   endpoints,
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	}
}

// clusterClient returns a new client of every member of c, closed at tb's
// cleanup.
func clusterClient(tb testing.TB, c *etcdtest.Cluster) *clientv3.Client {
	tb.Helper()
	return newEtcdClient(tb, c.Endpoints()...)
}

// waitReady waits until a linearizable read through cli succeeds, or ctx
// ends.
func waitReady(ctx context.Context, cli *clientv3.Client) error {
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := cli.Get(rctx, "etcdtest-ready")
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster not ready: %w", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// revokeOldest revokes, as an administrator would, the lease of the key
// under prefix with the lowest create revision, through cli: for a lock
// whose entries are the keys under prefix in the order of their creation,
// the lease of its holder. It returns the lease's ID, or an error when no
// key under prefix has a lease.
func revokeOldest(ctx context.Context, cli *clientv3.Client, prefix string) (clientv3.LeaseID, error) {
	r, err := cli.Get(ctx, prefix, clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend), clientv3.WithLimit(1))
	if err != nil {
		return 0, fmt.Errorf("revokeOldest: %w", err)
	}
	if len(r.Kvs) == 0 || r.Kvs[0].Lease == 0 {
		return 0, fmt.Errorf("revokeOldest: no key with a lease under %q", prefix)
	}
	id := clientv3.LeaseID(r.Kvs[0].Lease)
	if _, err := cli.Revoke(ctx, id); err != nil {
		return 0, fmt.Errorf("revokeOldest: revoking lease %x: %w", id, err)
	}
	return id, nil
}

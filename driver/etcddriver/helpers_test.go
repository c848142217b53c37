package etcddriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/etcddriver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/testflag"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// newClient returns a new client of the shared server, closed at t's
// cleanup.
func newClient(t testing.TB) *clientv3.Client {
	t.Helper()
	needServer(t)
	return newEtcdClient(t, server.ClientURL)
}

// newClientAt returns a new client of the server at url, closed at t's
// cleanup.
func newClientAt(t testing.TB, url string) *clientv3.Client {
	t.Helper()
	return newEtcdClient(t, url)
}

// newDriver returns a driver over a client of its own, as a separate
// process would have, closed at t's cleanup.
func newDriver(t testing.TB) *etcddriver.Driver {
	t.Helper()
	return newDriverOn(t, newClient(t), nil)
}

func newDriverOn(t testing.TB, c *clientv3.Client, opts *etcddriver.Options) *etcddriver.Driver {
	t.Helper()
	d, err := etcddriver.New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() })
	return d
}

// owner returns a fresh owner string of 32 hex digits.
func owner() string { return drivertest.Owner() }

// uniqueKey returns a lock key not used by any other test on the shared
// server.
func uniqueKey(t testing.TB, name string) string { return drivertest.UniqueKey(t, name) }

func ctxT(t testing.TB) context.Context { return drivertest.Context(t, 30*time.Second) }

func req(key, owner string, mode driver.Mode, ttl time.Duration) driver.Request {
	return driver.Request{Key: key, Owner: owner, Mode: mode, TTL: ttl}
}

func mustAcquire(t testing.TB, d driver.Driver, r driver.Request) driver.Lease {
	t.Helper()
	return drivertest.MustAcquire(ctxT(t), t, d, r, r.TTL)
}

// parallelIfShort runs t beside the other such tests under -short (the
// conformance suite beside the cluster's own servers); the full run keeps
// them apart, so that their timing is judged on a quieter machine.
func parallelIfShort(t *testing.T) {
	if !testflag.Long() {
		t.Parallel()
	}
}

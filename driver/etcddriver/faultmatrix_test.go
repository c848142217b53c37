package etcddriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/etcddriver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/etcdtest"
	"github.com/go-locker/locker/internal/faultmatrix"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// faultTTL is the lease of the fault matrix: etcd's shortest, with the
// test servers' 100 ms election timeout.
const faultTTL = time.Second

// faultDial connects a driver to the etcd server at addr (host:port); it
// is the fault matrix's Dialer, in this process and in its helper
// children.
//
// The client sends gRPC keepalive pings, as production clients should: a
// connection that stops answering is then closed after about 12 s and its
// calls fail, where without them a call made with a context that has no
// deadline, such as Unlock's, could wait for ever.
func faultDial(addr string) (driver.Driver, func() error, error) {
	cfg := clientConfig("http://" + addr)
	cfg.DialKeepAliveTime = 10 * time.Second // gRPC's minimum
	cfg.DialKeepAliveTimeout = 2 * time.Second
	c, err := clientv3.New(cfg)
	if err != nil {
		return nil, nil, err
	}
	d, err := etcddriver.New(c, &etcddriver.Options{MinTTL: faultTTL})
	if err != nil {
		_ = c.Close()
		return nil, nil, err
	}
	return d, func() error {
		err := d.Close()
		if cerr := c.Close(); err == nil {
			err = cerr
		}
		return err
	}, nil
}

// TestFaultMatrix runs the fault × driver matrix against an etcd server in
// a process of its own, which the matrix pauses, kills and restarts (with
// its data, fsynced: tokens are revisions, durable), each client behind a
// proxy of its own. Admin revocation revokes the holder's lease.
func TestFaultMatrix(t *testing.T) {
	drivertest.Long(t, "the fault matrix takes minutes")
	srv := etcdtest.StartChild(t)
	addr := srv.ClientURL[len("http://"):]
	admin := newClientAt(t, srv.ClientURL)
	base := func(key string) string { return etcddriver.LockBase(etcddriver.DefaultPrefix, key) }
	tg := faultmatrix.ProcessTarget("etcd", faultTTL, addr, faultDial, srv)
	tg.Net = faultmatrix.Partition
	tg.Revoke = func(ctx context.Context, key string) error {
		_, err := revokeOldest(ctx, admin, base(key))
		return err
	}
	tg.Residue = func(ctx context.Context, key string) (int, error) {
		r, err := admin.Get(ctx, base(key), clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err != nil {
			return 0, err
		}
		return int(r.Count), nil
	}
	tg.DurableTokens = true
	faultmatrix.Run(t, tg)
}

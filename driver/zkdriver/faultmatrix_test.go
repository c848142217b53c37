package zkdriver_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/zkdriver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/faultmatrix"
	"github.com/go-locker/locker/internal/zktest"
	"github.com/go-zookeeper/zk"
)

// The fault matrix's leases last faultTTL on connections whose sessions
// last faultSession: a session must outlive the leases on its nodes, and
// the half second between them is the headroom between a cut-off holder's
// local deadline and the server's expiry of its session.
const (
	faultTTL     = time.Second
	faultSession = 1500 * time.Millisecond
)

// faultSessions records the sessions of the clients dialed by faultDial in
// this process, so that a test can close them as an administrator.
var faultSessions zktest.Sessions

// faultDial connects a driver to the server at addr with a session of
// faultSession; it is the fault matrix's Dialer, in this process and in
// its helper children.
func faultDial(addr string) (driver.Driver, func() error, error) {
	sess := &zkdriver.Session{Dialer: faultSessions.Dial}
	conn, _, err := zk.Connect([]string{addr}, faultSession, zk.WithLogInfo(false), zk.WithLogger(nopLogger{}),
		zkdriver.ReconnectAtOnce(), sess.ConnOption())
	if err != nil {
		return nil, nil, err
	}
	d, err := zkdriver.New(conn, sess, nil)
	if err != nil {
		conn.Close()
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	closeFn := func() error {
		err := d.Close()
		conn.Close()
		return err
	}
	if err := sess.Wait(ctx); err != nil {
		_ = closeFn()
		return nil, nil, err
	}
	return d, closeFn, nil
}

type nopLogger struct{}

func (nopLogger) Printf(string, ...any) {}

// TestFaultMatrix runs the fault × driver matrix against a ZooKeeper
// server of its own, which the matrix pauses, kills and restarts (with
// its data: tokens are czxids, durable), each client behind a proxy of its
// own. Admin revocation closes the holder's session.
func TestFaultMatrix(t *testing.T) {
	drivertest.Long(t, "the fault matrix takes minutes")
	srv := zktest.PrivateStandalone(t)
	admin := connect(t, []string{srv.Addr}, 10*time.Second, nil).Conn()
	parent := func(key string) string { return zkdriver.ParentPath(zkdriver.DefaultRoot, key) }
	children := func(key string) ([]string, error) {
		names, _, err := admin.Children(parent(key))
		if errors.Is(err, zk.ErrNoNode) {
			return nil, nil
		}
		return names, err
	}
	tg := faultmatrix.ProcessTarget("zookeeper", faultTTL, srv.Addr, faultDial, srv)
	tg.Net = faultmatrix.Partition
	// An administrator revokes a hold by deleting its node (ZooKeeper
	// has no command that ends a session). Closing the holder's
	// session by taking it over (zktest.CloseSession) races with the
	// holder's reconnection in the server, which can leave the
	// holder's new connection attached to the closed session and
	// unanswered until the client's read timeout: see
	// TestSessionClosedByAdmin.
	tg.Revoke = func(ctx context.Context, key string) error {
		names, err := children(key)
		if err != nil {
			return err
		}
		holders := zkdriver.HolderNodes(names)
		if len(holders) == 0 {
			return fmt.Errorf("no holder of %q", key)
		}
		for _, name := range holders {
			if err := admin.Delete(parent(key)+"/"+name, -1); err != nil && !errors.Is(err, zk.ErrNoNode) {
				return err
			}
		}
		return nil
	}
	tg.Residue = func(ctx context.Context, key string) (int, error) {
		names, err := children(key)
		return len(zkdriver.LockNodes(names)), err
	}
	tg.DurableTokens = true
	faultmatrix.Run(t, tg)
}

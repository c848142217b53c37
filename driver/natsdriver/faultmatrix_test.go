package natsdriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/natsdriver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/faultmatrix"
	"github.com/go-locker/locker/internal/natstest"
)

// matrixTTL is the lease length of the fault matrix on NATS: TTLs are
// whole seconds, and two leave room for a server restart within a third
// of a lease.
const matrixTTL = 2 * time.Second

// dialMatrix opens a client of the fault matrix: a connection of its own
// that reconnects at once, and a driver over the default bucket.
func dialMatrix(addr string) (driver.Driver, func() error, error) {
	nc, err := connect("nats://" + addr)
	if err != nil {
		return nil, nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := natsdriver.NewConn(ctx, nc, nil)
	if err != nil {
		nc.Close()
		return nil, nil, err
	}
	return d, func() error {
		_ = d.Close()
		nc.Close()
		return nil
	}, nil
}

// TestFaultMatrix runs the fault matrix on a nats-server of its own that
// syncs every write (sync_interval: always), with every client behind a
// fault proxy. A kill and restart keeps the bucket: tokens keep
// increasing (DurableTokens), and a hold survives a quick restart
// (TestTokensAcrossRestart). The restart cell waits for the waiter's Lock
// before the holder unlocks, so the target's Restart waits one TTL before
// it starts the server again: the hold expires during the outage, and the
// cell checks the loss signal and the successor's token.
func TestFaultMatrix(t *testing.T) {
	drivertest.Long(t, "the fault matrix runs for minutes")
	srv := natstest.ForTest(t, natstest.Options{SyncAlways: true})
	admin, closeAdmin, err := dialMatrix(srv.Addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = closeAdmin() })
	insp := admin.(driver.Inspector)
	tg := faultmatrix.ProcessTarget("nats", matrixTTL, srv.Addr, dialMatrix, srv)
	tg.Net = faultmatrix.Partition
	tg.Server.Restart = func() error {
		time.Sleep(matrixTTL)
		return srv.Restart()
	}
	tg.Revoke = func(ctx context.Context, key string) error {
		_, err := insp.ForceRelease(ctx, key)
		return err
	}
	// Residue counts the key's hold while its message lives on the
	// server; the marker a release leaves, which expires after
	// natsdriver.MarkerTTL, is no hold.
	tg.Residue = func(ctx context.Context, key string) (int, error) {
		st, err := insp.Inspect(ctx, key)
		return len(st.Holders), err
	}
	tg.DurableTokens = true
	faultmatrix.Run(t, tg)
}

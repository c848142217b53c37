package mongodriver_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/mongodriver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/faultmatrix"
	"github.com/go-locker/locker/internal/ferrettest"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// matrixTTL is the lease length of the fault matrix on FerretDB;
// matrixCollection the collection of every client of the matrix, helper
// children included.
const (
	matrixTTL        = mongodriver.MinTTL
	matrixCollection = "matrix"
)

// dialMatrix opens a client of the fault matrix at addr (a proxy in front
// of the server, or the server), with its own connections.
func dialMatrix(addr string) (driver.Driver, func() error, error) {
	c, err := mongo.Connect(clientOptions("mongodb://" + addr + "/").SetTimeout(2 * time.Second))
	if err != nil {
		return nil, nil, err
	}
	d, err := mongodriver.New(c, &mongodriver.Options{Collection: matrixCollection})
	if err != nil {
		return nil, nil, err
	}
	return d, func() error {
		_ = d.Close()
		return c.Disconnect(context.Background())
	}, nil
}

// TestFaultMatrix runs the fault matrix on a FerretDB of its own, with
// every client behind a fault proxy. FerretDB keeps its documents on
// disk, so a kill and restart keeps the holds and the fences: tokens are
// durable.
func TestFaultMatrix(t *testing.T) {
	drivertest.Long(t, "the fault matrix runs for minutes")
	srv := ferrettest.Private(t)
	admin := connect(t, srv.URI)
	ad, err := mongodriver.New(admin, &mongodriver.Options{Collection: matrixCollection})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ad.Close() })
	tg := faultmatrix.ProcessTarget("ferretdb", matrixTTL, srv.Addr, dialMatrix, srv)
	tg.Revoke = func(ctx context.Context, key string) error {
		_, err := ad.ForceRelease(ctx, key)
		return err
	}
	// Residue counts the live holds of the key's current version.
	tg.Residue = func(ctx context.Context, key string) (int, error) {
		st, err := ad.Inspect(ctx, key)
		return len(st.Holders), err
	}
	// FerretDB restarts in well under a TTL and keeps the hold, whose
	// holder then renews it: the waiter of the kill-and-restart cell would
	// wait for as long as the holder runs. The restart keeps the server
	// down for a TTL first, so that the hold's lease runs out during the
	// outage (its record survives, and the successor's token must exceed
	// it); a hold kept across a short restart is what TestTokensNeverReset
	// and the pause cells show.
	tg.Server.Restart = func() error {
		_ = srv.Kill() // the cell killed it already
		time.Sleep(matrixTTL)
		return srv.Restart()
	}
	tg.DurableTokens = true
	faultmatrix.Run(t, tg)
}

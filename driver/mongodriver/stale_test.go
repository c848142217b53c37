package mongodriver_test

import (
	"errors"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
)

// TestStaleInsertNotInForce plays the one race that the unique _id alone
// does not settle: a writer reads version v of a key, others move the key
// on to v+2 and delete the versions below it, and the writer then
// inserts v+1, which no longer exists, so the insert succeeds. The
// driver must not count that grant: the key's current version, read after
// the insert, does not contain it.
func TestStaleInsertNotInForce(t *testing.T) {
	srv := server(t)
	db := database(t)
	a, w := newDriverOn(t, srv, db), newDriverOn(t, srv, db)
	ctx := ctxT(t)
	key := "stale/" + owner()
	la, err := a.TryAcquire(ctx, req(key, owner(), time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Release(ctx, la); err != nil {
		t.Fatal(err)
	}
	stale, err := w.Top(ctx, key) // the key is free in this version
	if err != nil {
		t.Fatal(err)
	}
	la, err = a.TryAcquire(ctx, req(key, owner(), time.Minute)) // stale.V+1
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.Refresh(ctx, la); err != nil { // stale.V+2, deletes the versions below
		t.Fatal(err)
	}
	a.WaitCollected()
	rw := req(key, owner(), time.Minute)
	inserted, inForce, err := w.AcquireFrom(ctx, stale, rw)
	if err != nil {
		t.Fatal(err)
	}
	if !inserted {
		t.Fatalf("the stale writer's insert of version %d failed: the race was not played (versions below the current one were not deleted)", stale.V+1)
	}
	if inForce {
		t.Fatalf("a grant computed from version %d, inserted after the key moved on, was counted: two holders", stale.V)
	}
	if _, err := w.TryAcquire(ctx, rw); !errors.Is(err, driver.ErrLocked) {
		t.Errorf("TryAcquire by the stale writer's owner while the key is held: %v; want ErrLocked", err)
	}
	if err := a.Release(ctx, la); err != nil {
		t.Errorf("the holder's Release: %v", err)
	}
}

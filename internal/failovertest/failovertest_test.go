package failovertest_test

import (
	"context"
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver/memdriver"
	"github.com/go-locker/locker/internal/failovertest"
	"github.com/go-locker/locker/internal/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRunInProcess runs the scenario on the in-process driver with a
// "kill" that stops the key's grants for 400 ms (a holder from outside
// the run takes the key): the run sees no violation, grants on both sides
// of the kill, and a longest gap of about the stall.
func TestRunInProcess(t *testing.T) {
	b := memdriver.NewBackend()
	var clients []*locker.Client
	for range 2 {
		c := locker.New(b.Driver())
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		clients = append(clients, c)
	}
	const stall = 400 * time.Millisecond
	var killed time.Time
	hold := locker.NewMutex(b.Driver(), "k", locker.WithTTL(time.Second))
	r := failovertest.Run(t, failovertest.Config{
		Clients: clients, Goroutines: 2, Key: "k",
		TTL: time.Second, Hold: 20 * time.Millisecond, Before: 200 * time.Millisecond, After: 200 * time.Millisecond,
		Kill: func() time.Time {
			// A holder from outside the run takes the key for the stall.
			if err := hold.LockContext(context.Background()); err != nil {
				t.Fatal(err)
			}
			killed = time.Now()
			go func() {
				time.Sleep(stall)
				hold.Unlock()
			}()
			return killed
		},
		Elected: func() time.Time { return killed.Add(10 * time.Millisecond) },
	})
	if len(r.Violations) > 0 {
		t.Errorf("violations: %v", r.Violations)
	}
	if r.Grants < 4 || r.FirstGrant < 0 {
		t.Fatalf("%d grants, first after the kill %v; want grants on both sides of the kill", r.Grants, r.FirstGrant)
	}
	if r.MaxGap < stall-50*time.Millisecond || r.MaxGap > time.Second {
		t.Errorf("longest gap %v; want about the stall %v", r.MaxGap, stall)
	}
}

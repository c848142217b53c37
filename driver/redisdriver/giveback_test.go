package redisdriver_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/redisdriver"
	"github.com/go-locker/locker/internal/drivertest"
	"github.com/go-locker/locker/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// lagRelease is a go-redis hook that holds back the release script's
// commands while on: each fails at once, as if its reply were lost, and
// stays on its way until land sends it, as a request on a slow
// connection or in the buffer of a stalled server does after its client
// gave up.
type lagRelease struct {
	src  string // the release script's source
	held drivertest.Backlog[[]any]
}

func shaOf(src string) string {
	sum := sha1.Sum([]byte(src))
	return hex.EncodeToString(sum[:])
}

func newLagRelease(t *testing.T) *lagRelease {
	t.Helper()
	var src string
	for i, f := range []string{"release_fast.lua", "common.lua", "release.lua"} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if i > 0 {
			src += "\n"
		}
		src += string(b)
	}
	return &lagRelease{src: src}
}

func (h *lagRelease) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *lagRelease) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *lagRelease) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		a := cmd.Args()
		if len(a) > 4 && (a[0] == "evalsha" && a[1] == shaOf(h.src) || a[0] == "eval" && a[1] == h.src) {
			if h.held.Hold(append([]any{"eval", h.src}, a[2:]...)) {
				err := errors.New("lagRelease: reply lost")
				cmd.SetErr(err)
				return err
			}
		}
		return next(ctx, cmd)
	}
}

// land stops holding releases back and sends those on their way through
// c.
func (h *lagRelease) land(t *testing.T, c *redis.Client) {
	t.Helper()
	for _, args := range h.held.Land() {
		if err := c.Do(t.Context(), args...).Err(); err != nil {
			t.Fatalf("late release: %v", err)
		}
	}
}

// TestLateGiveBack checks that a grant given back for want of
// acknowledgements, whose release went unanswered, is not reported to a
// retry of the same owner while that release may still land: the retry
// re-grants the same hold (same token), the late release then deletes it,
// and another owner got the key while the first believed it held it.
func TestLateGiveBack(t *testing.T) {
	master := privateServer(t)
	c := newClient(t, master.Addr)
	lag := newLagRelease(t)
	c.AddHook(lag)
	d := ackedDriver(t, c, 1, time.Second)
	k := uniqueKey(t, "k")
	a := req(k, owner(), driver.Exclusive, time.Minute)

	// No replica: a's grant is given back, and that release lags.
	lag.held.Start()
	_, err := d.TryAcquire(t.Context(), a)
	wantNotReplicated(t, "TryAcquire without replicas", err)

	// With a replica, a's retry is acknowledged: a re-grant of the hold
	// the release on its way names.
	testserver.Replica(t, master)
	waitReplicaOnline(t, c)
	// (A loaded machine may miss a WAIT's timeout: ask again.)
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err = d.TryAcquire(t.Context(), a)
		if !errors.Is(err, redisdriver.ErrNotReplicated) || time.Now().After(deadline) {
			break
		}
	}
	granted := err == nil
	if !granted && (!strings.Contains(err.Error(), "grant in doubt") || driver.IsPermanent(err)) {
		t.Fatalf("retry: %v; want a grant or a transient error (grant in doubt)", err)
	}
	t.Logf("retry: %v", err)
	lag.land(t, newClient(t, master.Addr))
	if !granted {
		if _, err := d.TryAcquire(t.Context(), a); err != nil {
			t.Fatalf("retry after the release landed: %v", err)
		}
	}
	b := req(k, owner(), driver.Exclusive, time.Minute)
	if l, err := d.TryAcquire(t.Context(), b); err == nil {
		t.Fatalf("b was granted %+v while a holds the key", l)
	} else if !errors.Is(err, driver.ErrLocked) {
		t.Fatalf("b: %v; want ErrLocked", err)
	}
}

package memdriver_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
	"github.com/go-locker/locker/internal/checker"
	"github.com/go-locker/locker/internal/porcupine"
)

// FuzzModel runs random sequences of lock operations by three clients on
// one key of the in-process driver and checks the history against the
// lease-lock model of package checker: tokens strictly increase, a stale
// holder's refresh or release never succeeds after another grant, and a
// failed acquire leaves nothing behind. Each byte of the input is one step:
// its client (b % 3) and its action (b / 3 % 6): acquire or refresh,
// release, refresh with its reply lost, release with its reply lost,
// acquire with its first reply lost (then retried by the same owner, as
// the front-end does), or an expiry of the key's holds on the backend.
func FuzzModel(f *testing.F) {
	f.Add([]byte{0, 1, 3, 4, 15, 2, 5, 16, 0, 9, 12})
	f.Add([]byte{12, 0, 13, 1, 6, 9, 10, 3, 4, 5})
	f.Add([]byte{0, 0, 0, 15, 1, 1, 16, 2, 3, 6})
	f.Fuzz(func(t *testing.T, steps []byte) {
		if len(steps) > 200 {
			steps = steps[:200]
		}
		m := &modelRun{t: t, b: memdriver.NewBackend(), ctx: context.Background()}
		for i := range m.drivers {
			m.drivers[i] = m.b.Driver()
		}
		for _, s := range steps {
			if !m.step(s) {
				continue
			}
			if n := len(m.b.Holders(modelKey)); n > 1 {
				t.Fatalf("%d exclusive holders", n)
			}
		}
		if res := checker.Linearizable(m.ops, 10*time.Second); res != porcupine.Ok {
			t.Fatalf("history of %d operations not linearizable under the lease-lock model: %v", len(m.ops), res)
		}
	})
}

// modelKey and modelTTL are the key and the TTL FuzzModel locks.
const modelKey, modelTTL = "k", time.Minute

// modelRun is one run of FuzzModel: three clients, the lease each holds,
// and the history of their operations on a logical clock.
type modelRun struct {
	t       *testing.T
	b       *memdriver.Backend
	ctx     context.Context
	drivers [3]*memdriver.Driver
	leases  [3]*driver.Lease
	ops     []checker.Op
	clock   time.Duration
}

// record adds op, called at call and returning now, to the history.
func (m *modelRun) record(op checker.Op, call time.Duration) {
	m.clock++
	op.Call, op.Return = call, m.clock
	m.ops = append(m.ops, op)
}

// step runs the step of input byte s: its client (s % 3) and its action
// (s / 3 % 6). It reports whether the step may have changed the holders
// (an expiry, a refused acquire and a step of a client without a lease
// other than an acquire do not).
func (m *modelRun) step(s byte) bool {
	c, action := int(s%3), int(s/3%6)
	l := m.leases[c]
	m.clock++
	call := m.clock
	switch {
	case action == 5:
		m.b.Expire(modelKey)
		return false
	case l == nil && (action == 0 || action == 4):
		return m.acquire(c, action == 4, call)
	case l == nil:
		return false
	case action == 0 || action == 2:
		m.refresh(c, action == 2, call)
	default: // release, its reply lost for action 3
		m.release(c, action == 3, call)
	}
	return true
}

// acquire acquires the key for client c, with its first reply lost (then
// retried by the same owner, as the front-end does) if lose; it reports
// whether the key was granted.
func (m *modelRun) acquire(c int, lose bool, call time.Duration) bool {
	t, ctx, d := m.t, m.ctx, m.drivers[c]
	req := driver.Request{Key: modelKey, Owner: newOwner(), Mode: driver.Exclusive, TTL: modelTTL}
	if lose {
		d.LoseReplies(1)
		if _, err := d.TryAcquire(ctx, req); !errors.Is(err, memdriver.ErrReplyLost) && !errors.Is(err, driver.ErrLocked) {
			t.Fatalf("acquire with its reply lost: %v", err)
		}
	}
	got, err := d.TryAcquire(ctx, req)
	if err != nil {
		if !errors.Is(err, driver.ErrLocked) {
			t.Fatalf("acquire: %v", err)
		}
		// A refused owner may still hold a grant whose reply was
		// lost: remove it, as the front-end does.
		_ = d.Release(ctx, driver.Lease{Key: modelKey, Owner: req.Owner, Mode: req.Mode})
		m.record(checker.Op{Client: c, Kind: checker.Acquire}, call)
		return false
	}
	if got.Token == 0 {
		t.Fatalf("token 0: %+v", got)
	}
	m.leases[c] = &got
	m.record(checker.Op{Client: c, Kind: checker.Acquire, Token: got.Token, OK: true}, call)
	return true
}

// refresh refreshes client c's lease, with its reply lost if lose.
func (m *modelRun) refresh(c int, lose bool, call time.Duration) {
	t, d, l := m.t, m.drivers[c], m.leases[c]
	if lose {
		d.LoseReplies(1)
	}
	got, err := d.Refresh(m.ctx, *l)
	op := checker.Op{Client: c, Kind: checker.Renew, Token: l.Token, OK: err == nil, Unknown: lose}
	switch {
	case lose:
	case err == nil && got.Token != l.Token:
		t.Fatalf("refresh changed the token: %d -> %d", l.Token, got.Token)
	case err != nil && !errors.Is(err, driver.ErrNotHeld):
		t.Fatalf("refresh: %v", err)
	case err != nil:
		m.leases[c] = nil
	}
	m.record(op, call)
}

// release releases client c's lease, with its reply lost if lose.
func (m *modelRun) release(c int, lose bool, call time.Duration) {
	d, l := m.drivers[c], m.leases[c]
	if lose {
		d.LoseReplies(1)
	}
	err := d.Release(m.ctx, *l)
	if err != nil && !lose && !errors.Is(err, driver.ErrNotHeld) {
		m.t.Fatalf("release: %v", err)
	}
	m.leases[c] = nil
	m.record(checker.Op{Client: c, Kind: checker.Release, Token: l.Token, OK: err == nil, Unknown: lose}, call)
}

// newOwner returns a fresh owner of 32 hex digits.
func newOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

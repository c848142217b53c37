package memdriver_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memdriver"
	"github.com/go-locker/locker/internal/checker"
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
		b := memdriver.NewBackend()
		const key, ttl = "k", time.Minute
		ctx := context.Background()
		var (
			drivers [3]*memdriver.Driver
			leases  [3]*driver.Lease
			ops     []checker.Op
			clock   time.Duration
		)
		for i := range drivers {
			drivers[i] = b.Driver()
		}
		record := func(op checker.Op, call time.Duration) {
			clock++
			op.Call, op.Return = call, clock
			ops = append(ops, op)
		}
		for _, s := range steps {
			c, action := int(s%3), int(s/3%6)
			d, l := drivers[c], leases[c]
			clock++
			call := clock
			switch {
			case action == 5:
				b.Expire(key)
				continue
			case l == nil && (action == 0 || action == 4):
				req := driver.Request{Key: key, Owner: newOwner(), Mode: driver.Exclusive, TTL: ttl}
				if action == 4 {
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
					_ = d.Release(ctx, driver.Lease{Key: key, Owner: req.Owner, Mode: req.Mode})
					record(checker.Op{Client: c, Kind: checker.Acquire}, call)
					continue
				}
				if got.Token == 0 {
					t.Fatalf("token 0: %+v", got)
				}
				leases[c] = &got
				record(checker.Op{Client: c, Kind: checker.Acquire, Token: got.Token, OK: true}, call)
			case l == nil:
				continue
			case action == 0 || action == 2:
				lose := action == 2
				if lose {
					d.LoseReplies(1)
				}
				got, err := d.Refresh(ctx, *l)
				op := checker.Op{Client: c, Kind: checker.Renew, Token: l.Token, OK: err == nil, Unknown: lose}
				switch {
				case lose:
				case err == nil && got.Token != l.Token:
					t.Fatalf("refresh changed the token: %d -> %d", l.Token, got.Token)
				case err != nil && !errors.Is(err, driver.ErrNotHeld):
					t.Fatalf("refresh: %v", err)
				case err != nil:
					leases[c] = nil
				}
				record(op, call)
			default: // release, its reply lost for action 3
				lose := action == 3
				if lose {
					d.LoseReplies(1)
				}
				err := d.Release(ctx, *l)
				if err != nil && !lose && !errors.Is(err, driver.ErrNotHeld) {
					t.Fatalf("release: %v", err)
				}
				leases[c] = nil
				record(checker.Op{Client: c, Kind: checker.Release, Token: l.Token, OK: err == nil, Unknown: lose}, call)
			}
			if n := len(b.Holders(key)); n > 1 {
				t.Fatalf("%d exclusive holders", n)
			}
		}
		if res := checker.Linearizable(ops, 10*time.Second); res != porcupine.Ok {
			t.Fatalf("history of %d operations not linearizable under the lease-lock model: %v", len(ops), res)
		}
	})
}

// newOwner returns a fresh owner of 32 hex digits.
func newOwner() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

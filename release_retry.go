package locker

import (
	"context"
	"errors"
	"time"

	"github.com/go-locker/locker/driver"
)

// maxReleaseCalls bounds the Release calls one release sends at once
// (see releaseHedged).
const maxReleaseCalls = 3

// hedgeDelay is how long a release waits for its Release call to answer
// before it sends another: a fifth of the TTL, within [200ms, 2s].
func hedgeDelay(ttl time.Duration) time.Duration {
	return min(max(ttl/5, 200*time.Millisecond), 2*time.Second)
}

// releaseHedged calls Release for l and, while no call has answered, sends
// another one every hedgeDelay(ttl), up to maxReleaseCalls in flight. It
// returns the first answer that settles the release (nil, ErrNotHeld, a
// permanent error) or, when every call failed otherwise, the last error.
//
// A request in flight when a replicated backend loses its leader can hang
// until the server gives up on it (an etcd proposal forwarded to the dead
// leader waits for the server's request timeout, over 5 s); a new call
// goes to the new leader. A release by its owner is safe to repeat, and
// one that lands late deletes only that owner's lease. A call that is
// merely slow still answers: the earlier calls are not cancelled until
// one settles.
func (c *Client) releaseHedged(ctx context.Context, l driver.Lease, ttl time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	res := make(chan error, maxReleaseCalls)
	send := func() { go func() { res <- c.drv.Release(ctx, l) }() }
	send()
	pending := 1
	every := hedgeDelay(ttl)
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case err := <-res:
			pending--
			if pending == 0 || err == nil || errors.Is(err, driver.ErrNotHeld) || driver.IsPermanent(err) {
				return err
			}
		case <-t.C:
			if pending < maxReleaseCalls && ctx.Err() == nil {
				send()
				pending++
			}
			t.Reset(every)
		}
	}
}

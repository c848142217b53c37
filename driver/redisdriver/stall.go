package redisdriver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"time"
)

// A call that its context's deadline cuts short costs its connection:
// go-redis closes a connection whose reply it stopped waiting for, and
// the next call dials a new one. While a server does not answer (paused,
// or the network black-holes it) every call would then dial, and
// hundreds of processes' dials fill the server's accept queue, so that
// connections made after it answers again wait for the kernel to retry
// their SYN. So after stallAfter calls in a row of a *redis.Client
// (standalone or Sentinel failover) were cut short by their deadlines,
// the driver sends one PING, and its calls wait for the PING's reply
// instead of sending: the server costs a dial per PING while it does not
// answer, and the calls go on as soon as it answers. A PING that fails
// otherwise (a refused dial, a closed client) lets the calls go on, to
// fail on their own. The driver's calls under way are at most the
// client's PoolSize (see admit), so that those that came before the
// guard's PING do not dial either.

// probeTimeout bounds a PING of the stall guard (the client's read
// timeout may bound it sooner).
const probeTimeout = time.Second

// errUnanswered is the error of a call that was not sent because the
// server has not answered the guard's PING.
var errUnanswered = errors.New("not sent: the server has not answered a PING since a call timed out")

// probe is one PING of the stall guard.
type probe struct {
	done chan struct{}
	err  error // set before done is closed: nil when the server answered
}

// admit returns nil when a call may be sent, and the caller must then
// call leave when the call returns. On a guarded driver it first takes one
// of the driver's slots (as many as the client's pool has connections),
// so that calls wait here rather than in go-redis's pool, where a call
// that gets its turn after a connection was closed dials a new one; then,
// when a PING of the stall guard is out, it waits for it (sending another
// if the last went unanswered). It returns an error wrapping ctx's if ctx
// ends first, or the PING's error if the PING goes unanswered.
func (d *Driver) admit(ctx context.Context) error {
	if !d.guarded {
		return nil
	}
	select {
	case d.slots <- struct{}{}:
	default:
		select {
		case d.slots <- struct{}{}:
		case <-ctx.Done():
			return fmt.Errorf("%w: waiting for one of the driver's %d slots", ctx.Err(), cap(d.slots))
		}
	}
	if p := d.stall.Load(); p != nil {
		if err := d.await(ctx, p); err != nil {
			<-d.slots
			return err
		}
	}
	return nil
}

// leave gives back the slot of a call that admit admitted.
func (d *Driver) leave() {
	if d.guarded {
		<-d.slots
	}
}

// await waits for p, the PING out or the last one, as admit does.
func (d *Driver) await(ctx context.Context, p *probe) error {
	select {
	case <-p.done:
		if p.err == nil {
			return nil
		}
		// The last PING went unanswered: send another, and wait for it.
		p = d.ping(p)
	default:
	}
	select {
	case <-p.done:
		if p.err != nil {
			return fmt.Errorf("%w: %w", errUnanswered, p.err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: %w", ctx.Err(), errUnanswered)
	}
}

// stallAfter is the number of calls in a row cut short by their
// deadlines after which the stall guard sends its PING: one call that ran
// out of time (a short deadline, a hedged release, a busy client) is not
// a server that stopped answering.
const stallAfter = 3

// suspect counts err, the error of a call with ctx: a success ends a run
// of calls cut short by their deadlines, and the stallAfter-th call of a
// run sends a PING unless one is out.
func (d *Driver) suspect(ctx context.Context, err error) {
	if !d.guarded {
		return
	}
	if err == nil || !errors.Is(withCtx(ctx, err), context.DeadlineExceeded) {
		if d.cut.Load() != 0 {
			d.cut.Store(0)
		}
		return
	}
	if d.cut.Add(1) >= stallAfter && d.stall.Load() == nil {
		d.ping(nil)
	}
}

// ping replaces last, the PING out or nil, with a new PING, unless
// another call replaced it first, and returns the PING out.
func (d *Driver) ping(last *probe) *probe {
	p := &probe{done: make(chan struct{})}
	if !d.stall.CompareAndSwap(last, p) {
		if cur := d.stall.Load(); cur != nil {
			return cur
		}
		return p.answered()
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		defer cancel()
		err := d.direct.Ping(ctx).Err()
		var ne net.Error
		if err == nil || !(errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()) {
			err = nil
			d.stall.CompareAndSwap(p, nil)
		}
		p.err = err
		close(p.done)
	}()
	return p
}

// answered marks p, a PING never sent, answered.
func (p *probe) answered() *probe {
	close(p.done)
	return p
}

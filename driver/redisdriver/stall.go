package redisdriver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"github.com/redis/go-redis/v9"
)

// A call that its context's deadline cuts short costs its connection:
// go-redis closes a connection whose reply it stopped waiting for, and
// the next call dials a new one. While a server does not answer (paused,
// or the network black-holes it) every call would then dial, and
// hundreds of processes' dials fill the server's accept queue, so that
// connections made after it answers again wait for the kernel to retry
// their SYN. So each *redis.Client the driver sends to (standalone,
// Sentinel failover, or a node of a ClusterClient or Ring) has a stall
// guard, shared by the drivers that use it: after stallAfter calls in a
// row were cut short by their deadlines, it sends one PING, and the
// calls wait for the PING's reply instead of sending: the server costs a
// dial per PING while it does not answer, and the calls go on as soon as
// it answers. A PING that fails otherwise (a refused dial, a closed
// client) lets the calls go on, to fail on their own. The calls under way
// through one client are at most its PoolSize (see admit), so that those
// that came before the guard's PING do not dial either.

// guard is the stall guard of one *redis.Client. Its methods do nothing
// on a nil *guard (a client whose calls the driver waits for on
// goroutines of their own).
type guard struct {
	// client is the client guarded (weakly: the guard, held by guards,
	// must not keep it alive).
	client weak.Pointer[redis.Client]
	// slots holds a token for each call under way (see admit).
	slots chan struct{}
	// stall is the PING out, or the last one if it went unanswered, or
	// nil. cut counts the calls in a row cut short by their deadlines
	// (see suspect).
	stall atomic.Pointer[probe]
	cut   atomic.Int32
}

// guardOf returns the guard of c, made on the first call, or nil when the
// driver cannot bound c's calls by their contexts on the caller's
// goroutine (see bind).
func guardOf(c *redis.Client) *guard {
	g, _ := perClient(&guards, c, func() *guard {
		if pinger(c) == nil {
			return nil
		}
		return &guard{client: weak.Make(c), slots: make(chan struct{}, max(c.Options().PoolSize, 1))}
	})
	return g
}

// guards maps each *redis.Client (weakly) to its guard, or to nil.
var guards sync.Map // weak.Pointer[redis.Client] -> *guard

// pinger returns the client through which a PING to c's server is bounded
// by its context: c, or its bound clone; nil if there is none.
func pinger(c *redis.Client) redis.UniversalClient {
	if c.Options().ContextTimeoutEnabled {
		return c
	}
	if b := bind(c); b.clone != nil {
		return b.clone
	}
	return nil
}

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
// call leave when the call returns. It first takes one of the guard's
// slots (as many as the client's pool has connections),
// so that calls wait here rather than in go-redis's pool, where a call
// that gets its turn after a connection was closed dials a new one; then,
// when a PING of the stall guard is out, it waits for it (sending another
// if the last went unanswered). It returns an error wrapping ctx's if ctx
// ends first, or the PING's error if the PING goes unanswered.
func (g *guard) admit(ctx context.Context) error {
	if g == nil {
		return nil
	}
	select {
	case g.slots <- struct{}{}:
	default:
		select {
		case g.slots <- struct{}{}:
		case <-ctx.Done():
			return fmt.Errorf("%w: waiting for one of the client's %d slots", ctx.Err(), cap(g.slots))
		}
	}
	if err := g.wait(ctx); err != nil {
		<-g.slots
		return err
	}
	return nil
}

// wait waits for the PING of the stall guard, if one is out, as admit
// does.
func (g *guard) wait(ctx context.Context) error {
	if g == nil {
		return nil
	}
	if p := g.stall.Load(); p != nil {
		return g.await(ctx, p)
	}
	return nil
}

// leave gives back the slot of a call that admit admitted.
func (g *guard) leave() {
	if g != nil {
		<-g.slots
	}
}

// await waits for p, the PING out or the last one, as admit does.
func (g *guard) await(ctx context.Context, p *probe) error {
	select {
	case <-p.done:
		if p.err == nil {
			return nil
		}
		// The last PING went unanswered: send another, and wait for it.
		p = g.ping(p)
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
func (g *guard) suspect(ctx context.Context, err error) {
	if g == nil {
		return
	}
	if err == nil || !errors.Is(withCtx(ctx, err), context.DeadlineExceeded) {
		if g.cut.Load() != 0 {
			g.cut.Store(0)
		}
		return
	}
	if g.cut.Add(1) >= stallAfter && g.stall.Load() == nil {
		g.ping(nil)
	}
}

// ping replaces last, the PING out or nil, with a new PING, unless
// another call replaced it first, and returns the PING out.
func (g *guard) ping(last *probe) *probe {
	p := &probe{done: make(chan struct{})}
	if !g.stall.CompareAndSwap(last, p) {
		if cur := g.stall.Load(); cur != nil {
			return cur
		}
		return p.answered()
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		defer cancel()
		err := redis.ErrClosed // the client is gone: nothing waits
		if c := g.client.Value(); c != nil {
			err = pinger(c).Ping(ctx).Err()
		}
		var ne net.Error
		if err == nil || !(errors.Is(err, context.DeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()) {
			err = nil
			g.stall.CompareAndSwap(p, nil)
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

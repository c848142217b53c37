package etcddriver

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-locker/locker/driver"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// maxPooled bounds the idle leases kept per TTL. The pool is what makes a
// lock+unlock loop grant one lease, once, rather than a LeaseGrant and a
// sentinel Put per hold: an uncontended pair sends one Txn and one
// DeleteRange, as concurrency.Mutex does (TestRoundTrips).
const maxPooled = 64

// kaStuck is how long the oldest keep-alive on the stream may go
// unanswered before the next caller replaces the stream: etcd answers
// keep-alives without a Raft round, so a stream this slow is one that a
// network fault has cut off silently.
const kaStuck = 3 * time.Second

var errStuck = errors.New("no reply for " + kaStuck.String() + "; stream replaced")

// A pooledLease is an etcd lease with no key attached, kept for the next
// entry with the same TTL.
type pooledLease struct {
	id       clientv3.LeaseID
	deadline time.Time // the lease lives at least until then
}

// takeLease returns a lease of ttl seconds for a new entry: an idle one
// from the pool, whose life the caller must prove with a keep-alive sent
// after its own start (fresh is false), or a newly granted one (fresh is
// true), which lives ttl from the grant's send time.
func (d *Driver) takeLease(ctx context.Context, ttl int64) (id clientv3.LeaseID, deadline time.Time, fresh bool, err error) {
	// An idle lease must outlive the keep-alive that is about to prove
	// it, with room to spare: older ones are dropped.
	spare := time.Duration(ttl) * time.Second / 4
	d.mu.Lock()
	for pool := d.pools[ttl]; len(pool) > 0; {
		p := pool[len(pool)-1]
		pool = pool[:len(pool)-1]
		d.pools[ttl] = pool
		if time.Until(p.deadline) > spare {
			d.mu.Unlock()
			return p.id, p.deadline, false, nil
		}
	}
	d.mu.Unlock()
	id, deadline, err = d.grant(ctx, ttl)
	return id, deadline, true, err
}

// grant grants a new lease of ttl seconds and checks that etcd granted that
// TTL, not a longer one (etcd raises TTLs below its minimum silently).
func (d *Driver) grant(ctx context.Context, ttl int64) (clientv3.LeaseID, time.Time, error) {
	if err := d.startSentinels(ctx); err != nil {
		return 0, time.Time{}, fmt.Errorf("watching lease sentinels: %w", err)
	}
	sent := time.Now()
	resp, err := d.leases.Grant(ctx, ttl)
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("lease grant: %w", err)
	}
	if resp.TTL != ttl {
		_, _ = d.leases.Revoke(ctx, resp.ID)
		if resp.TTL > ttl {
			d.learnMinTTL(resp.TTL)
			return 0, time.Time{}, driver.Permanent(fmt.Errorf("etcd granted a lease of %ds for a TTL of %ds: the server's minimum lease TTL is %ds (1.5 election timeouts, rounded up to whole seconds)", resp.TTL, ttl, resp.TTL))
		}
		return 0, time.Time{}, fmt.Errorf("etcd granted a lease of %ds for a TTL of %ds", resp.TTL, ttl)
	}
	// The sentinel: etcd deletes it when the lease ends.
	if _, err := d.kv.Put(ctx, d.sentinelKey(resp.ID), "", clientv3.WithLease(resp.ID)); err != nil {
		_, _ = d.leases.Revoke(ctx, resp.ID) // else it expires unused
		return 0, time.Time{}, fmt.Errorf("lease sentinel: %w", err)
	}
	return resp.ID, sent.Add(time.Duration(ttl) * time.Second), nil
}

// learnMinTTL records that the cluster's minimum lease TTL is at least
// secs seconds, for Capabilities.
func (d *Driver) learnMinTTL(secs int64) {
	for {
		cur := d.minTTL.Load()
		if secs <= cur || d.minTTL.CompareAndSwap(cur, secs) {
			return
		}
	}
}

// putLease returns an idle lease, whose keys are known to be gone, to the
// pool.
func (d *Driver) putLease(id clientv3.LeaseID, ttl int64, deadline time.Time) {
	if id == 0 || !time.Now().Before(deadline) {
		return
	}
	d.mu.Lock()
	if len(d.pools[ttl]) < maxPooled && !d.closed {
		d.pools[ttl] = append(d.pools[ttl], pooledLease{id, deadline})
	}
	d.mu.Unlock()
}

// A kaCall is one keep-alive request on the driver's keep-alive stream.
type kaCall struct {
	id   clientv3.LeaseID
	sent time.Time
	done chan struct{}
	ttl  int64 // the lease's TTL in seconds; <= 0: the lease does not exist
	err  error
}

// result waits for the reply. It returns the lease's TTL in seconds (<= 0
// when etcd does not know the lease) or an error.
func (c *kaCall) result(ctx context.Context) (int64, error) {
	select {
	case <-c.done:
		return c.ttl, c.err
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// kaStream is the driver's bidirectional LeaseKeepAlive stream. etcd
// answers its requests one by one, in order, so a FIFO of outstanding calls
// matches the replies. Requests are sent only when a caller asks: the
// driver keeps no lease alive on its own.
type kaStream struct {
	stream  pb.Lease_LeaseKeepAliveClient
	cancel  context.CancelFunc
	mu      sync.Mutex // serialises Send and guards pending and err
	pending []*kaCall
	err     error // set when the stream broke; no more sends
}

// keepAlive sends one keep-alive request for id and returns the call,
// whose result the caller collects. The send time is taken before the
// request is sent, so a confirmed lease lives at least its TTL from then.
func (d *Driver) keepAlive(id clientv3.LeaseID) *kaCall {
	c := &kaCall{id: id, sent: time.Now(), done: make(chan struct{})}
	for attempt := 0; attempt < 2; attempt++ { // a stream that broke meanwhile gets one successor
		s, err := d.kaStream()
		if err != nil {
			c.err = err
			break
		}
		s.mu.Lock()
		if c.err = s.err; c.err == nil {
			if err = s.stream.Send(&pb.LeaseKeepAliveRequest{ID: int64(id)}); err == nil {
				s.pending = append(s.pending, c)
				s.mu.Unlock()
				return c
			}
			c.err = fmt.Errorf("lease keep-alive: %w", err)
		}
		s.mu.Unlock()
		if err != nil {
			d.breakStream(s, err) // Recv reports the real error; ours is io.EOF
		}
	}
	close(c.done)
	return c
}

// kaStream returns the live keep-alive stream, opening one if needed.
func (d *Driver) kaStream() (*kaStream, error) {
	d.kaMu.Lock()
	defer d.kaMu.Unlock()
	if s := d.ka; s != nil {
		s.mu.Lock()
		broken := s.err != nil
		stuck := !broken && len(s.pending) > 0 && time.Since(s.pending[0].sent) > kaStuck
		s.mu.Unlock()
		if !broken && !stuck {
			return s, nil
		}
		if stuck {
			d.breakStream(s, errStuck)
		}
	}
	if err := d.closedErr(); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(clientv3.WithRequireLeader(d.ctx))
	st, err := d.rawLeases.LeaseKeepAlive(ctx)
	if err != nil {
		cancel()
		return nil, fmt.Errorf("lease keep-alive stream: %w", err)
	}
	s := &kaStream{stream: st, cancel: cancel}
	d.ka = s
	d.bg.Go(func() { d.recvKeepAlives(s) })
	return s, nil
}

// recvKeepAlives matches replies to calls until the stream breaks.
func (d *Driver) recvKeepAlives(s *kaStream) {
	for {
		resp, err := s.stream.Recv()
		if err != nil {
			d.breakStream(s, err)
			return
		}
		s.mu.Lock()
		if len(s.pending) == 0 || int64(s.pending[0].id) != resp.ID {
			s.mu.Unlock()
			d.breakStream(s, fmt.Errorf("unexpected keep-alive reply for lease %x", resp.ID))
			return
		}
		c := s.pending[0]
		s.pending[0] = nil
		s.pending = s.pending[1:]
		s.mu.Unlock()
		c.ttl = resp.TTL
		close(c.done)
	}
}

// breakStream marks s broken, fails its outstanding calls and closes it;
// the next kaStream replaces it.
func (d *Driver) breakStream(s *kaStream, err error) {
	if cerr := d.closedErr(); cerr != nil && errors.Is(err, context.Canceled) {
		err = cerr
	}
	s.mu.Lock()
	if s.err == nil {
		s.err = fmt.Errorf("lease keep-alive: %w", rpctypes.Error(err))
	}
	pending := s.pending
	s.pending = nil
	serr := s.err
	s.mu.Unlock()
	s.cancel()
	for _, c := range pending {
		c.err = serr
		close(c.done)
	}
}

package faultmatrix

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/internal/checker"
	"github.com/go-locker/locker/internal/porcupine"
)

// lockable is one lock handle as the cells use it: a Mutex, either side of
// an RWMutex, a ReentrantMutex, or a hold in a helper child. lock returns
// the hold's token and a channel closed when the hold ends (unlocked or
// lost).
type lockable interface {
	lock(ctx context.Context) (tok uint64, done <-chan struct{}, err error)
	unlock(ctx context.Context) error
}

type mutexL struct{ m *locker.Mutex }

func (l mutexL) lock(ctx context.Context) (uint64, <-chan struct{}, error) {
	if err := l.m.LockContext(ctx); err != nil {
		return 0, nil, err
	}
	return uint64(l.m.Token()), l.m.Done(), nil
}

func (l mutexL) unlock(ctx context.Context) error { return l.m.UnlockContext(ctx) }

type rwL struct {
	rw   *locker.RWMutex
	read bool
}

func (l rwL) lock(ctx context.Context) (uint64, <-chan struct{}, error) {
	lock := l.rw.LockContext
	if l.read {
		lock = l.rw.RLockContext
	}
	if err := lock(ctx); err != nil {
		return 0, nil, err
	}
	return uint64(l.rw.Token()), l.rw.Done(), nil
}

func (l rwL) unlock(ctx context.Context) error {
	if l.read {
		return l.rw.RUnlockContext(ctx)
	}
	return l.rw.UnlockContext(ctx)
}

// rec is the history of one iteration of a cell, on one key: the lock
// operations, the holds as clients believed them, and a fenced resource
// that every critical section updates.
type rec struct {
	mu       sync.Mutex
	ops      []checker.Op
	opEpoch  []int // the epoch of each of ops
	holds    []*holdRec
	res      checker.Resource
	acked    []int
	next     int
	epoch    int
	headroom []time.Duration
	notes    []string
	// violations counts the broken rules reported during the iteration.
	violations int
	skipped    string // why the iteration was skipped
	// limit is the size of the semaphore whose permits the actors take,
	// or 0.
	limit int64
}

// holdRec is one hold as its client saw it.
type holdRec struct {
	client       int
	token        uint64
	shared       bool
	weight       int64 // permits of a semaphore hold
	epoch        int
	acquired     time.Duration // Lock returned
	doneAt       time.Duration // the hold's Done channel closed; 0 before
	unlockCall   time.Duration // Unlock called; 0 before
	paused, lost bool          // the test paused the client; the loss was signalled before Unlock
}

// ended is when the client stopped believing it held the lock.
func (h *holdRec) ended() time.Duration {
	switch {
	case h.unlockCall == 0:
		return h.doneAt
	case h.doneAt == 0 || h.unlockCall < h.doneAt:
		return h.unlockCall
	}
	return h.doneAt
}

// addOp records op, of the current epoch.
func (r *rec) addOp(op checker.Op) {
	r.mu.Lock()
	r.addOpLocked(op, r.epoch)
	r.mu.Unlock()
}

func (r *rec) addOpLocked(op checker.Op, epoch int) {
	r.ops = append(r.ops, op)
	r.opEpoch = append(r.opEpoch, epoch)
}

// addHeadroom records how long before a successor's Lock returned the
// holder signalled its loss.
func (r *rec) addHeadroom(d time.Duration) {
	r.mu.Lock()
	r.headroom = append(r.headroom, d)
	r.mu.Unlock()
}

// note records a fact worth reporting that is not a violation.
func (r *rec) note(format string, args ...any) {
	r.mu.Lock()
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
	r.mu.Unlock()
}

// newEpoch starts a new epoch of the history after a server restart that
// may have lost the server's data: histories of different epochs are
// checked apart, and the resource starts over unless durable says that
// tokens keep increasing across the restart.
func (r *rec) newEpoch(durable bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.epoch++
	if !durable {
		r.res = checker.Resource{}
	}
}

// an actor is one client of the lock in a cell.
type actor struct {
	r      *rec
	id     int
	l      lockable
	shared bool
	weight int64 // the permits a semaphore actor takes, or 0
}

// held is a hold an actor got.
type held struct {
	a        *actor
	h        *holdRec
	done     <-chan struct{}
	doneSeen chan struct{} // closed once h.doneAt is set
	items    []int         // what the critical section read
	readOK   bool
}

// lock locks a.l with ctx and records the acquire.
func (a *actor) lock(ctx context.Context) (*held, error) {
	call := now()
	tok, done, err := a.l.lock(ctx)
	ret := now()
	if err != nil {
		if !a.shared {
			a.r.addOp(checker.Op{Client: a.id, Kind: checker.Acquire, Call: call, Return: ret})
		}
		return nil, err
	}
	r := a.r
	r.mu.Lock()
	h := &holdRec{client: a.id, token: tok, shared: a.shared, weight: a.weight, epoch: r.epoch, acquired: ret}
	r.holds = append(r.holds, h)
	if !a.shared {
		r.addOpLocked(checker.Op{Client: a.id, Kind: checker.Acquire, Token: tok, OK: true, Call: call, Return: ret}, h.epoch)
	}
	r.mu.Unlock()
	hd := &held{a: a, h: h, done: done, doneSeen: make(chan struct{})}
	go func() {
		<-done
		t := now()
		r.mu.Lock()
		h.doneAt = t
		r.mu.Unlock()
		close(hd.doneSeen)
	}()
	return hd, nil
}

func (hd *held) token() uint64 { return hd.h.token }

// lostYet reports whether the hold has ended without an Unlock.
func (hd *held) lostYet() bool {
	select {
	case <-hd.doneSeen:
		r := hd.a.r
		r.mu.Lock()
		defer r.mu.Unlock()
		return hd.h.unlockCall == 0 || hd.h.doneAt < hd.h.unlockCall
	default:
		return false
	}
}

// lostAt returns when the loss was signalled, waiting up to wait for it;
// ok is false if it was not signalled by then.
func (hd *held) lostAt(wait time.Duration) (at time.Duration, ok bool) {
	select {
	case <-hd.doneSeen:
	case <-time.After(wait):
		return 0, false
	}
	r := hd.a.r
	r.mu.Lock()
	defer r.mu.Unlock()
	return hd.h.doneAt, true
}

// read is the first half of the critical section: a fenced read of the
// resource.
func (hd *held) read() {
	if hd.a.shared {
		return
	}
	hd.items, hd.readOK = hd.a.r.res.Read(hd.a.id, hd.h.token)
}

// write is the second half: a fenced write of what read returned plus a
// new value, acknowledged when the resource accepts it.
func (hd *held) write() bool {
	if hd.a.shared || !hd.readOK {
		return false
	}
	r := hd.a.r
	r.mu.Lock()
	r.next++
	v := r.next
	r.mu.Unlock()
	if !r.res.Write(hd.a.id, hd.h.token, append(hd.items, v)) {
		return false
	}
	r.mu.Lock()
	r.acked = append(r.acked, v)
	r.mu.Unlock()
	return true
}

// work is a whole critical section that lasts about d.
func (hd *held) work(d time.Duration) bool {
	hd.read()
	time.Sleep(d)
	return hd.write()
}

// unlock unlocks the hold with ctx (a fresh bounded one when ctx is nil)
// and records the release and the hold.
func (hd *held) unlock(ctx context.Context) error {
	if ctx == nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
	}
	r := hd.a.r
	call := now()
	r.mu.Lock()
	hd.h.unlockCall = call
	r.mu.Unlock()
	err := hd.a.l.unlock(ctx)
	ret := now()
	<-hd.doneSeen
	r.mu.Lock()
	defer r.mu.Unlock()
	hd.h.lost = hd.h.doneAt < call
	if !hd.a.shared {
		op := checker.Op{Client: hd.a.id, Kind: checker.Release, Token: hd.h.token, Call: call, Return: ret, OK: err == nil}
		if err != nil && !errors.Is(err, locker.ErrLost) && !errors.Is(err, locker.ErrNotHeld) {
			op.Unknown = true
		}
		r.addOpLocked(op, hd.h.epoch)
	}
	return err
}

// check runs the checkers on the history and returns the violations.
// durable says whether tokens must keep increasing across epochs.
func (r *rec) check(durable bool) []error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var errs []error
	byEpoch := map[int][]checker.Hold{}
	var all []checker.Hold
	for _, h := range r.holds {
		if h.unlockCall == 0 && h.doneAt == 0 {
			errs = append(errs, fmt.Errorf("client %d token %d: hold neither unlocked nor lost by the end of the cell", h.client, h.token))
			continue
		}
		ch := checker.Hold{Client: h.client, Token: h.token, Acquired: h.acquired, Ended: h.ended(), Paused: h.paused, Shared: h.shared, Weight: h.weight}
		byEpoch[h.epoch] = append(byEpoch[h.epoch], ch)
		all = append(all, ch)
	}
	if durable {
		byEpoch = map[int][]checker.Hold{0: all}
	}
	for _, hs := range byEpoch {
		errs = append(errs, checker.Holds(hs)...)
		if r.limit > 0 {
			errs = append(errs, checker.Permits(hs, r.limit)...)
		}
	}
	opsByEpoch := map[int][]checker.Op{}
	for i, op := range r.ops {
		e := r.opEpoch[i]
		if durable {
			e = 0
		}
		opsByEpoch[e] = append(opsByEpoch[e], op)
	}
	for e, ops := range opsByEpoch {
		if res := checker.Linearizable(ops, time.Minute); res != porcupine.Ok {
			errs = append(errs, fmt.Errorf("history of %d operations (epoch %d) is not linearizable under the lease-lock model (%v)", len(ops), e, res))
		}
	}
	if lost := r.res.Lost(r.acked); len(lost) > 0 {
		errs = append(errs, fmt.Errorf("%d acknowledged updates lost: %v", len(lost), lost))
	}
	for _, rj := range r.res.Rejected() {
		ok := false
		for _, h := range r.holds {
			if h.client == rj.Client && h.token == rj.Token && (h.paused || h.lost || h.doneAt != 0 && h.unlockCall == 0) {
				ok = true
			}
		}
		if !ok {
			errs = append(errs, fmt.Errorf("the resource refused client %d token %d (highest %d), a holder neither paused nor lost", rj.Client, rj.Token, rj.Highest))
		}
	}
	return errs
}

// probeL is a successor that measures when the server let a hold go: it
// polls TryAcquire with an owner of its own every probeEvery, so that its
// grant comes at most one poll interval after the key became free on the
// server. It holds without renewing, and its belief ends at its own local
// deadline (send time + TTL − margin) or at its Unlock.
type probeL struct {
	d      driver.Driver
	req    driver.Request
	margin time.Duration
	lease  driver.Lease
	end    func() bool // ends the belief; reports whether it was still on
}

// probeEvery is the probe's poll interval: the resolution of the
// loss-detection headroom it measures.
const probeEvery = 2 * time.Millisecond

func (p *probeL) lock(ctx context.Context) (uint64, <-chan struct{}, error) {
	for {
		actx, cancel := context.WithTimeout(ctx, p.req.TTL/2)
		sent := time.Now()
		l, err := p.d.TryAcquire(actx, p.req)
		cancel()
		if err == nil {
			done := make(chan struct{})
			var once sync.Once
			end := func() (was bool) { once.Do(func() { was = true; close(done) }); return was }
			timer := time.AfterFunc(time.Until(sent.Add(l.TTL-p.margin)), func() { end() })
			p.lease = l
			p.end = func() bool { timer.Stop(); return end() }
			return l.Token, done, nil
		}
		select {
		case <-ctx.Done():
			// An attempt may have been applied with its reply lost.
			cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			_ = p.d.Release(cctx, driver.Lease{Key: p.req.Key, Owner: p.req.Owner, Mode: p.req.Mode, Abandoned: true})
			cancel()
			return 0, nil, ctx.Err()
		case <-time.After(probeEvery):
		}
	}
}

func (p *probeL) unlock(ctx context.Context) error {
	held := p.end()
	err := p.d.Release(ctx, p.lease)
	if !held {
		return fmt.Errorf("probe: past its local deadline: %w", locker.ErrLost)
	}
	return err
}

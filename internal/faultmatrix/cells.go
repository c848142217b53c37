package faultmatrix

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/internal/lag"
)

// slack is how late a timer may fire on a loaded machine under -race
// before the matrix calls it a violation.
const slack = 250 * time.Millisecond

// cells is the matrix, in the order it runs.
var cells = []cell{
	{name: "blackhole-holding", modes: "F2 F3", needs: always, run: blackholeHolding},
	{name: "blackhole-waiting", modes: "F8", needs: always, run: blackholeWaiting},
	{name: "reply-loss-acquire", modes: "F5", needs: always, run: replyLossAcquire},
	{name: "reply-loss-release", modes: "F6", needs: always, run: replyLossRelease},
	{name: "connection-reset", modes: "F4 F20", needs: always, run: connectionReset},
	{name: "server-pause-short", modes: "F10", needs: needsServer("pause", func(s Server) bool { return s.Pause != nil && s.Resume != nil }), run: serverPauseShort},
	{name: "server-pause-long", modes: "F11", needs: needsServer("pause", func(s Server) bool { return s.Pause != nil && s.Resume != nil }), run: serverPauseLong},
	{name: "server-kill-restart", modes: "F12", needs: needsServer("kill and restart", func(s Server) bool { return s.Kill != nil && s.Restart != nil }), run: serverKillRestart, mayLoseData: true},
	{name: "client-pause", modes: "F1", needs: needsChildren, run: clientPause},
	{name: "admin-revoke", modes: "F21", needs: func(tg Target) string {
		if tg.Revoke == nil {
			return "the target cannot revoke holds"
		}
		return ""
	}, run: adminRevoke},
	{name: "cancel-waiting", modes: "F18", needs: always, run: cancelWaiting},
	{name: "two-handles", modes: "F15", needs: always, run: twoHandles},
	{name: "reentrant", modes: "F16", needs: always, run: reentrant},
	{name: "rwmutex", modes: "F17", needs: always, run: rwmutex},
	{name: "contention-faults", modes: "F2 F5 F6 F20 F22", needs: always, run: contentionFaults},
	{name: "semaphore", modes: "F2 F5 F6 F20 F22", needs: always, run: semaphoreFaults},
	{name: "election", modes: "F2 F5 F6 F20 F22", needs: always, run: electionFaults},
	{name: "contention-processes", modes: "F15 F22", needs: needsChildren, run: contentionProcesses},
}

// net returns c's Net, or skips the iteration when c has none.
func (e *env) net(c Client) Net {
	e.t.Helper()
	if c.Net == nil {
		e.skip("the target's clients have no Net")
	}
	return c.Net
}

// skip skips the iteration, and so the cell, with why.
func (e *env) skip(why string) {
	e.t.Helper()
	e.r.mu.Lock()
	e.r.skipped = why
	e.r.mu.Unlock()
	e.t.Skip(why)
}

// prober returns an actor with id that polls for the key on c with a
// driver-level TryAcquire every probeEvery (see probeL).
func (e *env) prober(id int, c Client) *actor {
	var b [16]byte
	_, _ = crand.Read(b[:])
	req := driver.Request{Key: e.key, Owner: hex.EncodeToString(b[:]), Mode: driver.Exclusive, TTL: e.ttl}
	return &actor{r: e.r, id: id, l: &probeL{d: c.Driver, req: req, margin: e.margin()}}
}

// holdAndWait has a lock the key and begin its critical section, then b
// wait for the key; it returns a's hold and b's channel (see goLock).
func (e *env) holdAndWait(a, b *actor) (*held, <-chan *held) {
	ha := e.mustLock(a)
	ha.read()
	gb := e.goLock(b)
	time.Sleep(e.ttl / 10)
	return ha, gb
}

// pair returns two clients' actors and the first one's Net.
func (e *env) pair() (a, b *actor, net Net) {
	ca, cb := e.client(), e.client()
	net = e.net(ca)
	return e.actor(0, ca), e.actor(1, cb), net
}

// goLock starts a.lock with a long context and returns the channel that
// receives the hold, or nil if Lock failed.
func (e *env) goLock(a *actor) <-chan *held {
	ch := make(chan *held, 1)
	ctx := e.ctx(e.long())
	go func() {
		hd, err := a.lock(ctx)
		if err != nil {
			e.t.Errorf("client %d: lock: %v", a.id, err)
		}
		ch <- hd
	}()
	return ch
}

// mustLose waits for hd's loss signal, at most until by, and reports a
// violation when it does not come in time. It returns when the loss was
// signalled.
func (e *env) mustLose(hd *held, from, by time.Duration) (time.Duration, bool) {
	e.t.Helper()
	at, ok := hd.lostAt(max(by-now(), 0) + e.long())
	switch {
	case !ok:
		e.violation("client %d never signalled the loss of token %d", hd.a.id, hd.token())
	case at > by:
		e.violation("client %d signalled the loss of token %d %v after the fault, %v late",
			hd.a.id, hd.token(), at-from, at-by)
	}
	return at, ok
}

// mustKeep reports a violation if hd was declared lost: the fault it went
// through was shorter than the lease could absorb.
func (e *env) mustKeep(hd *held, fault string) {
	e.t.Helper()
	if hd.lostYet() {
		e.violation("false loss: client %d lost token %d through %s", hd.a.id, hd.token(), fault)
	}
}

// mustUnlockLost unlocks hd, which was lost: Unlock must say so.
func (e *env) mustUnlockLost(hd *held) {
	e.t.Helper()
	if err := hd.unlock(nil); !errors.Is(err, locker.ErrLost) {
		e.violation("client %d: unlock after the loss = %v, want ErrLost", hd.a.id, err)
	}
}

// finish does the critical section of hd and unlocks it.
func (e *env) finish(hd *held, work time.Duration) {
	e.t.Helper()
	if hd == nil {
		return
	}
	hd.work(work)
	if err := hd.unlock(nil); err != nil && !hd.lostYet() {
		e.t.Errorf("client %d: unlock: %v", hd.a.id, err)
	}
}

// successor records the headroom between hd's loss and next's grant, and
// checks next's token.
func (e *env) successor(hd *held, lostAt time.Duration, next *held) {
	e.t.Helper()
	if next == nil {
		return
	}
	e.r.addHeadroom(next.h.acquired - lostAt)
	if next.token() <= hd.token() {
		e.violation("successor token %d not above %d", next.token(), hd.token())
	}
}

// blackholeHolding cuts the holder off, sockets open, while another client
// polls for the key (a prober, whose grant times the server-side expiry):
// the holder must signal its loss by its local deadline and before the
// other gets the key; its stale write and its Unlock must fail.
func blackholeHolding(e *env) {
	ca, cb := e.client(), e.client()
	net := e.net(ca)
	a, b := e.actor(0, ca), e.prober(1, cb)
	ha, got := e.holdAndWait(a, b)
	net.Blackhole(true)
	cut := now()
	lost, _ := e.mustLose(ha, cut, cut+e.ttl-e.margin()+slack)
	hb := <-got
	net.Heal()
	e.successor(ha, lost, hb)
	if hb != nil {
		hb.read()
	}
	ha.write() // stale: refused once b has read
	e.mustUnlockLost(ha)
	e.finish(hb, 0)
}

// blackholeWaiting cuts a waiter off for longer than the TTL while the key
// is held and then released, with a third client contending: whatever the
// waiter's Lock returns, no two holds may overlap.
func blackholeWaiting(e *env) {
	ca, cb, cc := e.client(), e.client(), e.client()
	net := e.net(cb)
	a, b, c := e.actor(0, ca), e.actor(1, cb), e.actor(2, cc)
	ha := e.mustLock(a)
	gb := e.goLock(b)
	time.Sleep(e.ttl / 10)
	net.Blackhole(true)
	gc := e.goLock(c)
	time.Sleep(e.ttl / 2)
	e.finish(ha, 0)
	time.Sleep(e.ttl)
	net.Heal()
	var wg sync.WaitGroup
	for _, ch := range []<-chan *held{gb, gc} {
		wg.Add(1)
		go func() { defer wg.Done(); e.finish(<-ch, e.ttl/10) }()
	}
	wg.Wait()
}

// replyLossAcquire loses the replies of the holder-to-be's acquire (the
// server applies it): in even iterations the replies come back before
// Lock gives up, in odd ones Lock fails while they are still lost and the
// grant it left must not outlive its TTL. A second client contends.
func replyLossAcquire(e *env) {
	a, b, net := e.pair()
	giveUp := e.long()
	if e.t.Name()[len(e.t.Name())-1]%2 == 1 {
		giveUp = e.ttl / 2
	}
	net.DropReplies(true)
	ga := make(chan *held, 1)
	ctx := e.ctx(giveUp)
	go func() {
		hd, _ := a.lock(ctx) // may fail: it is recorded as a failed acquire
		ga <- hd
	}()
	time.Sleep(e.ttl / 10)
	gb := e.goLock(b)
	healed := now()
	if giveUp > e.ttl {
		time.Sleep(e.ttl / 2)
		net.Heal()
		healed = now()
	}
	// Whichever client gets the key first finishes first: on drivers
	// whose first request of a Lock is a read, the replies lost may be
	// that read's, so the other client wins and the first one waits for
	// it.
	// check judges the other client's wait; failedAt is when the first
	// client's Lock returned, if it returned first.
	check := func(ha, hb *held, failedAt time.Duration) {
		switch {
		case hb == nil:
		case failedAt > 0 && ha == nil && hb.h.acquired > failedAt+e.ttl+slack:
			e.violation("a failed Lock's grant outlived its TTL: the other client waited %v after it failed", hb.h.acquired-failedAt)
		case hb.h.acquired > healed+3*e.ttl+slack:
			// After the heal, the first client gets the key (or its
			// grant lapses) within a TTL, and holds it for a tenth.
			e.violation("the other client waited %v after the replies came back", hb.h.acquired-healed)
		}
	}
	select {
	case ha := <-ga:
		failedAt := now()
		net.Heal()
		var wg sync.WaitGroup
		wg.Add(1)
		go func() { defer wg.Done(); e.finish(ha, e.ttl/10) }()
		hb := <-gb
		check(ha, hb, failedAt)
		e.finish(hb, e.ttl/10)
		wg.Wait()
	case hb := <-gb:
		check(nil, hb, 0)
		e.finish(hb, e.ttl/10)
		ha := <-ga
		net.Heal()
		e.finish(ha, e.ttl/10)
	}
	e.noResidue()
}

// replyLossRelease loses the reply of an Unlock (the server applies it):
// Unlock reports an unknown outcome or success, the key is free for
// another client at once or within the TTL, and nothing is left.
func replyLossRelease(e *env) {
	a, b, net := e.pair()
	ha := e.mustLock(a)
	ha.work(0)
	net.DropReplies(true)
	ctx, cancel := context.WithTimeout(context.Background(), e.ttl/2)
	call := now()
	err := ha.unlock(ctx)
	cancel()
	net.Heal()
	if err != nil {
		e.r.note("Unlock with its reply lost returns an error (outcome unknown)")
	}
	hb := e.mustLock(b)
	if hb.h.acquired > call+e.ttl+slack {
		e.violation("the key stayed held %v after an Unlock whose reply was lost", hb.h.acquired-call)
	}
	e.finish(hb, 0)
	e.noResidue()
}

// connectionReset resets the holder's connections three times within one
// TTL while another client waits: the hold must survive, and the waiter
// get the key only after the Unlock.
func connectionReset(e *env) {
	a, b, net := e.pair()
	ha := e.mustLock(a)
	gb := e.goLock(b)
	ha.read()
	for range 3 {
		time.Sleep(e.renew() / 2)
		net.Reset()
	}
	time.Sleep(e.renew())
	e.mustKeep(ha, "connection resets")
	ha.write()
	if err := ha.unlock(nil); err != nil {
		if errors.Is(err, locker.ErrLost) {
			e.violation("lost after connection resets: %v", err)
		}
		e.r.note("an Unlock right after a reset failed (outcome unknown)")
	}
	e.finish(<-gb, 0)
}

// shortPause is the longest server pause that no hold may notice: a
// renewal sent just before the pause confirms the hold only after it, so
// the pause must fit between the renewal interval and the local deadline;
// the cells pause for half of that.
func (e *env) shortPause() time.Duration { return (e.ttl - e.margin() - e.renew()) / 2 }

// serverPauseShort pauses the server twice for less than the lease can
// absorb: no loss, and the waiter gets the key only after the Unlock.
func serverPauseShort(e *env) {
	a, b := e.actor(0, e.client()), e.actor(1, e.client())
	ha := e.mustLock(a)
	gb := e.goLock(b)
	ha.read()
	probe := lag.Start()
	var longest time.Duration // from the call of Pause to the return of Resume
	for range 2 {
		t0 := time.Now()
		if err := e.tg.Server.Pause(); err != nil {
			e.t.Fatalf("pause: %v", err)
		}
		time.Sleep(e.shortPause())
		if err := e.tg.Server.Resume(); err != nil {
			e.t.Fatalf("resume: %v", err)
		}
		longest = max(longest, time.Since(t0))
		time.Sleep(e.renew())
	}
	late := probe.Stop()
	e.r.note("pauses of %v", e.shortPause().Round(time.Millisecond))
	// The lease absorbs a pause while the pause and the renewal period
	// after it fit in the TTL less the margin; the planned pause is half of
	// that. A machine so loaded that a pause, with twice the lateness of
	// this process's timers, outgrew it may end the hold rightly.
	if absorbed := e.ttl - e.margin() - e.renew(); ha.lostYet() && longest+2*late >= absorbed {
		e.r.note("inconclusive: a pause lasted %v and timers were %v late, beyond the %v the lease absorbs; the hold was lost",
			longest.Round(time.Millisecond), late.Round(time.Millisecond), absorbed.Round(time.Millisecond))
	} else {
		e.mustKeep(ha, "short server pauses")
	}
	ha.write()
	if err := ha.unlock(nil); err != nil && !ha.lostYet() {
		e.t.Errorf("unlock: %v", err)
	}
	e.finish(<-gb, 0)
}

// serverPauseLong pauses the server for 1.5 TTL: the holder signals its
// loss by its local deadline, during the pause; a prober gets the key
// after the resume with a greater token.
func serverPauseLong(e *env) {
	a, b := e.actor(0, e.client()), e.prober(1, e.client())
	ha, gb := e.holdAndWait(a, b)
	if err := e.tg.Server.Pause(); err != nil {
		e.t.Fatalf("pause: %v", err)
	}
	paused := now()
	lost, _ := e.mustLose(ha, paused, paused+e.ttl-e.margin()+slack)
	time.Sleep(max(paused+e.ttl*3/2-now(), 0))
	if err := e.tg.Server.Resume(); err != nil {
		e.t.Fatalf("resume: %v", err)
	}
	hb := <-gb
	e.successor(ha, lost, hb)
	if hb != nil {
		hb.read()
	}
	ha.write()
	e.mustUnlockLost(ha)
	e.finish(hb, 0)
}

// serverKillRestart kills the server while a client holds the key and
// another waits, and restarts it a third of a TTL later. A hold the
// restart lost must be signalled; tokens after the restart must be greater
// than before, unless the target says its tokens are neither durable nor
// increasing across a restart.
func serverKillRestart(e *env) {
	a, b := e.actor(0, e.client()), e.actor(1, e.client())
	ha, gb := e.holdAndWait(a, b)
	if err := e.tg.Server.Kill(); err != nil {
		e.t.Fatalf("kill: %v", err)
	}
	e.r.newEpoch(e.tg.DurableTokens || e.tg.IncreasingTokens)
	time.Sleep(e.ttl / 3)
	if err := e.tg.Server.Restart(); err != nil {
		e.t.Fatalf("restart: %v", err)
	}
	hb := <-gb
	if hb != nil {
		// A hold the restart lost is signalled by the next renewal.
		lostAt, lost := ha.lostAt(e.renew() + slack)
		switch {
		case !lost:
			e.r.note("the holder kept its hold across the restart")
		case lostAt > hb.h.acquired:
			e.r.note("the successor acquired before the holder learnt that the restart had lost its hold")
		default:
			e.r.addHeadroom(hb.h.acquired - lostAt)
		}
		if hb.token() <= ha.token() {
			if e.tg.DurableTokens || e.tg.IncreasingTokens {
				e.violation("token %d after the restart is not above %d before it", hb.token(), ha.token())
			} else {
				e.r.note("tokens went back after a data-losing restart (not durable, as the driver documents)")
			}
		}
		hb.read()
	}
	ha.write()
	if err := ha.unlock(nil); err == nil && hb != nil && ha.h.acquired < hb.h.acquired && !e.tg.DurableTokens {
		e.violation("the holder's Unlock succeeded after the restart handed the key to another client")
	}
	e.finish(hb, 0)
}

// adminRevoke revokes the hold on the server: the holder signals the loss
// within one renewal interval, its Unlock fails, and the next holder gets
// a greater token.
func adminRevoke(e *env) {
	a, b := e.actor(0, e.client()), e.actor(1, e.client())
	ha := e.mustLock(a)
	ha.read()
	if err := e.tg.Revoke(e.ctx(e.long()), e.key); err != nil {
		e.t.Fatalf("revoke: %v", err)
	}
	revoked := now()
	if _, ok := e.mustLose(ha, revoked, revoked+e.renew()+slack); !ok {
		return
	}
	hb := e.mustLock(b)
	if hb.token() <= ha.token() {
		e.violation("token %d after the revocation is not above %d", hb.token(), ha.token())
	}
	hb.read()
	ha.write()
	e.mustUnlockLost(ha)
	e.finish(hb, 0)
}

// cancelWaiting cancels a waiting Lock: it returns promptly with the
// context's error and leaves nothing behind, so that a third client gets
// the key as soon as the holder unlocks.
func cancelWaiting(e *env) {
	a, b, c := e.actor(0, e.client()), e.actor(1, e.client()), e.actor(2, e.client())
	ha := e.mustLock(a)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		hd, err := b.lock(ctx)
		if hd != nil {
			_ = hd.unlock(nil)
		}
		errc <- err
	}()
	time.Sleep(e.ttl / 4)
	cancel()
	canceled := now()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			e.violation("canceled Lock returned %v, want context.Canceled", err)
		}
		if d := now() - canceled; d > 100*time.Millisecond+slack {
			e.violation("canceled Lock returned %v after the cancellation", d)
		}
	case <-time.After(e.long()):
		e.t.Fatal("canceled Lock never returned")
	}
	e.finish(ha, 0)
	unlocked := now()
	hc := e.mustLock(c)
	if d := hc.h.acquired - unlocked; d > e.ttl/2 {
		e.violation("the key was granted %v after the unlock: the canceled waiter left something behind", d)
	}
	e.finish(hc, 0)
	e.noResidue()
}

// noResidue checks that the server keeps no record of holds or waiters of
// the key, waiting up to a TTL for leases whose release reply was lost.
func (e *env) noResidue() {
	e.t.Helper()
	if e.tg.Residue == nil {
		return
	}
	deadline := now() + e.ttl + slack
	for {
		n, err := e.tg.Residue(e.ctx(e.long()), e.key)
		if err != nil {
			e.t.Errorf("residue: %v", err)
			return
		}
		if n == 0 {
			return
		}
		if now() > deadline {
			e.violation("%d records of %q left on the server after every Lock ended", n, e.key)
			return
		}
		time.Sleep(e.ttl / 20)
	}
}

// contend runs each actor in a loop of Lock, critical section, Unlock for
// d, while nemesis (if not nil) injects faults.
func (e *env) contend(actors []*actor, d time.Duration, nemesis func(stop <-chan struct{}, r *rand.Rand)) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	if nemesis != nil {
		wg.Add(1)
		go func() { defer wg.Done(); nemesis(stop, newRand()) }()
	}
	var lwg sync.WaitGroup
	for _, a := range actors {
		lwg.Add(1)
		go func() {
			defer lwg.Done()
			r := rand.New(rand.NewPCG(uint64(now()), uint64(a.id)))
			for {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 4*e.ttl)
				hd, err := a.lock(ctx)
				cancel()
				if err != nil {
					time.Sleep(e.ttl / 20)
					continue
				}
				work := time.Duration(r.Int64N(int64(e.ttl / 5)))
				if r.IntN(5) == 0 {
					work = e.ttl + time.Duration(r.Int64N(int64(e.ttl))) // outlives the lease if cut off
				}
				hd.work(work)
				_ = hd.unlock(nil)
			}
		}()
	}
	time.Sleep(d)
	close(stop)
	lwg.Wait()
	wg.Wait()
	e.r.mu.Lock()
	n := len(e.r.holds)
	e.r.mu.Unlock()
	if n < 2 {
		e.t.Errorf("only %d holds in %v among %d clients: the cell did not exercise the lock", n, d, len(actors))
	}
}

// twoHandles has three handles on one client (one connection pool, one
// driver) contend: they exclude each other as separate processes do.
func twoHandles(e *env) {
	c := e.client()
	actors := []*actor{e.actor(0, c), e.actor(1, c), e.actor(2, c)}
	e.contend(actors, 2*e.ttl, nil)
}

// reentrantL is a ReentrantMutex entered twice per hold, whose second
// Enter must return the same token.
type reentrantL struct {
	m    *locker.ReentrantMutex
	lctx context.Context
	e    *env
}

func (l *reentrantL) lock(ctx context.Context) (uint64, <-chan struct{}, error) {
	lctx, err := l.m.Enter(ctx)
	if err != nil {
		return 0, nil, err
	}
	tok := l.m.Token(lctx)
	inner, err := l.m.Enter(lctx)
	switch {
	case err != nil && !errors.Is(err, locker.ErrLost):
		l.e.violation("reentry: %v", err)
	case err == nil && (l.m.Token(inner) != tok || l.m.Count(inner) != 2):
		l.e.violation("reentry: token %d count %d, want token %d count 2", l.m.Token(inner), l.m.Count(inner), tok)
	case err != nil:
		l.e.r.note("hold lost between the Enter and its reentry")
		_ = l.m.Leave(lctx) // undo the first level; the loss shows on Done
	}
	l.lctx = lctx
	return uint64(tok), lctx.Done(), nil
}

func (l *reentrantL) unlock(ctx context.Context) error {
	lctx := l.lctx
	if l.m.Count(lctx) == 2 {
		if err := l.m.Leave(lctx); err != nil && !errors.Is(err, locker.ErrLost) {
			return err
		}
		if lctx.Err() == nil && l.m.Count(lctx) != 1 {
			l.e.violation("reentry: count %d after one Leave of two", l.m.Count(lctx))
		}
	}
	return l.m.Leave(lctx)
}

// nemesis returns a nemesis that picks one of nets at random, black-holes
// it or drops its replies for half a TTL to two TTLs, or resets it.
func (e *env) nemesis(nets []Net) func(stop <-chan struct{}, r *rand.Rand) {
	return func(stop <-chan struct{}, r *rand.Rand) {
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Duration(r.Int64N(int64(e.ttl)))):
			}
			n := nets[r.IntN(len(nets))]
			switch r.IntN(3) {
			case 0:
				n.Reset()
				continue
			case 1:
				n.Blackhole(true)
			case 2:
				n.DropReplies(true)
			}
			select {
			case <-stop:
			case <-time.After(e.ttl/2 + time.Duration(r.Int64N(int64(e.ttl*3/2)))):
			}
			n.Heal()
		}
	}
}

// faultyClients returns n clients with their Nets.
func (e *env) faultyClients(n int) ([]Client, []Net) {
	var cs []Client
	var nets []Net
	for range n {
		c := e.client()
		cs = append(cs, c)
		nets = append(nets, e.net(c))
	}
	return cs, nets
}

// reentrant has two clients contend through ReentrantMutex, each hold
// entered twice, under the nemesis.
func reentrant(e *env) {
	cs, nets := e.faultyClients(2)
	var actors []*actor
	for i, c := range cs {
		actors = append(actors, &actor{r: e.r, id: i, l: &reentrantL{m: locker.NewReentrantMutex(c.Driver, e.key, e.opts()...), e: e}})
	}
	e.contend(actors, 3*e.ttl, e.nemesis(nets))
}

// rwmutex has three clients, each with a reader and a writer, contend
// through RWMutex under the nemesis: writers exclude everyone, readers
// only writers.
func rwmutex(e *env) {
	cs, nets := e.faultyClients(3)
	var actors []*actor
	for i, c := range cs {
		for _, read := range []bool{false, true} {
			actors = append(actors, &actor{r: e.r, id: 2*i + btoi(read), shared: read,
				l: rwL{rw: locker.NewRWMutex(c.Driver, e.key, e.opts()...), read: read}})
		}
	}
	e.contend(actors, 3*e.ttl, e.nemesis(nets))
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// contentionFaults has three clients contend under the nemesis, with
// critical sections that sometimes outlive the lease.
func contentionFaults(e *env) {
	cs, nets := e.faultyClients(3)
	var actors []*actor
	for i, c := range cs {
		actors = append(actors, e.actor(i, c))
	}
	e.contend(actors, 4*e.ttl, e.nemesis(nets))
}

// newRand returns a random source seeded from the clock.
func newRand() *rand.Rand { return rand.New(rand.NewPCG(uint64(now()), uint64(time.Now().UnixNano()))) }

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver/memdriver"
)

type demoConfig struct {
	workers, rounds int
	ttl, work       time.Duration
}

// demoLog prints timestamped lines from many goroutines.
type demoLog struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
}

func (l *demoLog) printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintf(l.w, "%8.1fms  %s\n", float64(time.Since(l.start).Microseconds())/1000, fmt.Sprintf(format, args...))
}

const key = "demo/nightly-job"

func demo(w io.Writer, cfg demoConfig) error {
	backend := memdriver.NewBackend()
	log := &demoLog{w: w, start: time.Now()}
	var guard locker.Guard // the fenced resource: rejects stale tokens

	fmt.Fprintf(w, "locker demo: %d workers, each with its own client of an in-process backend, contend for %q (TTL %v)\n\n",
		cfg.workers, key, cfg.ttl)
	if err := demoContention(w, log, backend, &guard, cfg); err != nil {
		return err
	}
	return demoCutOff(w, log, backend, &guard, cfg)
}

// demoContention has the workers take the lock in turn.
func demoContention(w io.Writer, log *demoLog, backend *memdriver.Backend, guard *locker.Guard, cfg demoConfig) error {
	var (
		mu       sync.Mutex
		lastName string
		lastTok  locker.Token
		handoffs int
		errs     []error
	)
	var wg sync.WaitGroup
	for i := range cfg.workers {
		name := fmt.Sprintf("worker-%d", i+1)
		c := locker.New(backend.Driver(), locker.WithTTL(cfg.ttl)) // one Client per "process"
		defer c.Close(context.Background())
		m := c.Mutex(key)
		wg.Go(func() {
			for range cfg.rounds {
				asked := time.Now()
				if err := m.LockContext(context.Background()); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				tok := m.Token()
				mu.Lock()
				from := lastName
				if tok <= lastTok {
					errs = append(errs, fmt.Errorf("token %d after %d: not increasing", tok, lastTok))
				}
				if from != "" && from != name {
					handoffs++
				}
				lastName, lastTok = name, tok
				mu.Unlock()
				if from == "" {
					log.printf("%s acquired the lock, token %d", name, tok)
				} else {
					log.printf("%s acquired the lock, token %d (handoff from %s, waited %v)", name, tok, from, time.Since(asked).Round(time.Microsecond))
				}
				if err := guard.Admit(key, tok); err != nil {
					log.printf("%s: write rejected: %v", name, err)
				}
				time.Sleep(cfg.work)
				if err := m.UnlockContext(context.Background()); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
					return
				}
				log.printf("%s released it", name)
			}
		})
	}
	wg.Wait()
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	fmt.Fprintf(w, "\n%d acquisitions, %d handoffs between workers, fencing tokens 1..%d strictly increasing\n\n",
		cfg.workers*cfg.rounds, handoffs, lastTok)
	return nil
}

// demoCutOff cuts a holder off from the backend: it learns of the loss
// before the next worker holds the lock, and its late write is fenced off.
func demoCutOff(w io.Writer, log *demoLog, backend *memdriver.Backend, guard *locker.Guard, cfg demoConfig) error {
	fmt.Fprintf(w, "Now worker-1 takes the lock and is cut off from the backend (its renewals hang).\n\n")
	d1 := backend.Driver()
	m1 := locker.NewMutex(d1, key, locker.WithTTL(cfg.ttl), locker.WithErrorHandler(func(error) {}))
	if err := m1.LockContext(context.Background()); err != nil {
		return err
	}
	t0 := time.Now()
	tok1 := m1.Token()
	log.printf("worker-1 acquired the lock, token %d", tok1)
	_ = guard.Admit(key, tok1)
	d1.Block()
	defer d1.Unblock()

	m2 := locker.NewMutex(backend.Driver(), key, locker.WithTTL(cfg.ttl))
	got2 := make(chan time.Time, 1)
	go func() {
		if err := m2.LockContext(context.Background()); err == nil {
			got2 <- time.Now()
		}
		close(got2)
	}()

	<-m1.Done()
	lostAt := time.Now()
	log.printf("worker-1 learned it lost the lock after %v: %v", lostAt.Sub(t0).Round(time.Millisecond), m1.Err())
	t2, ok := <-got2
	if !ok {
		return errors.New("worker-2 did not get the lock")
	}
	log.printf("worker-2 acquired the lock, token %d, %v after worker-1 took it", m2.Token(), t2.Sub(t0).Round(time.Millisecond))
	if err := guard.Admit(key, m2.Token()); err != nil {
		return err
	}
	// worker-1 wakes up and, not having checked Done, tries to write.
	if err := guard.Admit(key, tok1); err != nil {
		log.printf("worker-1's late write with token %d: rejected (%v)", tok1, err)
	} else {
		return errors.New("the stale write was accepted")
	}
	if !lostAt.Before(t2) {
		return fmt.Errorf("loss signalled %v after the successor acquired", lostAt.Sub(t2))
	}
	fmt.Fprintf(w, "\nworker-1 knew of the loss %v before worker-2 held the lock.\n", t2.Sub(lostAt).Round(time.Millisecond))
	d1.Unblock()
	_ = m1.UnlockContext(context.Background()) // reports the loss; touches nothing of worker-2's
	if err := m2.UnlockContext(context.Background()); err != nil {
		return err
	}
	if err := demoShutdown(w, log, backend, cfg); err != nil {
		return err
	}
	if err := demoElection(w, log, backend, cfg); err != nil {
		return err
	}
	return demoSemaphore(w, log, backend, cfg)
}

// demoShutdown shows a holder that shuts down: Client.Close releases its
// lock at once, so the next worker does not wait for the lease to run out.
func demoShutdown(w io.Writer, log *demoLog, backend *memdriver.Backend, cfg demoConfig) error {
	fmt.Fprintf(w, "\nFinally worker-3 holds the lock and shuts down (Client.Close, as on SIGTERM).\n\n")
	c3 := locker.New(backend.Driver(), locker.WithTTL(cfg.ttl))
	h3, err := c3.Mutex(key).Acquire(context.Background())
	if err != nil {
		return err
	}
	log.printf("worker-3 acquired the lock, token %d", h3.Token())
	c4 := locker.New(backend.Driver(), locker.WithTTL(cfg.ttl))
	defer c4.Close(context.Background())
	got4 := make(chan *locker.Hold, 1)
	go func() {
		h, err := c4.Mutex(key).Acquire(context.Background())
		if err != nil {
			close(got4)
			return
		}
		got4 <- h
	}()
	time.Sleep(cfg.work)
	closed := time.Now()
	if err := c3.Close(context.Background()); err != nil {
		return err
	}
	<-h3.Done()
	log.printf("worker-3 closed its client: %v", h3.Err())
	h4, ok := <-got4
	if !ok {
		return errors.New("worker-4 did not get the lock")
	}
	log.printf("worker-4 acquired the lock, token %d, %v after the close (the TTL is %v)", h4.Token(), time.Since(closed).Round(time.Microsecond), cfg.ttl)
	return h4.Release(context.Background())
}

// demoElection elects a leader, has the backend drop its lease, and shows
// that the leader learns it before the next candidate is elected, with a
// greater term.
func demoElection(w io.Writer, log *demoLog, backend *memdriver.Backend, cfg demoConfig) error {
	const election = "demo/scheduler"
	fmt.Fprintf(w, "\nAn election: two workers campaign for %q; the leader's lease is dropped by the backend.\n\n", election)
	ctx := context.Background()
	c1 := locker.New(backend.Driver(), locker.WithTTL(cfg.ttl))
	defer c1.Close(ctx)
	c2 := locker.New(backend.Driver(), locker.WithTTL(cfg.ttl))
	defer c2.Close(ctx)
	lead, err := c1.Election(election).Campaign(ctx, "worker-1")
	if err != nil {
		return err
	}
	log.printf("worker-1 elected, term %d", lead.Token())
	next := make(chan *locker.Hold, 1)
	go func() {
		h, err := c2.Election(election).Campaign(ctx, "worker-2")
		if err != nil {
			close(next)
			return
		}
		next <- h
	}()
	time.Sleep(cfg.work)
	backend.Expire(election)
	<-lead.Done()
	log.printf("worker-1 learns it no longer leads: %v", lead.Err())
	h2, ok := <-next
	if !ok {
		return errors.New("worker-2 was not elected")
	}
	l, err := c1.Election(election).Leader(ctx)
	if err != nil {
		return err
	}
	log.printf("worker-2 elected, term %d; Leader() = %q, term %d", h2.Token(), l.Value, l.Term)
	return h2.Release(ctx)
}

// demoSemaphore has four workers share a semaphore of two permits: at most
// two work at once, each with a permit's own fencing token.
func demoSemaphore(w io.Writer, log *demoLog, backend *memdriver.Backend, cfg demoConfig) error {
	const pool, size, workers = "demo/exports", 2, 4
	fmt.Fprintf(w, "\nA semaphore: %d workers share %d permits of %q.\n\n", workers, size, pool)
	ctx := context.Background()
	var mu sync.Mutex
	busy, most := 0, 0
	errs := make(chan error, workers)
	for i := 1; i <= workers; i++ {
		go func() {
			c := locker.New(backend.Driver(), locker.WithTTL(cfg.ttl))
			defer c.Close(ctx)
			h, err := c.Semaphore(pool, size).Acquire(ctx, 1)
			if err != nil {
				errs <- err
				return
			}
			mu.Lock()
			busy++
			most = max(most, busy)
			log.printf("worker-%d got a permit, token %d (%d of %d in use)", i, h.Token(), busy, size)
			mu.Unlock()
			time.Sleep(cfg.work)
			mu.Lock()
			busy--
			mu.Unlock()
			errs <- h.Release(ctx)
		}()
	}
	for range workers {
		if err := <-errs; err != nil {
			return err
		}
	}
	log.printf("at most %d of the %d workers held a permit at once", most, workers)
	return nil
}

package faultmatrix

import (
	"context"
	"fmt"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
)

// semL takes w permits of a Semaphore per hold.
type semL struct {
	s *locker.Semaphore
	w int64
	h *locker.Hold
}

func (l *semL) lock(ctx context.Context) (uint64, <-chan struct{}, error) {
	h, err := l.s.Acquire(ctx, l.w)
	if err != nil {
		return 0, nil, err
	}
	l.h = h
	return uint64(h.Token()), h.Done(), nil
}

func (l *semL) unlock(ctx context.Context) error { return l.h.Release(ctx) }

// electionL campaigns in an Election; a hold is a term of leadership.
type electionL struct {
	e     *locker.Election
	value string
}

func (l *electionL) lock(ctx context.Context) (uint64, <-chan struct{}, error) {
	h, err := l.e.Campaign(ctx, l.value)
	if err != nil {
		return 0, nil, err
	}
	return uint64(h.Token()), h.Done(), nil
}

func (l *electionL) unlock(ctx context.Context) error { return l.e.Resign(ctx) }

// semaphoreSize is the size of the semaphore cell's semaphore; its actors
// take 1 or 2 permits each, 6 permits wanted in all.
const semaphoreSize = 3

// semaphoreFaults has three clients, each with actors taking 1 and 2
// permits of one semaphore, contend under the nemesis: the permits that
// clients believe they hold never weigh more than the size.
func semaphoreFaults(e *env) {
	cs, nets := e.faultyClients(3)
	if !driver.CapabilitiesOf(cs[0].Driver).Counted {
		e.skip("the driver grants no counted Shared requests (driver.Capabilities.Counted)")
	}
	e.r.limit = semaphoreSize
	var actors []*actor
	for i, c := range cs {
		cl := locker.New(c.Driver, e.opts()...)
		e.t.Cleanup(func() { _ = cl.Close(context.Background()) })
		for w := int64(1); w <= 2; w++ {
			actors = append(actors, &actor{r: e.r, id: 2*i + int(w) - 1, shared: true, weight: w,
				l: &semL{s: cl.Semaphore(e.key, semaphoreSize), w: w}})
		}
	}
	e.contend(actors, 3*e.ttl, e.nemesis(nets))
}

// electionFaults has three clients campaign in one election under the
// nemesis: no two believe they lead at once, terms increase in the order
// of election, and the fenced resource loses no acknowledged update.
func electionFaults(e *env) {
	cs, nets := e.faultyClients(3)
	if caps := driver.CapabilitiesOf(cs[0].Driver); !caps.Values {
		e.skip("the driver keeps no values (driver.Capabilities.Values)")
	} else if !caps.Inspect {
		e.skip("the driver cannot be inspected (driver.Capabilities.Inspect)")
	}
	var actors []*actor
	for i, c := range cs {
		cl := locker.New(c.Driver, e.opts()...)
		e.t.Cleanup(func() { _ = cl.Close(context.Background()) })
		actors = append(actors, &actor{r: e.r, id: i, l: &electionL{e: cl.Election(e.key), value: fmt.Sprintf("candidate-%d", i)}})
	}
	e.contend(actors, 3*e.ttl, e.nemesis(nets))
}

package driverkit

import (
	"context"
	"math/rand/v2"
	"time"
)

// Backoff spaces the retries of a loop: exponential delays from Min to
// Max, each drawn at random around its value when Jitter is set, so that
// clients that failed together do not retry together. Reset starts over
// at Min after a success. The front-end's waits and a driver's reconnect
// loops share it:
//
//	bo := driverkit.Backoff{Min: 10 * time.Millisecond, Max: time.Second}
//	for {
//		if err := try(ctx); err == nil {
//			bo.Reset()
//			continue
//		}
//		if err := bo.Wait(ctx); err != nil {
//			return err
//		}
//	}
//
// The zero value is usable: 10 ms doubling to 1 s, without jitter. A
// Backoff is not safe for concurrent use: each loop has its own.
type Backoff struct {
	// Min is the first delay (10 ms if zero).
	Min time.Duration
	// Max caps the delays, jitter included (1 s if zero; Min if less).
	Max time.Duration
	// Multiplier grows the delay after each Next (2 if zero; 1 if less
	// than 1, for a constant delay).
	Multiplier float64
	// Jitter, from 0 to 1, spreads each delay d uniformly over
	// [d·(1−Jitter), d·(1+Jitter)], then capped at Max. Zero gives the
	// exact sequence.
	Jitter float64

	cur time.Duration // the next delay before jitter; 0: Min
}

// The bounds of a zero Backoff.
const (
	defaultMin = 10 * time.Millisecond
	defaultMax = time.Second
)

// Next returns the next delay and grows the following one.
func (b *Backoff) Next() time.Duration {
	lo, hi := b.bounds()
	d := b.cur
	if d < lo {
		d = lo
	}
	d = min(d, hi)
	m := b.Multiplier
	switch {
	case m == 0:
		m = 2
	case m < 1:
		m = 1
	}
	if grown := float64(d) * m; grown < float64(hi) {
		b.cur = time.Duration(grown)
	} else {
		b.cur = hi
	}
	if j := min(max(b.Jitter, 0), 1); j > 0 {
		d = time.Duration(float64(d) * (1 - j + 2*j*rand.Float64()))
	}
	return min(d, hi)
}

// bounds returns Min and Max with their defaults.
func (b *Backoff) bounds() (lo, hi time.Duration) {
	lo, hi = b.Min, b.Max
	if lo <= 0 {
		lo = defaultMin
	}
	if hi <= 0 {
		hi = defaultMax
	}
	return lo, max(lo, hi)
}

// Reset makes the next delay Min again.
func (b *Backoff) Reset() { b.cur = 0 }

// Wait sleeps for Next, or until ctx is done, and then returns ctx's
// cause (nil when the delay passed).
func (b *Backoff) Wait(ctx context.Context) error {
	t := time.NewTimer(b.Next())
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

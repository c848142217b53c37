package mongodriver

import (
	"context"
	"sync"
	"time"

	"go.mongodb.org/mongo-driver/v2/bson"
	"go.mongodb.org/mongo-driver/v2/mongo"
)

// clockMaxAge is how long a measurement of the server's clock is used
// before the next call measures again. clockDrift is the rate at which
// the bounds widen with the measurement's age: 1000 ppm, twice what NTP
// lets a clock slew.
const (
	clockMaxAge = time.Second
	clockDrift  = 1000
)

// A clock bounds the server's clock from this process's monotonic clock,
// by reading the server's clock with the hello command (its localTime,
// whole milliseconds). A reply that took from local s to local r, and
// read S, means that the server's clock at a later local L is between
// S+(L-r) and S+1ms+(L-s), widened by the drift allowance for L's
// distance from the measurement. Successive measurements are intersected
// (each is a true bound), so a slow reply never loosens a tight one.
type clock struct {
	db   *mongo.Database
	base time.Time // the local origin (monotonic)

	mu     sync.Mutex
	ok     bool
	at     int64 // local µs of the last measurement
	lo, hi int64 // server µs minus local µs, bounds at the measurement
}

func newClock(db *mongo.Database) *clock {
	return &clock{db: db, base: time.Now()}
}

func (c *clock) local(t time.Time) int64 { return int64(t.Sub(c.base) / time.Microsecond) }

// now returns the bounds of the server's clock at this instant, measuring
// it first when the last measurement is too old.
func (c *clock) now(ctx context.Context) (span, error) {
	if s, ok := c.span(time.Now()); ok {
		return s, nil
	}
	if err := c.measure(ctx); err != nil {
		return span{}, err
	}
	s, _ := c.span(time.Now())
	return s, nil
}

// span returns the bounds at local instant t, and false when there is no
// measurement younger than clockMaxAge.
func (c *clock) span(t time.Time) (span, bool) {
	l := c.local(t)
	c.mu.Lock()
	defer c.mu.Unlock()
	age := l - c.at
	if !c.ok || age > int64(clockMaxAge/time.Microsecond) {
		return span{}, false
	}
	slack := age/clockDrift + 1
	return span{lo: l + c.lo - slack, hi: l + c.hi + slack}, true
}

// measure reads the server's clock and records the bounds.
func (c *clock) measure(ctx context.Context) error {
	var reply struct {
		LocalTime bson.DateTime `bson:"localTime"`
	}
	s := time.Now()
	err := c.db.RunCommand(ctx, bson.D{{Key: "hello", Value: 1}}).Decode(&reply)
	r := time.Now()
	if err != nil {
		return err
	}
	server := int64(reply.LocalTime) * 1000
	lo, hi := server-c.local(r), server+1000-c.local(s)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ok {
		// The previous bounds, widened by their age, still hold: keep the
		// tighter of each unless the two do not meet (the server's clock
		// was stepped), when the new measurement wins.
		slack := (c.local(r)-c.at)/clockDrift + 1
		nlo, nhi := max(lo, c.lo-slack), min(hi, c.hi+slack)
		if nlo <= nhi {
			lo, hi = nlo, nhi
		}
	}
	c.ok, c.at, c.lo, c.hi = true, c.local(r), lo, hi
	return nil
}

package gocronlock_test

import (
	"context"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver/memdriver"
	"github.com/go-locker/locker/gocronlock"
	"github.com/jonboulle/clockwork"
)

// tally counts the runs of each tick.
// offsetClock is the real clock, offset ahead (behind when negative), as
// the clock of a host that has drifted (integration/gocronreplicas has the
// same for its processes).
type offsetClock struct {
	clockwork.Clock
	offset time.Duration
}

func (c offsetClock) Now() time.Time                  { return c.Clock.Now().Add(c.offset) }
func (c offsetClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c offsetClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

type tally struct {
	mu   sync.Mutex
	runs map[int64]int
}

func (ta *tally) add(tick int64) {
	ta.mu.Lock()
	defer ta.mu.Unlock()
	ta.runs[tick]++
}

// bubbleReplica is a scheduler whose clock is offset from the bubble's,
// with a job every second that counts its ticks.
func bubbleReplica(t *testing.T, offset time.Duration, guard gocron.SchedulerOption, ta *tally) gocron.Scheduler {
	clock := offsetClock{clockwork.NewRealClock(), offset}
	s, err := gocron.NewScheduler(gocron.WithClock(clock), guard)
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.NewJob(gocron.CronJob("* * * * * *", true), gocron.NewTask(func() {
		ta.add(clock.Now().Round(time.Second).Unix())
	}), gocron.WithName("tick"))
	if err != nil {
		t.Fatal(err)
	}
	s.Start()
	return s
}

// TestElectorHandoff runs three replicas 30ms apart in a bubble with
// Electors, and makes the leader (the replica whose clock is ahead, which
// runs each tick first) resign 10ms after it ran a tick. Without a settle
// time, the replica elected next, whose clock is behind, runs that tick
// again; with a settle time of 100ms it does not, and no tick is lost.
func TestElectorHandoff(t *testing.T) {
	for _, tc := range []struct {
		name   string
		settle time.Duration
		want   int // runs of the tick of the handoff
	}{
		{"Settle", 100 * time.Millisecond, 1},
		{"NoSettle", 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				runs, handoff := electorHandoff(t, tc.settle)
				for tick, n := range runs {
					want := 1
					if tick == handoff {
						want = tc.want
					}
					if n != want {
						t.Errorf("tick %d (handoff at %d) ran %d times; want %d", tick, handoff, n, want)
					}
				}
				t.Logf("runs per tick (handoff at %d): %v", handoff, runs)
				if len(runs) < 9 {
					t.Errorf("%d ticks ran in 9s: %v", len(runs), runs)
				}
			})
		})
	}
}

// electorHandoff runs the replicas for about 10s (the bubble's clock starts
// on a whole second) with a handoff at the fifth tick, and returns the
// runs of each tick and the tick of the handoff.
func electorHandoff(t *testing.T, settle time.Duration) (map[int64]int, int64) {
	b := memdriver.NewBackend()
	ta := &tally{runs: map[int64]int{}}
	start := time.Now()
	var scheds []gocron.Scheduler
	var cancels []context.CancelFunc
	for i, offset := range []time.Duration{30 * time.Millisecond, 0, -30 * time.Millisecond} {
		c := locker.New(b.Driver(), locker.WithTTL(2*time.Second))
		defer c.Close(context.Background())
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		el, err := gocronlock.NewElector(ctx, c.Election("cron/leader"), "r", settle)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 { // the replica ahead leads
			el.Latch().Await(ctx)
		}
		scheds = append(scheds, bubbleReplica(t, offset, gocron.WithDistributedElector(el), ta))
		cancels = append(cancels, cancel)
	}
	// The leader runs tick 5 at 4.970s; it resigns at 4.980s.
	time.Sleep(time.Until(start.Add(4980 * time.Millisecond)))
	cancels[0]()
	time.Sleep(time.Until(start.Add(9500 * time.Millisecond)))
	for _, s := range scheds {
		s.Shutdown()
	}
	ta.mu.Lock()
	defer ta.mu.Unlock()
	return ta.runs, start.Add(5 * time.Second).Unix()
}

// TestLockerBubble runs three replicas 30ms apart in a bubble with Lockers
// for 20 ticks: with a minimum hold of half the interval each tick runs
// once; with 1ms (a plain lock), the replicas behind run it again.
func TestLockerBubble(t *testing.T) {
	for _, tc := range []struct {
		name    string
		minHold time.Duration
		want    int
	}{
		{"MinHold", 500 * time.Millisecond, 1},
		{"Plain", time.Millisecond, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				b := memdriver.NewBackend()
				ta := &tally{runs: map[int64]int{}}
				start := time.Now()
				var scheds []gocron.Scheduler
				for _, offset := range []time.Duration{30 * time.Millisecond, 0, -30 * time.Millisecond} {
					c := locker.New(b.Driver(), locker.WithTTL(800*time.Millisecond))
					defer c.Close(context.Background())
					scheds = append(scheds, bubbleReplica(t, offset, gocron.WithDistributedLocker(gocronlock.NewLocker(c, tc.minHold)), ta))
				}
				time.Sleep(time.Until(start.Add(20500 * time.Millisecond)))
				for _, s := range scheds {
					s.Shutdown()
				}
				ta.mu.Lock()
				defer ta.mu.Unlock()
				// Tick 0 is seen only by the replica behind, whose clock
				// reads 23:59:59.970 when the bubble starts.
				delete(ta.runs, start.Unix())
				if len(ta.runs) != 20 {
					t.Errorf("%d ticks ran in 20.5s; want 20", len(ta.runs))
				}
				for tick, n := range ta.runs {
					if n != tc.want {
						t.Errorf("tick %d ran %d times; want %d", tick, n, tc.want)
					}
				}
			})
		})
	}
}

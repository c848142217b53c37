// Package gocronreplicas runs gocronlock's tests with scheduler replicas in
// processes of their own over redis-server: Redis is not a dependency of
// gocronlock, so they live in this unpublished module.
package gocronreplicas

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver/redisdriver"
	"github.com/go-locker/locker/gocronlock"
	"github.com/go-locker/locker/internal/testflag"
	"github.com/go-locker/locker/internal/testserver"
	"github.com/jonboulle/clockwork"
	"github.com/redis/go-redis/v9"
)

// envReplica, set to a replicaConfig in JSON, makes the test binary run
// one scheduler replica (see TestMain).
const envReplica = "GOCRONLOCK_REPLICA"

// The replicas' settings.
const (
	lockerTTL     = 800 * time.Millisecond // Locker: lease
	lockerMinHold = 500 * time.Millisecond // Locker: half the 1s interval
	electorTTL    = 2 * time.Second        // Elector: lease
	electorSettle = 100 * time.Millisecond // Elector: above the 60ms clock spread
)

type replicaConfig struct {
	Addr   string
	Prefix string // of every Redis key of the run
	Mode   string // "locker" or "elector"
	ID     string
	Offset time.Duration // added to the replica's clock
	Until  time.Time     // the replica stops then (real time), or at SIGTERM
	// DefaultTTL makes a Locker's lease locker.DefaultTTL (15s) rather
	// than lockerTTL.
	DefaultTTL bool
}

// offsetClock is the real clock, Offset ahead (behind when negative), as
// the clock of a host that has drifted: gocron computes its next run from
// Now and waits with real timers.
type offsetClock struct {
	clockwork.Clock
	offset time.Duration
}

func (c offsetClock) Now() time.Time                  { return c.Clock.Now().Add(c.offset) }
func (c offsetClock) Since(t time.Time) time.Duration { return c.Now().Sub(t) }
func (c offsetClock) Until(t time.Time) time.Duration { return t.Sub(c.Now()) }

// runsKey is the Redis list of the replicas that ran the tick at unix
// second tick.
func runsKey(prefix string, tick int64) string { return prefix + "runs:" + strconv.FormatInt(tick, 10) }

// replicaMain runs a gocron scheduler with a job every second on its
// offset clock, guarded by a Locker or an Elector on Redis, until
// cfg.Until. Each run appends the replica's ID to the list of its tick.
func replicaMain(js string) int {
	var cfg replicaConfig
	if err := json.Unmarshal([]byte(js), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "replica config:", err)
		return 2
	}
	if err := runReplica(cfg); err != nil {
		fmt.Fprintf(os.Stderr, "replica %s: %v\n", cfg.ID, err)
		return 1
	}
	return 0
}

func runReplica(cfg replicaConfig) error {
	rdb := redis.NewClient(&redis.Options{Addr: cfg.Addr})
	defer rdb.Close()
	drv, err := redisdriver.New(rdb, &redisdriver.Options{Prefix: cfg.Prefix + "lock:"})
	if err != nil {
		return err
	}
	errs := make(chan error, 16)
	c := locker.New(drv, locker.WithErrorHandler(func(err error) {
		select {
		case errs <- err:
		default:
		}
	}))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clock := offsetClock{clockwork.NewRealClock(), cfg.Offset}
	guard, err := guardOption(ctx, cfg, c)
	if err != nil {
		return err
	}
	s, err := gocron.NewScheduler(gocron.WithClock(clock), guard)
	if err != nil {
		return err
	}
	runErr := make(chan error, 1)
	_, err = s.NewJob(gocron.CronJob("* * * * * *", true), gocron.NewTask(func() {
		// The job runs at its tick on this replica's clock.
		tick := clock.Now().Round(time.Second).Unix()
		if err := rdb.RPush(ctx, runsKey(cfg.Prefix, tick), cfg.ID).Err(); err != nil {
			select {
			case runErr <- err:
			default:
			}
		}
	}), gocron.WithName("tick"))
	if err != nil {
		return err
	}
	term := make(chan os.Signal, 1)
	signal.Notify(term, syscall.SIGTERM) // a graceful stop, as a deployment does
	defer signal.Stop(term)
	s.Start()
	select {
	case <-time.After(time.Until(cfg.Until)):
	case <-term:
	}
	stop := time.Now()
	if err := s.Shutdown(); err != nil {
		return err
	}
	cancel()
	cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer ccancel()
	if err := c.Close(cctx); err != nil {
		return err
	}
	fmt.Printf("replica %s: Shutdown and Close took %v\n", cfg.ID, time.Since(stop).Round(time.Millisecond))
	select {
	case err := <-runErr:
		return fmt.Errorf("recording a run: %w", err)
	default:
	}
	select {
	case err := <-errs:
		return fmt.Errorf("error handler: %w", err)
	default:
	}
	return nil
}

// guardOption returns the scheduler option of cfg.Mode: a Locker or an
// Elector over c.
func guardOption(ctx context.Context, cfg replicaConfig, c *locker.Client) (gocron.SchedulerOption, error) {
	switch cfg.Mode {
	case "locker":
		ttl := lockerTTL
		if cfg.DefaultTTL {
			ttl = locker.DefaultTTL
		}
		return gocron.WithDistributedLocker(gocronlock.NewLocker(c, lockerMinHold, locker.WithTTL(ttl))), nil
	case "elector":
		el, err := gocronlock.NewElector(ctx, c.Election(gocronlock.KeyPrefix+"leader", locker.WithTTL(electorTTL)), cfg.ID, electorSettle)
		if err != nil {
			return nil, err
		}
		return gocron.WithDistributedElector(el), nil
	}
	return nil, fmt.Errorf("unknown mode %q", cfg.Mode)
}

// TestReplicas is the scheduled-job test of issue 32: three schedulers in
// processes of their own, on Redis, with clocks 30ms behind, exact and
// 30ms ahead, run a job every second for 20 ticks (8 with -short); the
// replica that ran the middle tick is killed with SIGKILL just after it.
// Every tick runs exactly once, but those that fall within one lease after
// the kill, which run at most once.
func TestReplicas(t *testing.T) {
	srv := testserver.Redis(t)
	ticks := 20
	if !testflag.Long() {
		ticks = 8
	}
	for _, tc := range []struct {
		mode  string
		grace time.Duration // after the kill, ticks may be lost for this long
	}{
		{"locker", lockerTTL},
		{"elector", electorTTL + electorSettle},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			t.Parallel()
			runReplicas(t, srv.Addr, tc.mode, ticks, tc.grace)
		})
	}
}

// A run is one scenario of TestReplicas: its replicas and their ticks.
type run struct {
	t           *testing.T
	rdb         *redis.Client
	prefix      string // of every Redis key of the run
	first, last time.Time
	offsets     []time.Duration
	procs       []*exec.Cmd
	defaultTTL  bool // replicaConfig.DefaultTTL
	outs        []*bytes.Buffer
	exits       []error
	wg          sync.WaitGroup
}

var offsets = []time.Duration{-30 * time.Millisecond, 0, 30 * time.Millisecond}

func runReplicas(t *testing.T, addr, mode string, ticks int, grace time.Duration) {
	var rb [6]byte
	rand.Read(rb[:])
	// Ticks first..last are counted; the replicas start 2s before the
	// first and stop 1.5s after the last.
	first := time.Now().Truncate(time.Second).Add(3 * time.Second)
	r := &run{t: t, rdb: redis.NewClient(&redis.Options{Addr: addr}), prefix: "gocronlock-test-" + hex.EncodeToString(rb[:]) + ":",
		first: first, last: first.Add(time.Duration(ticks-1) * time.Second)}
	defer r.cleanUp()
	r.start(addr, mode)

	// Kill the replica that ran the middle tick, 150ms after it.
	middle := first.Add(time.Duration(ticks/2) * time.Second)
	time.Sleep(time.Until(middle.Add(150 * time.Millisecond)))
	victim := r.runners(middle)
	if len(victim) == 0 {
		t.Fatalf("nobody ran the middle tick %d by 150ms after it", middle.Unix())
	}
	v, _ := strconv.Atoi(victim[0])
	killed := time.Now()
	if err := r.procs[v].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	r.wg.Wait()
	for i, err := range r.exits {
		if i != v && err != nil {
			t.Errorf("replica %d (clock %v): %v\n%s", i, offsets[i], err, r.outs[i])
		}
	}
	lost, byReplica := r.count(killed, grace)
	t.Logf("%s: %d ticks, %d run, %d lost %v after replica %d (clock %v) was killed 150ms after tick %d; runs by replica: %v",
		mode, ticks, ticks-len(lost), len(lost), lost, v, offsets[v], middle.Unix(), byReplica)
}

// start starts a replica per clock offset.
func (r *run) start(addr, mode string) {
	r.exits = make([]error, len(offsets))
	for i, off := range offsets {
		js, _ := json.Marshal(replicaConfig{Addr: addr, Prefix: r.prefix, Mode: mode, ID: strconv.Itoa(i),
			Offset: off, Until: r.last.Add(1500 * time.Millisecond), DefaultTTL: r.defaultTTL})
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envReplica+"="+string(js))
		out := new(bytes.Buffer)
		cmd.Stdout, cmd.Stderr = out, out
		if err := cmd.Start(); err != nil {
			r.t.Fatal(err)
		}
		r.procs, r.outs = append(r.procs, cmd), append(r.outs, out)
		r.wg.Go(func() { r.exits[i] = cmd.Wait() })
	}
}

// cleanUp kills what is left of the replicas and deletes the run's keys.
func (r *run) cleanUp() {
	for _, p := range r.procs {
		p.Process.Kill()
	}
	r.wg.Wait()
	ctx := context.Background()
	if keys, _ := r.rdb.Keys(ctx, r.prefix+"*").Result(); len(keys) > 0 {
		r.rdb.Del(ctx, keys...)
	}
	r.rdb.Close()
}

// runners returns the IDs of the replicas that ran tick, in order.
func (r *run) runners(tick time.Time) []string {
	ran, err := r.rdb.LRange(context.Background(), runsKey(r.prefix, tick.Unix()), 0, -1).Result()
	if err != nil {
		r.t.Fatal(err)
	}
	return ran
}

// count checks that every tick ran once, but those within grace after
// killed, which ran at most once. It returns the ticks lost and the runs
// of each replica.
func (r *run) count(killed time.Time, grace time.Duration) (lost []int64, byReplica map[string]int) {
	byReplica = map[string]int{}
	for tick := r.first; !tick.After(r.last); tick = tick.Add(time.Second) {
		ran := r.runners(tick)
		for _, id := range ran {
			byReplica[id]++
		}
		switch {
		case len(ran) > 1:
			r.t.Errorf("tick %d ran %d times, by replicas %q", tick.Unix(), len(ran), ran)
		case len(ran) == 0:
			lost = append(lost, tick.Unix())
			if killed.IsZero() {
				r.t.Errorf("tick %d did not run", tick.Unix())
			} else if tick.Before(killed) || tick.Sub(killed) > grace {
				r.t.Errorf("tick %d did not run (%v after the kill; only ticks within %v may be lost)", tick.Unix(), tick.Sub(killed).Round(time.Millisecond), grace)
			}
		}
	}
	return lost, byReplica
}

// TestGracefulStops: three Locker replicas on Redis with the default
// 15s lease and a job every second (minimum hold 500ms); the replica that
// ran a tick stops gracefully (SIGTERM: gocron's Shutdown, then
// Client.Close) 150ms after it, twice, so that one replica is left. A
// graceful stop costs the others no tick: every tick runs exactly once.
func TestGracefulStops(t *testing.T) {
	srv := testserver.Redis(t)
	const ticks = 12
	stops := []int{3, 7} // the ticks after which their runner stops
	if !testflag.Long() {
		t.Log("quick run: the run takes 16s")
	}
	var rb [6]byte
	rand.Read(rb[:])
	first := time.Now().Truncate(time.Second).Add(3 * time.Second)
	r := &run{t: t, rdb: redis.NewClient(&redis.Options{Addr: srv.Addr}), prefix: "gocronlock-test-" + hex.EncodeToString(rb[:]) + ":",
		first: first, last: first.Add((ticks - 1) * time.Second), defaultTTL: true}
	defer r.cleanUp()
	r.start(srv.Addr, "locker")

	stopped := map[int]bool{}
	for _, n := range stops {
		tick := first.Add(time.Duration(n) * time.Second)
		time.Sleep(time.Until(tick.Add(150 * time.Millisecond)))
		v := -1
		if ran := r.runners(tick); len(ran) > 0 {
			v, _ = strconv.Atoi(ran[0])
		} else { // a lost tick, which count reports: stop another
			for v = 0; stopped[v]; v++ {
			}
		}
		if stopped[v] {
			t.Fatalf("tick %d ran on replica %d, which was stopped", tick.Unix(), v)
		}
		stopped[v] = true
		if err := r.procs[v].Process.Signal(syscall.SIGTERM); err != nil {
			t.Fatal(err)
		}
		t.Logf("replica %d (clock %v) was stopped 150ms after tick %d", v, offsets[v], tick.Unix())
	}
	r.wg.Wait()
	for i, err := range r.exits {
		if err != nil {
			t.Errorf("replica %d (clock %v): %v", i, offsets[i], err)
		}
		t.Logf("replica %d output:\n%s", i, r.outs[i])
	}
	lost, byReplica := r.count(time.Time{}, 0)
	t.Logf("%d ticks, %d run, %d lost %v; runs by replica: %v", ticks, ticks-len(lost), len(lost), lost, byReplica)
}

package gocronlock_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/go-co-op/gocron/v2"
	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver/redisdriver"
	"github.com/go-locker/locker/gocronlock"
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
	Until  time.Time     // the replica stops then (real time)
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
	opts := []gocron.SchedulerOption{gocron.WithClock(clock)}
	switch cfg.Mode {
	case "locker":
		opts = append(opts, gocron.WithDistributedLocker(gocronlock.NewLocker(c, lockerMinHold, locker.WithTTL(lockerTTL))))
	case "elector":
		el, err := gocronlock.NewElector(ctx, c.Election(gocronlock.KeyPrefix+"leader", locker.WithTTL(electorTTL)), cfg.ID, electorSettle)
		if err != nil {
			return err
		}
		opts = append(opts, gocron.WithDistributedElector(el))
	default:
		return fmt.Errorf("unknown mode %q", cfg.Mode)
	}
	s, err := gocron.NewScheduler(opts...)
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
	s.Start()
	time.Sleep(time.Until(cfg.Until))
	if err := s.Shutdown(); err != nil {
		return err
	}
	cancel()
	cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer ccancel()
	if err := c.Close(cctx); err != nil {
		return err
	}
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

// TestReplicas is the scheduled-job test of issue 32: three schedulers in
// processes of their own, on Redis, with clocks 30ms behind, exact and
// 30ms ahead, run a job every second for 20 ticks (8 with -short); the
// replica that ran the middle tick is killed with SIGKILL just after it.
// Every tick runs exactly once, but those that fall within one lease after
// the kill, which run at most once.
func TestReplicas(t *testing.T) {
	srv := testserver.Redis(t)
	ticks := 20
	if testing.Short() {
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

func runReplicas(t *testing.T, addr, mode string, ticks int, grace time.Duration) {
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	var rb [6]byte
	rand.Read(rb[:])
	prefix := "gocronlock-test-" + hex.EncodeToString(rb[:]) + ":"
	defer func() {
		keys, _ := rdb.Keys(context.Background(), prefix+"*").Result()
		if len(keys) > 0 {
			rdb.Del(context.Background(), keys...)
		}
	}()

	// Ticks first..last are counted; the replicas start 2s before the
	// first and stop 1.5s after the last.
	first := time.Now().Truncate(time.Second).Add(3 * time.Second)
	last := first.Add(time.Duration(ticks-1) * time.Second)
	offsets := []time.Duration{-30 * time.Millisecond, 0, 30 * time.Millisecond}
	procs := make([]*exec.Cmd, len(offsets))
	outs := make([]*bytes.Buffer, len(offsets))
	for i, off := range offsets {
		js, _ := json.Marshal(replicaConfig{Addr: addr, Prefix: prefix, Mode: mode, ID: strconv.Itoa(i),
			Offset: off, Until: last.Add(1500 * time.Millisecond)})
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), envReplica+"="+string(js))
		outs[i] = new(bytes.Buffer)
		cmd.Stdout, cmd.Stderr = outs[i], outs[i]
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs[i] = cmd
	}
	var wg sync.WaitGroup
	exits := make([]error, len(procs))
	for i, p := range procs {
		wg.Go(func() { exits[i] = p.Wait() })
	}
	defer func() {
		for _, p := range procs {
			p.Process.Kill()
		}
		wg.Wait()
	}()

	// Kill the replica that ran the middle tick, 150ms after it.
	ctx := context.Background()
	middle := first.Add(time.Duration(ticks/2) * time.Second)
	time.Sleep(time.Until(middle.Add(150 * time.Millisecond)))
	ran, err := rdb.LRange(ctx, runsKey(prefix, middle.Unix()), 0, -1).Result()
	if err != nil || len(ran) == 0 {
		t.Fatalf("nobody ran the middle tick %d by 150ms after it: %q, %v", middle.Unix(), ran, err)
	}
	victim, _ := strconv.Atoi(ran[0])
	killed := time.Now()
	if err := procs[victim].Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, err := range exits {
		if i == victim {
			continue
		}
		if err != nil {
			t.Errorf("replica %d (clock %v): %v\n%s", i, offsets[i], err, outs[i])
		}
	}

	// Count.
	byReplica := map[string]int{}
	var lost []int64
	for tick := first; !tick.After(last); tick = tick.Add(time.Second) {
		ran, err := rdb.LRange(ctx, runsKey(prefix, tick.Unix()), 0, -1).Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, id := range ran {
			byReplica[id]++
		}
		switch {
		case len(ran) > 1:
			t.Errorf("tick %d ran %d times, by replicas %q", tick.Unix(), len(ran), ran)
		case len(ran) == 0:
			lost = append(lost, tick.Unix())
			if tick.Before(killed) || tick.Sub(killed) > grace {
				t.Errorf("tick %d did not run (%v after the kill; only ticks within %v may be lost)", tick.Unix(), tick.Sub(killed).Round(time.Millisecond), grace)
			}
		}
	}
	t.Logf("%s: %d ticks, %d run, %d lost %v after replica %d (clock %v) was killed 150ms after tick %d; runs by replica: %v",
		mode, ticks, ticks-len(lost), len(lost), lost, victim, offsets[victim], middle.Unix(), byReplica)
}

// Package gocronlock runs the jobs of github.com/go-co-op/gocron/v2
// schedulers once per tick across replicas, with the locks of package
// locker ([github.com/go-locker/locker]) on any of its backends.
//
// # Two ways
//
// gocron offers two hooks, and this package implements both over a
// locker.Client:
//
//   - [Locker] (gocron.WithDistributedLocker, or
//     gocron.WithDistributedJobLocker for one job): every replica schedules
//     every job; at each tick the first replica to take the job's key runs
//     it and the others skip the tick. The key stays held for a minimum
//     time after it was taken, even when the run ends sooner
//     (locker.WithMinHold), so that a replica whose clock is a little late
//     finds it still held instead of running the tick again.
//   - [Elector] (gocron.WithDistributedElector): the replicas elect a
//     leader (a locker.LeaderLatch) and only the leader runs jobs. When the
//     leader is gone, another takes over within one lease (the election's
//     TTL): the ticks in between do not run anywhere.
//
// To stop a replica, call the scheduler's Shutdown, then the Client's
// Close, before the process exits: Close releases the key of a tick just
// run when its minimum hold ends, and waits for that (by its context), so
// that the other replicas run the next tick. A replica that exits without
// Close leaves the key held until its lease expires (locker.DefaultTTL,
// 15s, unless locker.WithTTL says otherwise), and the ticks until then run
// nowhere.
//
// Both work with jobs on a wall-clock schedule (gocron.CronJob, DailyJob
// and the like), whose ticks are the same on every replica. A
// gocron.DurationJob ticks relative to when each scheduler started; give it
// gocron.WithStartAt on a common boundary, as gocron's Locker notes say.
//
// # Clocks
//
// Replicas' clocks disagree by a few milliseconds, more on a host whose
// clock has drifted. With a Locker, the minimum hold must exceed that
// disagreement plus scheduling jitter, and be shorter than the shortest
// interval between two ticks of a job minus the same allowance, so that
// the next tick finds the key free: half the interval is a good choice
// for jobs every few seconds or more, a few seconds for jobs every minute
// or more. An Elector does not depend on the clocks while a leader lives;
// at a handoff, a new leader whose clock is late could run the tick its
// predecessor has just run, which a settle time (NewElector) prevents.
package gocronlock

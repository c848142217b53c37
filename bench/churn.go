package main

import (
	"context"
	"fmt"
	"io"
	"time"
)

// The new-key churn cell: one goroutine on one client locks and unlocks
// keys that were never used before, one after the other, a new handle for
// each. On etcd and ZooKeeper a new key costs what an old one does not
// (ZooKeeper: the key's parent node; caches that miss).

// churnKeyOf returns the i-th new key of round run of s's churn cell, by
// server. Every key is one last path segment under a parent that exists
// after the first key, so that a library that makes a key's parents (zk.Lock
// creates its lock's path) pays for the new key's node only.
var churnKeyOf = map[string]func(s *system, run int64, i int) string{
	"zk":    churnKey,
	"etcd":  churnKey,
	"redis": churnKey,
	"mem":   churnKey,
}

func churnKey(s *system, run int64, i int) string {
	return fmt.Sprintf("bench/%s/%s/churn/%d-%d", s.server, s.name, run, i)
}

// churnResult is the churn cell of a system: pairs on new keys.
type churnResult struct {
	pairs, errors int
	lat           hist
	d             delta
}

// churnRounds is the number of interleaved rounds of the churn cell: twice
// the contended cells' (a round of a few hundred keys takes about a
// second, and finer interleaving spreads the machine's bursts of load
// over the systems).
func churnRounds(cfg config) int { return 2 * cfg.crounds }

// runChurnCells runs the churn cell of every system of group that has a
// key naming, in churnRounds interleaved rounds.
func runChurnCells(e *env, rep *report, log io.Writer, group []*system) {
	if rep.churn == nil {
		rep.churn = map[*system]*churnResult{}
	}
	rounds := churnRounds(e.cfg)
	for round := range rounds {
		for _, s := range inRound(group, round) {
			keyOf := churnKeyOf[s.server]
			if s.contendedOnly || s.parallelOnly || keyOf == nil {
				continue
			}
			fmt.Fprintf(log, "%s: churn %d new keys (round %d)\n", s.label(), e.cfg.churnKeys/rounds, round+1)
			r := rep.churn[s]
			if r == nil {
				r = &churnResult{}
				rep.churn[s] = r
			}
			if err := runChurn(e, s, r, e.cfg.churnKeys/rounds, keyOf); err != nil {
				rep.failf(s, "churn", err)
			}
		}
	}
}

// runChurn locks and unlocks n new keys on one client of s, adding to r.
func runChurn(e *env, s *system, r *churnResult, n int, keyOf func(*system, int64, int) string) error {
	inst, err := s.open(e, 1)
	if err != nil {
		return err
	}
	defer inst.close()
	ctx := context.Background()
	run := time.Now().UnixNano()
	// Warm up the client on a key of its own (the parents, for
	// ZooKeeper), which is not counted.
	h, err := inst.newLock(0, keyOf(s, run, -1))
	if err != nil {
		return err
	}
	if err := h.Lock(ctx); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if err := h.Unlock(ctx); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	p := e.read(s.server, true)
	for i := range n {
		t0 := time.Now()
		h, err := inst.newLock(0, keyOf(s, run, i))
		if err == nil {
			err = h.Lock(ctx)
		}
		if err == nil {
			err = h.Unlock(ctx)
		}
		if err != nil {
			r.errors++
			continue
		}
		r.lat.add(time.Since(t0))
		r.pairs++
	}
	r.d.add(e.since(s.server, p))
	return nil
}

// writeChurn writes the churn cell's table.
func (r *report) writeChurn(w io.Writer) {
	if len(r.churn) == 0 {
		return
	}
	fmt.Fprintf(w, "### New-key churn: one goroutine locks and unlocks %d keys never used before\n\n", r.cfg.churnKeys)
	fmt.Fprintf(w, "One client, a new handle for each key, keys in a row, in %d interleaved rounds per server. Latency is per pair, the handle's creation included. Requests are by opcode for ZooKeeper, gRPC methods for etcd, commands for Redis.\n\n", churnRounds(r.cfg))
	var rows [][]string
	for _, s := range r.systems {
		c := r.churn[s]
		if c == nil {
			continue
		}
		rows = append(rows, []string{s.server, bold(s.name, s.kind == kindLocker),
			fmt.Sprintf("%.0f", rate(c.pairs, c.d.elapsed)), us(c.lat.quantile(0.5)), us(c.lat.quantile(0.99)),
			per(c.d.trips, c.pairs), perF(int64(c.d.mallocs), c.pairs, 1), perDur(c.d.cpu, c.pairs),
			fmt.Sprint(c.errors), mix(c.d.cmds, max(c.pairs, 1))})
	}
	table(w, "llrrrrrrrl", []string{"server", "system", "pairs/s", "p50 µs", "p99 µs", "round trips/pair", "allocs/pair", "client CPU µs/pair", "errors", "requests per pair"}, rows)
}

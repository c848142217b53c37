package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/quorumdriver"
	"github.com/go-locker/locker/driver/redisdriver"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// quorumMembers is the number of members of the quorum systems: the
// bench's redis-server and two more, started for each instance.
const quorumMembers = 3

func quorumSystems() []*system {
	return []*system{
		{
			name: "locker quorum 3", server: "redis", kind: kindLocker, clients: 4,
			desc: "locker.Mutex over quorumdriver with 3 redisdriver members (3 redis-servers on this host, the bench's and two more), TTL 10s; each client has its own go-redis client per member",
			open: openLockerQuorum,
		},
		{
			name: "redsync 3 pools", server: "redis", kind: kindPeer, clients: 4,
			desc: "go-redsync/redsync v4 over the same 3 redis-servers (one pool each: Redlock), WithRetryDelay(10ms), WithTries(1000), expiry 10s",
			open: openRedsyncQuorum,
		},
		{
			name: "raw quorum 3", server: "redis", kind: kindRaw, clients: 4,
			desc: "the floor of a fenced quorum pair, no locking logic in the client: SET key token NX PX 10000 on the 3 servers in parallel, then one EVALSHA on one of them (a stand-in for the token write-back: GET the key, SET a fence key), then EVALSHA compare-and-delete on the 3 in parallel; parallel requests in goroutines, as quorumdriver and redsync make them; an attempt with fewer than 2 grants releases them and retries at once",
			open: func(e *env, n int) (*instance, error) { return openRawQuorum(e, n, true) },
		},
		{
			name: "raw quorum 3 no write-back", server: "redis", kind: kindRaw, clients: 4,
			desc: "raw quorum 3 without the write-back: two waits per pair, as Redlock without fencing tokens needs",
			open: func(e *env, n int) (*instance, error) { return openRawQuorum(e, n, false) },
		},
	}
}

// rawFloor stands in for quorumdriver's token write-back: one script on
// one member that checks the hold and writes a fence key.
var rawFloor = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then redis.call("SET", KEYS[1] .. ":fence", ARGV[1], "PX", 10000) return 1 end return 0`)

// rawQuorumHandle is the raw quorum lock of one goroutine: its clients,
// one per member.
type rawQuorumHandle struct {
	cs        []*redis.Client
	key       string
	token     string
	writeBack bool
	errs      []error
}

// fan runs f on every member, in parallel (the last in the calling
// goroutine), and returns how many succeeded.
func (h *rawQuorumHandle) fan(f func(c *redis.Client) error) int {
	var wg sync.WaitGroup
	last := len(h.cs) - 1
	for i, c := range h.cs[:last] {
		wg.Go(func() { h.errs[i] = f(c) })
	}
	h.errs[last] = f(h.cs[last])
	wg.Wait()
	ok := 0
	for _, err := range h.errs {
		if err == nil {
			ok++
		}
	}
	return ok
}

var errRawRefused = errors.New("refused")

func (h *rawQuorumHandle) Lock(ctx context.Context) error {
	h.token = strconv.FormatUint(rawSeq.Add(1), 36)
	for {
		ok := h.fan(func(c *redis.Client) error {
			set, err := c.SetNX(ctx, h.key, h.token, peerTTL).Result()
			if err == nil && !set {
				err = errRawRefused
			}
			return err
		})
		if ok >= len(h.cs)/2+1 {
			if !h.writeBack {
				return nil
			}
			return rawFloor.Run(ctx, h.cs[0], []string{h.key}, h.token).Err()
		}
		if err := h.Unlock(ctx); err != nil {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

func (h *rawQuorumHandle) Unlock(ctx context.Context) error {
	if h.fan(func(c *redis.Client) error { return rawRelease.Run(ctx, c, []string{h.key}, h.token).Err() }) < len(h.cs) {
		return errors.Join(h.errs...)
	}
	return nil
}

func openRawQuorum(e *env, n int, writeBack bool) (*instance, error) {
	addrs, stopServers, err := quorumServers(e)
	if err != nil {
		return nil, err
	}
	cs, closeClients := quorumClients(e, n, addrs)
	return &instance{
		newLock: func(i int, key string) (lockHandle, error) {
			return &rawQuorumHandle{cs: cs[i], key: key, writeBack: writeBack, errs: make([]error, len(cs[i]))}, nil
		},
		close: func() { closeClients(); stopServers() },
	}, nil
}

// quorumServers starts the members that the bench's redis-server lacks and
// returns the members' addresses and a function that stops what it
// started.
func quorumServers(e *env) ([]string, func(), error) {
	addrs := []string{e.redis.addr}
	var started []*server
	stop := func() {
		for _, s := range started {
			s.stop()
		}
	}
	for len(addrs) < quorumMembers {
		s, err := startRedis()
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("quorum member: %w", err)
		}
		started = append(started, s)
		addrs = append(addrs, s.addr)
	}
	return addrs, stop, nil
}

// quorumClients makes, for each of n clients, one go-redis client per
// member, whose connections are counted.
func quorumClients(e *env, n int, addrs []string) ([][]*redis.Client, func()) {
	cs := make([][]*redis.Client, n)
	for i := range cs {
		for _, a := range addrs {
			cs[i] = append(cs[i], redis.NewClient(&redis.Options{
				Addr:                  a,
				ContextTimeoutEnabled: true,
				MaxRetries:            -1,
				Dialer:                e.trips["redis"].DialContext,
			}))
		}
	}
	return cs, func() {
		for _, c := range cs {
			closeRedis(c)
		}
	}
}

func openLockerQuorum(e *env, n int) (*instance, error) {
	addrs, stopServers, err := quorumServers(e)
	if err != nil {
		return nil, err
	}
	cs, closeClients := quorumClients(e, n, addrs)
	closeAll := func() { closeClients(); stopServers() }
	ds := make([]driver.Driver, n)
	for i := range cs {
		members := make([]driver.Driver, len(cs[i]))
		for j, c := range cs[i] {
			if members[j], err = redisdriver.New(c, nil); err != nil {
				closeAll()
				return nil, err
			}
		}
		if ds[i], err = quorumdriver.New(members, nil); err != nil {
			closeAll()
			return nil, err
		}
	}
	clients := lockerClients(ds)
	return &instance{
		newLock: func(i int, key string) (lockHandle, error) {
			return lockerHandle{clients[i].Mutex(key)}, nil
		},
		close: closeAll,
	}, nil
}

func openRedsyncQuorum(e *env, n int) (*instance, error) {
	addrs, stopServers, err := quorumServers(e)
	if err != nil {
		return nil, err
	}
	cs, closeClients := quorumClients(e, n, addrs)
	rs := make([]*redsync.Redsync, n)
	for i := range cs {
		pools := make([]redsyncredis.Pool, len(cs[i]))
		for j, c := range cs[i] {
			pools[j] = goredis.NewPool(c)
		}
		rs[i] = redsync.New(pools...)
	}
	if len(rs) == 0 {
		closeClients()
		stopServers()
		return nil, errors.New("redsync 3 pools: no clients")
	}
	return &instance{
		newLock: func(i int, key string) (lockHandle, error) {
			return redsyncHandle{rs[i].NewMutex(key, redsync.WithRetryDelay(10*time.Millisecond), redsync.WithTries(1000), redsync.WithExpiry(peerTTL))}, nil
		},
		close: func() { closeClients(); stopServers() },
	}, nil
}

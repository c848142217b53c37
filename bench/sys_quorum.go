package main

import (
	"errors"
	"fmt"
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
	}
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
				Dialer:                e.trips["redis"].dialContext,
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

package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/redisdriver"
	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
)

// peerTTL is the lease of every system in the timed cells: long enough
// that no renewal or expiry happens during a cell.
const peerTTL = 10 * time.Second

func redisSystems() []*system {
	return []*system{
		{
			name: "locker", server: "redis", kind: kindLocker, clients: 4, perContender: true,
			desc: "locker.Mutex over redisdriver, TTL 10s; contended cells: 4 drivers (one go-redis client each, like 4 processes), goroutine i on driver i%4; and with one driver per goroutine (clients = N)",
			open: openLockerRedis,
		},
		{
			name: "locker default client", server: "redis", kind: kindLocker, clients: 4,
			desc: "as locker, but each go-redis client made with default options (redis.NewClient(&redis.Options{Addr: addr}), no ContextTimeoutEnabled), as most services make theirs",
			open: openLockerRedisDefault,
		},
		{
			name: "locker 1 driver", server: "redis", kind: kindLocker, clients: 1, contendedOnly: true,
			desc: "as locker, but all goroutines on one driver (one process): waiters line up in-process and only the head talks to Redis",
			open: openLockerRedis,
		},
		{
			name: "locker NewMutex 1 driver", server: "redis", kind: kindLocker, clients: 1, contendedOnly: true,
			desc: "as locker 1 driver, but each goroutine's handle made with locker.NewMutex(drv, key) rather than from one Client: the handles lock through the driver's default Client",
			open: openLockerRedisNew,
		},
		{
			name: "redsync", server: "redis", kind: kindPeer, clients: 4, perContender: true,
			desc: "go-redsync/redsync v4 NewMutex defaults (expiry 8s, 32 tries, retry delay rand 50-250ms); Lock = SET NX PX, Unlock = EVALSHA compare-and-delete",
			open: func(e *env, n int) (*instance, error) { return openRedsync(e, n) },
		},
		{
			name: "redsync 10ms", server: "redis", kind: kindPeer, clients: 4, perContender: true,
			desc: "redsync with WithRetryDelay(10ms), WithTries(1000), expiry 10s",
			open: func(e *env, n int) (*instance, error) {
				return openRedsync(e, n, redsync.WithRetryDelay(10*time.Millisecond), redsync.WithTries(1000), redsync.WithExpiry(peerTTL))
			},
		},
		{
			name: "redislock linear 10ms", server: "redis", kind: kindPeer, clients: 4, perContender: true,
			desc: "bsm/redislock v0.9.4 Obtain(ttl 10s, LinearBackoff(10ms)) + Release; Obtain and Release are one EVALSHA each",
			open: func(e *env, n int) (*instance, error) {
				return openRedislock(e, n, func() redislock.RetryStrategy { return redislock.LinearBackoff(10 * time.Millisecond) })
			},
		},
		{
			name: "redislock exp 16-256ms", server: "redis", kind: kindPeer, clients: 4, perContender: true,
			desc: "redislock Obtain(ttl 10s, ExponentialBackoff(16ms, 256ms)), a fresh strategy per Obtain (it is stateful)",
			open: func(e *env, n int) (*instance, error) {
				return openRedislock(e, n, func() redislock.RetryStrategy {
					return redislock.ExponentialBackoff(16*time.Millisecond, 256*time.Millisecond)
				})
			},
		},
		{
			name: "floor (reference)", server: "redis", kind: kindRaw, clients: 4, perContender: true,
			desc: "REFERENCE, not a peer: locker's token guarantee and nothing else, raw go-redis; acquire = one EVALSHA (TIME, GET fence, SET NX PX: token = server clock in µs, or the kept last token + 1), release = one EVALSHA (GET owner check, TIME, SET fence PXAT only when the clock has not passed the token, DEL); no watchdog, no loss watch, no queue, no front-end; waiters spin",
			open: func(e *env, n int) (*instance, error) { return openFloorRedis(e, n, floorRelease) },
		},
		{
			name: "redisdriver alone (reference)", server: "redis", kind: kindRaw, clients: 4, perContender: true,
			desc: "REFERENCE, not a peer: locker's redisdriver called directly, no front-end (no watchdog, loss watch, gate, Observer or hedged release): TryAcquire until granted, then Release; owners from a counter; the same scripts and round trips as locker",
			open: openDriverRedis,
		},
		{
			name: "floor SET release (reference)", server: "redis", kind: kindRaw, clients: 4, perContender: true,
			desc: "REFERENCE, not a peer: as floor (reference), but the release has no TIME: GET owner check, SET fence PXAT token's ms + 1 always (Redis deletes it at once when that moment has passed), DEL",
			open: func(e *env, n int) (*instance, error) { return openFloorRedis(e, n, floorReleaseSet) },
		},
		{
			name: "raw", server: "redis", kind: kindRaw, clients: 4, perContender: true,
			desc: "SET key token NX PX 10000 + EVALSHA compare-and-delete: the fewest round trips a lock can take; waiters retry SET NX at once (spin)",
			open: openRawRedis,
		},
	}
}

// redisClients makes n go-redis clients whose connections are counted.
func redisClients(e *env, n int) []*redis.Client {
	cs := make([]*redis.Client, n)
	for i := range cs {
		cs[i] = redis.NewClient(&redis.Options{
			Addr:                  e.redis.addr,
			ContextTimeoutEnabled: true,
			Dialer:                e.trips["redis"].DialContext,
		})
	}
	return cs
}

// redisClientsDefault makes n go-redis clients with default options (no
// ContextTimeoutEnabled) whose connections are counted.
func redisClientsDefault(e *env, n int) []*redis.Client {
	cs := make([]*redis.Client, n)
	for i := range cs {
		cs[i] = redis.NewClient(&redis.Options{Addr: e.redis.addr, Dialer: e.trips["redis"].DialContext})
	}
	return cs
}

func closeRedis(cs []*redis.Client) {
	for _, c := range cs {
		_ = c.Close()
	}
}

// lockerHandle adapts a locker.Mutex.
type lockerHandle struct{ m *locker.Mutex }

func (h lockerHandle) Lock(ctx context.Context) error   { return h.m.LockContext(ctx) }
func (h lockerHandle) Unlock(ctx context.Context) error { return h.m.UnlockContext(ctx) }

// lockerOpts are the options of every locker handle in the timed cells.
var lockerOpts = []locker.Option{locker.WithTTL(peerTTL), locker.WithErrorHandler(func(error) {})}

// lockerInstance makes the handles of drivers ds: from one Client per
// driver, or, with viaNew, with locker.NewMutex over the driver.
func lockerInstance[D driver.Driver](ds []D, viaNew bool, close func()) *instance {
	if viaNew {
		return &instance{
			newLock: func(i int, key string) (lockHandle, error) {
				return lockerHandle{locker.NewMutex(ds[i], key, lockerOpts...)}, nil
			},
			close: close,
		}
	}
	clients := lockerClients(ds)
	return &instance{
		newLock: func(i int, key string) (lockHandle, error) {
			return lockerHandle{clients[i].Mutex(key)}, nil
		},
		close: close,
	}
}

// lockerClients makes one locker.Client per driver, as one per process:
// the handles of a driver share its in-process line and watchdog.
func lockerClients[D driver.Driver](ds []D) []*locker.Client {
	cs := make([]*locker.Client, len(ds))
	for i, d := range ds {
		cs[i] = locker.New(d, lockerOpts...)
	}
	return cs
}

func openLockerRedis(e *env, n int) (*instance, error) { return openLockerRedisAs(e, n, false) }

func openLockerRedisNew(e *env, n int) (*instance, error) { return openLockerRedisAs(e, n, true) }

func openLockerRedisDefault(e *env, n int) (*instance, error) {
	cs, ds, err := redisDriversOver(redisClientsDefault(e, n))
	if err != nil {
		return nil, err
	}
	return lockerInstance(ds, false, func() { closeRedis(cs) }), nil
}

func openLockerRedisAs(e *env, n int, viaNew bool) (*instance, error) {
	cs, ds, err := redisDrivers(e, n)
	if err != nil {
		return nil, err
	}
	return lockerInstance(ds, viaNew, func() { closeRedis(cs) }), nil
}

// redisDrivers makes n go-redis clients and a redisdriver over each.
func redisDrivers(e *env, n int) ([]*redis.Client, []*redisdriver.Driver, error) {
	return redisDriversOver(redisClients(e, n))
}

// redisDriversOver makes a redisdriver over each of cs.
func redisDriversOver(cs []*redis.Client) ([]*redis.Client, []*redisdriver.Driver, error) {
	ds := make([]*redisdriver.Driver, len(cs))
	for i, c := range cs {
		d, err := redisdriver.New(c, nil)
		if err != nil {
			closeRedis(cs)
			return nil, nil, err
		}
		ds[i] = d
	}
	return cs, ds, nil
}

type redsyncHandle struct{ m *redsync.Mutex }

func (h redsyncHandle) Lock(ctx context.Context) error { return h.m.LockContext(ctx) }
func (h redsyncHandle) Unlock(ctx context.Context) error {
	ok, err := h.m.UnlockContext(ctx)
	if err == nil && !ok {
		err = errors.New("redsync: unlock failed")
	}
	return err
}

func openRedsync(e *env, n int, opts ...redsync.Option) (*instance, error) {
	cs := redisClients(e, n)
	rs := make([]*redsync.Redsync, n)
	for i, c := range cs {
		rs[i] = redsync.New(goredis.NewPool(c))
	}
	return &instance{
		newLock: func(i int, key string) (lockHandle, error) {
			return redsyncHandle{rs[i].NewMutex(key, opts...)}, nil
		},
		close: func() { closeRedis(cs) },
	}, nil
}

type redislockHandle struct {
	c     *redislock.Client
	key   string
	retry func() redislock.RetryStrategy
	l     *redislock.Lock
}

func (h *redislockHandle) Lock(ctx context.Context) error {
	l, err := h.c.Obtain(ctx, h.key, peerTTL, &redislock.Options{RetryStrategy: h.retry()})
	h.l = l
	return err
}

func (h *redislockHandle) Unlock(ctx context.Context) error { return h.l.Release(ctx) }

func openRedislock(e *env, n int, retry func() redislock.RetryStrategy) (*instance, error) {
	cs := redisClients(e, n)
	ls := make([]*redislock.Client, n)
	for i, c := range cs {
		ls[i] = redislock.New(c)
	}
	return &instance{
		newLock: func(i int, key string) (lockHandle, error) {
			return &redislockHandle{c: ls[i], key: key, retry: retry}, nil
		},
		close: func() { closeRedis(cs) },
	}, nil
}

// rawRelease deletes the key if it still holds the caller's token.
var rawRelease = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

var rawSeq atomic.Uint64

type rawRedisHandle struct {
	c     *redis.Client
	key   string
	token string
}

func (h *rawRedisHandle) Lock(ctx context.Context) error {
	h.token = strconv.FormatUint(rawSeq.Add(1), 36)
	for {
		ok, err := h.c.SetNX(ctx, h.key, h.token, peerTTL).Result()
		if err != nil || ok {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

func (h *rawRedisHandle) Unlock(ctx context.Context) error {
	return rawRelease.Run(ctx, h.c, []string{h.key}, h.token).Err()
}

func openRawRedis(e *env, n int) (*instance, error) {
	cs := redisClients(e, n)
	return &instance{
		newLock: func(i int, key string) (lockHandle, error) {
			return &rawRedisHandle{c: cs[i], key: key}, nil
		},
		close: func() { closeRedis(cs) },
	}, nil
}

// The floor contender (a reference, not a peer): the least a Redis lock
// needs for locker's documented token guarantee, with nothing else. The
// acquire grants a fencing token that survives a restart that lost the data
// set and a clock stepped back while the last token is kept: the server's
// clock in µs (TIME), or the kept last token + 1 when the clock has not
// passed it. The release checks ownership, deletes, and keeps its token in
// the fence key (until the clock passes it) when the clock has not passed
// it, as locker's release_fast.lua does. No watchdog, no loss watch, no
// queue, no front-end; waiters retry at once (spin), as raw does.
var floorAcquire = redis.NewScript(`local t = redis.call('TIME')
local tok = tonumber(t[1]) * 1000000 + tonumber(t[2])
local f = tonumber(redis.call('GET', KEYS[2]) or '0')
if f >= tok then tok = f + 1 end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return tok end
return -1`)

var floorRelease = redis.NewScript(`if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
local tok = tonumber(ARGV[2])
local t = redis.call('TIME')
if tok >= tonumber(t[1]) * 1000000 + tonumber(t[2]) then
	redis.call('SET', KEYS[2], ARGV[2], 'PXAT', string.format('%d', math.floor(tok / 1000) + 1))
end
redis.call('DEL', KEYS[1])
return 1`)

// floorReleaseSet is floorRelease without its TIME: it always sets the
// fence key with PXAT at the token's millisecond + 1, which Redis (≥ 6.2,
// PXAT) turns into a delete when that moment has passed, so the token is
// kept exactly while the clock has not passed its millisecond, at the price
// of a write per release instead of a clock read.
var floorReleaseSet = redis.NewScript(`if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[2], ARGV[2], 'PXAT', string.format('%d', math.floor(tonumber(ARGV[2]) / 1000) + 1))
redis.call('DEL', KEYS[1])
return 1`)

// floorPrefix makes owners unique across processes; the counter, within one.
var floorPrefix = func() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:]) + ":"
}()

type floorRedisHandle struct {
	c       *redis.Client
	release *redis.Script
	keys    []string // lock, fence
	owner   string
	token   int64
}

var floorTTL = strconv.FormatInt(peerTTL.Milliseconds(), 10)

func (h *floorRedisHandle) Lock(ctx context.Context) error {
	h.owner = floorPrefix + strconv.FormatUint(rawSeq.Add(1), 36)
	for {
		tok, err := floorAcquire.Run(ctx, h.c, h.keys, h.owner, floorTTL).Int64()
		if err != nil {
			return err
		}
		if tok > 0 {
			h.token = tok
			return nil
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

func (h *floorRedisHandle) Unlock(ctx context.Context) error {
	n, err := h.release.Run(ctx, h.c, h.keys, h.owner, h.token).Int64()
	if err == nil && n != 1 {
		err = errors.New("floor: not held")
	}
	return err
}

func openFloorRedis(e *env, n int, release *redis.Script) (*instance, error) {
	cs := redisClients(e, n)
	return &instance{
		newLock: func(i int, key string) (lockHandle, error) {
			return &floorRedisHandle{c: cs[i], release: release, keys: []string{key + ":lock", key + ":fence"}}, nil
		},
		close: func() { closeRedis(cs) },
	}, nil
}

// driverRedisHandle calls redisdriver directly: what locker's pair costs
// without its front-end.
type driverRedisHandle struct {
	d     *redisdriver.Driver
	key   string
	lease driver.Lease
}

func (h *driverRedisHandle) Lock(ctx context.Context) error {
	req := driver.Request{Key: h.key, Owner: floorPrefix + strconv.FormatUint(rawSeq.Add(1), 36), Mode: driver.Exclusive, TTL: peerTTL}
	for {
		l, err := h.d.TryAcquire(ctx, req)
		if err == nil {
			h.lease = l
			return nil
		}
		if !errors.Is(err, driver.ErrLocked) {
			return err
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

func (h *driverRedisHandle) Unlock(ctx context.Context) error { return h.d.Release(ctx, h.lease) }

func openDriverRedis(e *env, n int) (*instance, error) {
	cs, ds, err := redisDrivers(e, n)
	if err != nil {
		return nil, err
	}
	return &instance{
		newLock: func(i int, key string) (lockHandle, error) {
			return &driverRedisHandle{d: ds[i], key: key}, nil
		},
		close: func() { closeRedis(cs) },
	}, nil
}

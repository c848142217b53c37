package redisdriver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/redis/go-redis/v9"
)

// TryAcquire implements driver.Driver in one round trip.
func (d *Driver) TryAcquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	return d.acquire(ctx, req, false)
}

// TryAcquireQueued implements driver.Queuer in one round trip.
func (d *Driver) TryAcquireQueued(ctx context.Context, req driver.Request) (driver.Lease, error) {
	return d.acquire(ctx, req, true)
}

func (d *Driver) acquire(ctx context.Context, req driver.Request, queued bool) (driver.Lease, error) {
	const op = "acquire"
	if err := ctx.Err(); err != nil {
		return driver.Lease{}, opError(op, req.Key, err)
	}
	mode, ms, err := checkArgs(req.Mode, req.TTL)
	if err != nil {
		return driver.Lease{}, opError(op, req.Key, err)
	}
	q := "0"
	if queued {
		q = "1"
	}
	res, err := acquireScript.Run(ctx, d.client, d.keys(req.Key),
		req.Owner, mode, ms, q, d.channel(req.Key)).Slice()
	if err != nil {
		return driver.Lease{}, opError(op, req.Key, err)
	}
	granted, tok, remaining, err := parseReply(res)
	if err != nil {
		return driver.Lease{}, opError(op, req.Key, err)
	}
	if !granted {
		return driver.Lease{}, opError(op, req.Key,
			&driver.LockedError{Remaining: time.Duration(remaining) * time.Millisecond})
	}
	return driver.Lease{
		Key:   req.Key,
		Owner: req.Owner,
		Mode:  req.Mode,
		Token: tok,
		TTL:   time.Duration(ms) * time.Millisecond,
	}, nil
}

// Refresh implements driver.Driver in one round trip. When l.Token is not
// 0 it must be the token of the hold, or Refresh reports ErrNotHeld.
func (d *Driver) Refresh(ctx context.Context, l driver.Lease) (driver.Lease, error) {
	const op = "refresh"
	if err := ctx.Err(); err != nil {
		return driver.Lease{}, opError(op, l.Key, err)
	}
	keys, args, ms, err := d.refreshArgs(l)
	if err != nil {
		return driver.Lease{}, opError(op, l.Key, err)
	}
	return d.refreshResult(l, ms, refreshScript.Run(ctx, d.client, keys, args...))
}

func (d *Driver) refreshArgs(l driver.Lease) (keys []string, args []any, ms int64, err error) {
	mode, ms, err := checkArgs(l.Mode, l.TTL)
	if err != nil {
		return nil, nil, 0, err
	}
	return d.keys(l.Key), []any{l.Owner, mode, ms, strconv.FormatUint(l.Token, 10)}, ms, nil
}

func (d *Driver) refreshResult(l driver.Lease, ms int64, cmd *redis.Cmd) (driver.Lease, error) {
	const op = "refresh"
	res, err := cmd.Slice()
	if err != nil {
		return driver.Lease{}, opError(op, l.Key, err)
	}
	held, tok, _, err := parseReply(res)
	if err != nil {
		return driver.Lease{}, opError(op, l.Key, err)
	}
	if !held {
		return driver.Lease{}, opError(op, l.Key, driver.ErrNotHeld)
	}
	l.Token = tok
	l.TTL = time.Duration(ms) * time.Millisecond
	return l, nil
}

// Release implements driver.Driver in one round trip. When l.Token is not
// 0 it must be the token of the hold, or Release reports ErrNotHeld and
// releases nothing; with l.Token 0 it releases l.Owner's hold whatever its
// token. Either way it removes l.Owner's wait-queue entry.
func (d *Driver) Release(ctx context.Context, l driver.Lease) error {
	const op = "release"
	if err := ctx.Err(); err != nil {
		return opError(op, l.Key, err)
	}
	mode, err := modeArg(l.Mode)
	if err != nil {
		return opError(op, l.Key, err)
	}
	n, err := releaseScript.Run(ctx, d.client, d.keys(l.Key),
		l.Owner, mode, strconv.FormatUint(l.Token, 10), d.channel(l.Key)).Int64()
	if err != nil {
		return opError(op, l.Key, err)
	}
	switch n {
	case 1:
		return nil
	case 0:
		return opError(op, l.Key, driver.ErrNotHeld)
	}
	return opError(op, l.Key, driver.Permanent(fmt.Errorf("unexpected script reply %d", n)))
}

// modeArg encodes m for the scripts.
func modeArg(m driver.Mode) (string, error) {
	switch m {
	case driver.Exclusive:
		return "x", nil
	case driver.Shared:
		return "s", nil
	}
	return "", driver.Permanent(fmt.Errorf("unknown mode %v", m))
}

// checkArgs encodes m and checks ttl, truncating it to milliseconds.
func checkArgs(m driver.Mode, ttl time.Duration) (mode string, ms int64, err error) {
	mode, err = modeArg(m)
	if err != nil {
		return "", 0, err
	}
	if ttl < MinTTL || ttl > MaxTTL {
		return "", 0, driver.Permanent(fmt.Errorf("TTL %v outside [%v, %v]", ttl, MinTTL, MaxTTL))
	}
	return mode, ttl.Milliseconds(), nil
}

// parseReply decodes {1, token} or {0, remaining} or {0}.
func parseReply(res []any) (ok bool, tok uint64, remaining int64, err error) {
	if len(res) == 0 {
		return false, 0, 0, errBadReply(res)
	}
	status, _ := res[0].(int64)
	switch {
	case status == 1 && len(res) == 2:
		s, _ := res[1].(string)
		tok, err := strconv.ParseUint(s, 10, 64)
		if err != nil || tok == 0 {
			return false, 0, 0, errBadReply(res)
		}
		return true, tok, 0, nil
	case status == 0 && len(res) == 1:
		return false, 0, 0, nil
	case status == 0 && len(res) == 2:
		remaining, ok := res[1].(int64)
		if !ok {
			return false, 0, 0, errBadReply(res)
		}
		return false, 0, max(remaining, 0), nil
	}
	return false, 0, 0, errBadReply(res)
}

func errBadReply(res []any) error {
	return driver.Permanent(fmt.Errorf("unexpected script reply %v", res))
}

// opError wraps err with the operation and key, and marks it Permanent
// when no retry can cure it.
func opError(op, key string, err error) error {
	e := fmt.Errorf("redisdriver: %s %q: %w", op, key, err)
	if !driver.IsPermanent(err) && isPermanent(err) {
		return driver.Permanent(e)
	}
	return e
}

// permanentPrefixes start the Redis error replies that a retry of the same
// request cannot cure: the data has the wrong type, the server lacks a
// command or refuses it, or the script itself failed.
var permanentPrefixes = []string{
	"WRONGTYPE",
	"NOSCRIPT",
	"NOPERM",
	"NOAUTH",
	"WRONGPASS",
	"CROSSSLOT",
	"ERR unknown command",
	"ERR unknown subcommand",
	"ERR wrong number of arguments",
	"ERR syntax error",
	"ERR value is not an integer",
	"ERR increment or decrement would overflow",
	"ERR Error running script",
	"ERR Error compiling script",
	"ERR user_script",
	"ERR This Redis command is not allowed from script",
	"ERR Unknown Redis command",
}

// isPermanent reports whether err is a Redis error reply that no retry can
// cure.
func isPermanent(err error) bool {
	var rerr redis.Error
	if !errors.As(err, &rerr) {
		return false
	}
	msg := rerr.Error()
	for _, p := range permanentPrefixes {
		if len(msg) >= len(p) && msg[:len(p)] == p {
			return true
		}
	}
	return false
}

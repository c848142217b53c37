package redisdriver

import (
	"cmp"
	"context"
	"slices"
	"time"

	"github.com/go-locker/locker/driver"
)

// The scripts of Inspector, after the prelude of common.lua.
var (
	inspectScript      = newScript("", inspectLua)
	forceReleaseScript = newScript("", forceReleaseLua)
)

// inspectLua reads a lock's state. Reply: mode ('x', 's' or ”), the fence
// counter, the number of live queue entries, then owner, token and
// remaining milliseconds of each live hold, the exclusive one first and
// the shared ones by expiry.
const inspectLua = `
local now = now_ms()
purge_readers(now)
local out = {'', tonumber(redis.call('GET', FENCE) or '0') or 0, redis.call('ZCOUNT', QEXP, '(' .. int(now), '+inf')}
local v = redis.call('GET', LOCK)
if v then
	local tok, o = parse_hold(v)
	if o then
		out[1] = 'x'
		table.insert(out, o)
		table.insert(out, tonumber(tok) or 0)
		table.insert(out, redis.call('PTTL', LOCK))
	end
end
local rs = redis.call('ZRANGE', READERS, 0, -1, 'WITHSCORES')
if #rs > 0 and out[1] == '' then
	out[1] = 's'
end
for i = 1, #rs, 2 do
	table.insert(out, rs[i])
	table.insert(out, tonumber(redis.call('HGET', TOKENS, rs[i]) or '0') or 0)
	table.insert(out, tonumber(rs[i + 1]) - now)
end
return out
`

// forceReleaseLua deletes every hold of a lock, then, as a release does,
// hands the key over to the head of the wait queue, if any, and wakes the
// subscribers. Reply: the number of holds deleted.
const forceReleaseLua = `
local now = now_ms()
purge_readers(now)
local n = redis.call('DEL', LOCK) + redis.call('ZCARD', READERS)
redis.call('DEL', READERS, TOKENS)
if n > 0 then
	if redis.call('EXISTS', QUEUE) == 1 then
		handoff(now)
	end
	redis.call('PUBLISH', CHAN, 'r')
end
return n
`

// Inspect implements driver.Inspector in one round trip. It reads the
// exclusive hold, the shared holds (dropping the expired ones, as every
// operation does), the fence counter, and the live entries of the wait
// queue. Remaining times are the server's.
func (d *Driver) Inspect(ctx context.Context, key string) (driver.KeyState, error) {
	const op = "inspect"
	if err := ctx.Err(); err != nil {
		return driver.KeyState{}, opError(op, key, err)
	}
	res, err := d.run(ctx, inspectScript, inspectScript.args(d.base(key)))
	if err != nil {
		return driver.KeyState{}, opError(op, key, err)
	}
	st, ok := parseInspect(res)
	if !ok {
		return driver.KeyState{}, opError(op, key, errBadReply(res))
	}
	return st, nil
}

func parseInspect(res any) (driver.KeyState, bool) {
	var st driver.KeyState
	a, ok := res.([]any)
	if !ok || len(a) < 3 || (len(a)-3)%3 != 0 {
		return st, false
	}
	mode, ok1 := a[0].(string)
	fence, ok2 := a[1].(int64)
	waiting, ok3 := a[2].(int64)
	if !ok1 || !ok2 || !ok3 || fence < 0 {
		return st, false
	}
	if mode == "s" {
		st.Mode = driver.Shared
	}
	st.Fence, st.Waiting = uint64(fence), int(waiting)
	for i := 3; i < len(a); i += 3 {
		owner, ok1 := a[i].(string)
		tok, ok2 := a[i+1].(int64)
		ms, ok3 := a[i+2].(int64)
		if !ok1 || !ok2 || !ok3 || tok < 0 {
			return st, false
		}
		st.Holders = append(st.Holders, driver.Holder{Owner: owner, Token: uint64(tok), Remaining: time.Duration(max(ms, 0)) * time.Millisecond})
	}
	slices.SortFunc(st.Holders, func(a, b driver.Holder) int { return cmp.Compare(a.Token, b.Token) })
	return st, true
}

// ForceRelease implements driver.Inspector in one round trip: it deletes
// the exclusive hold and every shared hold of key, hands the key over to
// the head of its wait queue as a release would, and wakes the key's
// subscribers.
func (d *Driver) ForceRelease(ctx context.Context, key string) (int, error) {
	const op = "force-release"
	if err := ctx.Err(); err != nil {
		return 0, opError(op, key, err)
	}
	res, err := d.run(ctx, forceReleaseScript, forceReleaseScript.args(d.base(key)))
	if err != nil {
		return 0, opError(op, key, err)
	}
	n, ok := res.(int64)
	if !ok {
		return 0, opError(op, key, errBadReply(res))
	}
	return int(n), nil
}

var _ driver.Inspector = (*Driver)(nil)

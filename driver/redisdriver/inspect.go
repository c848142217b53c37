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
// counter, the number of live queue entries, the limit of the counted
// holds (0 if none), then owner, token, remaining milliseconds, weight and
// value of each live hold, the exclusive one first and the shared ones by
// expiry.
const inspectLua = `
local now = now_ms()
purge_readers(now)
local out = {'', tonumber(redis.call('GET', FENCE) or '0') or 0, redis.call('ZCOUNT', QEXP, '(' .. int(now), '+inf'), 0}
local v = redis.call('GET', LOCK)
if v then
	local tok, o, _, data = parse_hold(v)
	if o then
		out[1] = 'x'
		table.insert(out, o)
		table.insert(out, tonumber(tok) or 0)
		table.insert(out, redis.call('PTTL', LOCK))
		table.insert(out, 0)
		table.insert(out, data_value(data))
	end
end
local rs = redis.call('ZRANGE', READERS, 0, -1, 'WITHSCORES')
if #rs > 0 and out[1] == '' then
	out[1] = 's'
end
for i = 1, #rs, 2 do
	local tok, data = split_token(redis.call('HGET', TOKENS, rs[i]) or '0')
	local w, l = data_counts(data)
	if l > 0 then
		out[4] = l
	end
	table.insert(out, rs[i])
	table.insert(out, tonumber(tok) or 0)
	table.insert(out, tonumber(rs[i + 1]) - now)
	table.insert(out, w)
	table.insert(out, data_value(data))
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
// operation does) with their weights, values and limit, the fence
// counter, and the live entries of the wait queue. Remaining times are
// the server's. Fence is the larger of the fence counter and the holders'
// tokens: the counter (FENCE) keeps a token only until the server's clock
// in microseconds has passed it, so it is 0 for a free key whose last
// token is older than a millisecond.
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
	const head, per = 4, 5
	var st driver.KeyState
	a, ok := res.([]any)
	if !ok || len(a) < head || (len(a)-head)%per != 0 {
		return st, false
	}
	mode, ok1 := a[0].(string)
	fence, ok2 := a[1].(int64)
	waiting, ok3 := a[2].(int64)
	limit, ok4 := a[3].(int64)
	if !ok1 || !ok2 || !ok3 || !ok4 || fence < 0 || limit < 0 {
		return st, false
	}
	if mode == "s" {
		st.Mode = driver.Shared
	}
	st.Fence, st.Waiting, st.Limit = uint64(fence), int(waiting), limit
	for i := head; i < len(a); i += per {
		owner, ok1 := a[i].(string)
		tok, ok2 := a[i+1].(int64)
		ms, ok3 := a[i+2].(int64)
		weight, ok4 := a[i+3].(int64)
		value, ok5 := a[i+4].(string)
		if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || tok < 0 || weight < 0 {
			return st, false
		}
		st.Holders = append(st.Holders, driver.Holder{Owner: owner, Token: uint64(tok),
			Remaining: time.Duration(max(ms, 0)) * time.Millisecond, Weight: weight, Value: value})
		// FENCE keeps a token only until the server's clock passes it:
		// a live holder's token is then the highest known.
		st.Fence = max(st.Fence, uint64(tok))
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

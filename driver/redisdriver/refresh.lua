-- refresh: Refresh and RefreshBatch.
-- ARGV: 1 owner, 2 mode ('x' or 's'), 3 ttl ms, 4 token (the hold's; Refresh has no any-token form).
-- Reply: token (> 0) extended; -1 not held (nothing changed).

local owner, shared, ttl_ms, want = ARGV[1], ARGV[2] == 's', ARGV[3], ARGV[4]

if not shared then
	local v = redis.call('GET', LOCK)
	if not v then
		return -1
	end
	local tok, o = parse_hold(v)
	if o ~= owner or tok ~= want then
		return -1
	end
	redis.call('PEXPIRE', LOCK, ttl_ms)
	return token_reply(tok)
end

-- Only a reader has a shared hold to extend: the clock and the purge are
-- for them.
if not redis.call('ZSCORE', READERS, owner) then
	return -1
end
local now = now_ms()
purge_readers(now)
local t = redis.call('HGET', TOKENS, owner)
local tok = split_token(t or '')
if not t or not redis.call('ZSCORE', READERS, owner) or tok ~= want then
	return -1
end
redis.call('ZADD', READERS, int(now + tonumber(ttl_ms)), owner)
settle_readers(now)
return token_reply(tok)

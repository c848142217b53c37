-- refresh: Refresh and RefreshBatch.
-- ARGV: 1 owner, 2 mode ('x' or 's'), 3 ttl ms, 4 token ('0': any).
-- Reply: {1, token} extended; {0} not held (nothing changed).

local owner, shared, ttl, want = ARGV[1], ARGV[2] == 's', tonumber(ARGV[3]), ARGV[4]

if not shared then
	local v = redis.call('GET', LOCK)
	if not v then
		return {0}
	end
	local tok, o = parse_hold(v)
	if o ~= owner or (want ~= '0' and tok ~= want) then
		return {0}
	end
	redis.call('PEXPIRE', LOCK, int(ttl))
	return {1, tok}
end

local now = now_ms()
purge_readers(now)
local tok = redis.call('HGET', TOKENS, owner)
if not tok or not redis.call('ZSCORE', READERS, owner) or (want ~= '0' and tok ~= want) then
	return {0}
end
redis.call('ZADD', READERS, int(now + ttl), owner)
settle_readers(now)
return {1, tok}

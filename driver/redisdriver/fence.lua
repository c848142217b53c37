-- fence: a token floor, TryAcquire with Request.MinToken (fence.go).
-- ARGV: 1 owner, 2 mode ('x' or 's'), 3 floor (a token, > 0).
-- Reply: the hold's token, at least the floor, when the owner holds the
-- key in that mode (every later token of the key exceeds the floor); 0
-- when it does not (nothing changed). A holder's floor is kept: FENCE keeps it (keep_token) while the server's clock
-- has not passed it, unless FENCE already keeps a larger token; once the
-- clock has passed it, next_token's clock reading alone exceeds it. The
-- owner's hold takes the floor as its token when its own is lower, so that
-- its release keeps the floor (release_token) as it keeps any token the
-- clock has not passed, and a re-acquire returns it.

local owner, shared, floor = ARGV[1], ARGV[2] == 's', tonumber(ARGV[3])

-- raise keeps the floor in FENCE; called only for a holder, whose release
-- then keeps the same token, never a lower one.
local function raise()
	if floor >= now_us() then
		local last = tonumber(redis.call('GET', FENCE) or '0')
		if not last or last < floor then
			keep_token(floor)
		end
	end
end

if not shared then
	local v = redis.call('GET', LOCK)
	if not v then
		return 0
	end
	local tok, o, flagged, data = parse_hold(v)
	if o ~= owner then
		return 0
	end
	if tonumber(tok) < floor then
		local w = ''
		if flagged then
			w = 'w'
		end
		redis.call('SET', LOCK, int(floor) .. w .. ':' .. owner .. data, 'KEEPTTL')
	end
	raise()
	return math.max(tonumber(tok), floor)
end

if not redis.call('ZSCORE', READERS, owner) then
	return 0
end
purge_readers(now_ms())
local t = redis.call('HGET', TOKENS, owner)
if not t or not redis.call('ZSCORE', READERS, owner) then
	return 0
end
local tok, data = split_token(t)
if tonumber(tok) < floor then
	redis.call('HSET', TOKENS, owner, int(floor) .. data)
end
raise()
return math.max(tonumber(tok), floor)

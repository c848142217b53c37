-- release: Release.
-- ARGV: 1 owner, 2 mode ('x' or 's'), 3 token ('0': any).
-- Reply: 1 released; 0 not held. Either way the owner's queue entry is
-- removed. When the release leaves the key free, or is that of a counted
-- shared hold, and the queue has live entries, the key is handed over to
-- the queue's head as far as it fits (see handoff).
-- Otherwise publishes "r" on CHAN when a shared hold, a flagged exclusive
-- hold or a queue entry went: an exclusive hold that never blocked anyone
-- has nobody to wake, and its holder has no queue entry (a grant removes
-- it).

local owner, shared, want = ARGV[1], ARGV[2] == 's', ARGV[3]
local released, counted = false, false

if not shared then
	local v = redis.call('GET', LOCK)
	if v then
		local tok, o, flagged = parse_hold(v)
		if o == owner and (want == '0' or tok == want) then
			release_token(tok)
			redis.call('DEL', LOCK)
			if not flagged then
				return 1
			end
			released = true
		end
	end
elseif redis.call('ZSCORE', READERS, owner) then
	-- Only a reader has a shared hold to release: the clock and the purge
	-- are for them.
	purge_readers(now_ms())
	local t = redis.call('HGET', TOKENS, owner)
	local tok, data = split_token(t or '')
	if t and redis.call('ZSCORE', READERS, owner) and (want == '0' or tok == want) then
		redis.call('ZREM', READERS, owner)
		redis.call('HDEL', TOKENS, owner)
		released = true
		local _, limit = data_counts(data)
		counted = limit > 0
	end
end

local left = leave_queue(owner)
if released and redis.call('EXISTS', QUEUE) == 1 and redis.call('EXISTS', LOCK) == 0 then
	-- The key may be free, or have units free for a counted head: hand
	-- it to the queue's head, which wakes only that waiter.
	local now = now_ms()
	if (counted or readers_remaining(now) < 0) and handoff(now) then
		return 1
	end
end
if released or left then
	redis.call('PUBLISH', CHAN, 'r')
end
if released then
	return 1
end
return 0

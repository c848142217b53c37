-- acquire: TryAcquire and TryAcquireQueued.
-- ARGV: 1 owner, 2 mode ('x' exclusive, 's' shared) followed by 'q' to join
--       the wait queue when not granted, then by 'd' when ARGV[4] is
--       given, 3 ttl ms, 4 (optional) the request's data (see common.lua),
--       5 (queued requests, optional) the pub/sub channel of the Driver
--       that queues the owner, for its handoff (QNOTE), or ''.
-- Reply: token (> 0) granted, or extended for the holding owner;
--        -1 - remaining ms (< 0) not granted (remaining 0: unknown), or
--        for a queued request {-1 - remaining, bound}, bound being at
--        least every token granted so far and below every later one;
--        {limit} not granted: a shared request whose limit differs from
--        that of the key's live shared holds or shared queue entries.

local owner, shared, queued = ARGV[1], string.sub(ARGV[2], 1, 1) == 's', string.sub(ARGV[2], 2, 2) == 'q'
local ttl_ms = ARGV[3]
local ttl = tonumber(ttl_ms)
local data = ARGV[4] or ''

-- Without shared holds nor queue entries, which is the uncontended case,
-- there is nothing to purge, no queue to respect and no clock to read.
local busy = redis.call('EXISTS', READERS, QUEUE, QEXP) > 0
local now
local function clock()
	if not now then
		now = now_ms()
	end
	return now
end
if busy then
	purge_readers(clock())
	purge_queue(clock())
end

local blocked, remaining = false, 0

-- The holder itself: extend, same token.
local v = redis.call('GET', LOCK)
if v then
	local tok, o, flagged, hdata = parse_hold(v)
	if o == owner and not shared then
		redis.call('PEXPIRE', LOCK, ttl_ms)
		if busy then
			leave_queue(owner)
		end
		return token_reply(tok)
	end
	blocked, remaining = true, redis.call('PTTL', LOCK)
	if not flagged and remaining > 0 then
		-- Someone waits now: the release must wake them.
		redis.call('SET', LOCK, tok .. 'w:' .. o .. hdata, 'PX', remaining)
	end
elseif busy and shared then
	-- The holder itself, shared: extend, same token. (Without busy there
	-- is no shared hold to extend or, below, to wait for.)
	local t = redis.call('HGET', TOKENS, owner)
	if t and redis.call('ZSCORE', READERS, owner) then
		redis.call('ZADD', READERS, int(clock() + ttl), owner)
		settle_readers(clock())
		leave_queue(owner)
		return token_reply((split_token(t)))
	end
elseif busy then
	local ms = readers_remaining(clock())
	if ms >= 0 then
		blocked, remaining = true, ms
	end
end

-- Every live shared hold and shared queue entry has the same limit (see
-- common.lua): a shared request with another is refused.
local weight, limit = data_counts(data)
if busy and shared then
	local theirs = key_limit()
	if theirs and theirs ~= limit then
		return {theirs}
	end
end

if limit > 0 then
	-- A counted request: the weights of the live shared holds and of the
	-- queue entries ahead, all shared, and its own must fit the limit.
	-- Remaining is the first expiry among what is in the way.
	local units, soonest = weight, nil
	if blocked then
		soonest = remaining
	end
	if busy and redis.call('ZCARD', QUEUE) > 0 then
		local now = clock()
		local r = redis.call('ZRANK', QUEUE, owner)
		local ahead = {}
		if not r then
			-- A newcomer waits behind the whole queue.
			blocked = true
			ahead = redis.call('ZRANGE', QUEUE, 0, -1, 'WITHSCORES')
		elseif r > 0 then
			ahead = redis.call('ZRANGE', QUEUE, 0, r - 1, 'WITHSCORES')
		end
		for i = 1, #ahead, 2 do
			if tonumber(ahead[i + 1]) % 2 == 0 then
				blocked = true
			else
				local w = data_counts(redis.call('HGET', QDATA, ahead[i]) or '')
				units = units + w
			end
			local e = tonumber(redis.call('ZSCORE', QEXP, ahead[i]) or '0')
			if not soonest or e - now < soonest then
				soonest = e - now
			end
		end
	end
	if busy and redis.call('EXISTS', READERS) == 1 then
		local held = readers_units()
		if held + units > limit then
			blocked = true
			local first = redis.call('ZRANGE', READERS, 0, 0, 'WITHSCORES')
			local ms = tonumber(first[2]) - clock()
			if not soonest or ms < soonest then
				soonest = ms
			end
		end
	elseif units > limit then
		blocked = true
	end
	if blocked then
		remaining = soonest or 0
	end
elseif busy and redis.call('ZCARD', QUEUE) > 0 then
	-- The wait queue: while it has live entries, only its head, or for a
	-- shared request a run of shared entries at its head, may be granted.
	-- Remaining then also covers the entries ahead, whose expiry nobody
	-- announces.
	local now = clock()
	local r = redis.call('ZRANK', QUEUE, owner)
	local ok = r == 0
	if r and r > 0 and shared then
		ok = true
		local ahead = redis.call('ZRANGE', QUEUE, 0, r - 1, 'WITHSCORES')
		for i = 2, #ahead, 2 do
			if tonumber(ahead[i]) % 2 == 0 then
				ok = false
				break
			end
		end
	end
	if not ok then
		blocked = true
		local last = 0
		if not r then
			local e = redis.call('ZRANGE', QEXP, -1, -1, 'WITHSCORES')
			if #e > 0 then
				last = tonumber(e[2])
			end
		else
			local ahead = redis.call('ZRANGE', QUEUE, 0, r - 1)
			for i = 1, #ahead do
				local e = redis.call('ZSCORE', QEXP, ahead[i])
				if e and tonumber(e) > last then
					last = tonumber(e)
				end
			end
		end
		if last - now > remaining then
			remaining = last - now
		end
	end
end

if blocked then
	if queued then
		local now = clock()
		local m = 0
		if shared then
			m = 1
		end
		local s = redis.call('ZSCORE', QUEUE, owner)
		local seq = 1
		if s then
			seq = math.floor(tonumber(s) / 2)
		else
			local last = redis.call('ZRANGE', QUEUE, -1, -1, 'WITHSCORES')
			if #last > 0 then
				seq = math.floor(tonumber(last[2]) / 2) + 1
			end
		end
		redis.call('ZADD', QUEUE, int(seq * 2 + m), owner)
		redis.call('ZADD', QEXP, int(now + ttl), owner)
		if not s and data ~= '' then
			redis.call('HSET', QDATA, owner, data)
		end
		local note = ARGV[5]
		if note and note ~= '' then
			redis.call('HSET', QNOTE, owner, note)
		end
		local last = redis.call('ZRANGE', QEXP, -1, -1, 'WITHSCORES')
		local ms = tonumber(last[2]) - now
		if ms < 1 then
			ms = 1
		end
		redis.call('PEXPIRE', QUEUE, int(ms))
		redis.call('PEXPIRE', QEXP, int(ms))
		redis.call('PEXPIRE', QDATA, int(ms))
		redis.call('PEXPIRE', QNOTE, int(ms))
	end
	if remaining < 0 then
		remaining = 0
	end
	if queued then
		-- With the bound of every token granted so far: the last one
		-- kept, or below the clock (see next_token). A handoff to the
		-- owner after this gets a greater token; an announcement with
		-- a token up to it is stale (an earlier grant to the same owner).
		local bound = now_us() - 1
		local last = tonumber(redis.call('GET', FENCE) or '0')
		if last and last > bound then
			bound = last
		end
		return {-1 - remaining, bound}
	end
	return -1 - remaining
end

-- Grant: a new token (see next_token).
local tok = next_token()
if shared then
	redis.call('ZADD', READERS, int(clock() + ttl), owner)
	redis.call('HSET', TOKENS, owner, int(tok) .. data)
	settle_readers(clock())
else
	-- Granted while others may wait (readers or a queue were there):
	-- flag the hold so that its release wakes them.
	local flag = ''
	if busy then
		flag = 'w'
	end
	redis.call('SET', LOCK, int(tok) .. flag .. ':' .. owner .. data, 'PX', ttl_ms)
end
if busy then
	leave_queue(owner)
end
return tok

-- acquire: TryAcquire and TryAcquireQueued.
-- ARGV: 1 owner, 2 mode ('x' exclusive, 's' shared), 3 ttl ms,
--       4 '1' to join the wait queue when not granted, 5 channel.
-- Reply: {1, token} granted (or extended, for the holding owner);
--        {0, remaining ms} not granted (0: unknown).

local owner, shared, ttl, queued, chan = ARGV[1], ARGV[2] == 's', tonumber(ARGV[3]), ARGV[4] == '1', ARGV[5]
local now = now_ms()
purge_readers(now)
purge_queue(now, chan)

local blocked, remaining = false, 0

-- The holder itself: extend, same token.
local v = redis.call('GET', LOCK)
if v then
	local tok, o = parse_hold(v)
	if o == owner and not shared then
		redis.call('PEXPIRE', LOCK, int(ttl))
		leave_queue(owner)
		return {1, tok}
	end
	blocked, remaining = true, redis.call('PTTL', LOCK)
elseif shared then
	local tok = redis.call('HGET', TOKENS, owner)
	if tok and redis.call('ZSCORE', READERS, owner) then
		redis.call('ZADD', READERS, int(now + ttl), owner)
		settle_readers(now)
		leave_queue(owner)
		return {1, tok}
	end
else
	local ms = readers_remaining(now)
	if ms >= 0 then
		blocked, remaining = true, ms
	end
end

-- The wait queue: while it has live entries, only its head, or for a shared
-- request a run of shared entries at its head, may be granted. Remaining
-- then also covers the entries ahead, whose expiry nobody announces.
if redis.call('ZCARD', QUEUE) > 0 then
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
		local last = redis.call('ZRANGE', QEXP, -1, -1, 'WITHSCORES')
		local ms = tonumber(last[2]) - now
		if ms < 1 then
			ms = 1
		end
		redis.call('PEXPIRE', QUEUE, int(ms))
		redis.call('PEXPIRE', QEXP, int(ms))
	end
	if remaining < 0 then
		remaining = 0
	end
	return {0, remaining}
end

-- Grant: a new token from the fence counter, which has no TTL and
-- survives every hold.
local tok = int(redis.call('INCR', FENCE))
if shared then
	redis.call('ZADD', READERS, int(now + ttl), owner)
	redis.call('HSET', TOKENS, owner, tok)
	settle_readers(now)
else
	redis.call('SET', LOCK, tok .. ':' .. owner, 'PX', int(ttl))
end
leave_queue(owner)
return {1, tok}

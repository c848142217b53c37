-- acquire, fast path: runs before the shared prelude, whose function
-- definitions cost more server time than this path's commands. With no
-- hold, no shared holds, no queue and no last token on the key, an
-- exclusive request (not a queued one, which has seen the key taken) is
-- granted here with the server's clock in microseconds as its token: no
-- token granted before is that large (see next_token in common.lua; a
-- release in the grant's own microsecond keeps the token). Anything else
-- falls through to the full script, which grants, extends or refuses. A
-- refused request takes no token.
--
-- The second fast path refuses such a request, not queued, from an owner
-- that is not in the wait queue, when another owner holds the key and its
-- hold is already flagged (a release will wake the waiters): the usual
-- first attempt of a waiter on a contended key. Remaining is the hold's
-- PTTL or, when longer, the life of the queue's last entry, as the full
-- script reports it; expired shared holds and queue entries are left for
-- the next full script to purge, as they change nothing of the refusal.
--
-- The third refuses a queued exclusive request without data from an
-- owner that is not in the queue yet when another owner holds the key
-- (the attempt of a process that locks a contended key again): it flags
-- the hold, appends the owner to the queue with its Driver's channel
-- (QNOTE) as the full script does, and replies with the remaining time
-- and the bound of the tokens so far. The PEXPIRE of a queue key covers
-- its longest-lived member; queue-data, to which this entry adds nothing,
-- keeps the expiry its members' own requests gave it. Expired entries are
-- left for the next full script to purge: the entry goes behind them in
-- the order, and a release whose queue head expired hands the key over
-- through the full script, which purges first.
do
	if redis.replicate_commands and not redis.REDIS_VERSION_NUM then
		-- Before the first write (Redis < 5; see common.lua).
		-- Redis 7 and later have REDIS_VERSION_NUM and skip it.
		pcall(redis.replicate_commands)
	end
	local B = KEYS[1]
	if ARGV[2] == 'x' then
		local L = B .. 'lock'
		if redis.call('EXISTS', L, B .. 'readers', B .. 'queue', B .. 'queue-exp', B .. 'fence') == 0 then
			local t = redis.call('TIME')
			local tok = tonumber(t[1]) * 1000000 + tonumber(t[2])
			redis.call('SET', L, string.format('%d', tok) .. ':' .. ARGV[1], 'PX', ARGV[3])
			return tok
		end
	end
	if ARGV[2] == 'x' then
		local v = redis.call('GET', B .. 'lock')
		local i = v and string.find(v, ':', 1, true)
		if i and string.sub(v, i - 1, i - 1) == 'w' then
			local j = string.find(v, ':', i + 1, true)
			local o = string.sub(v, i + 1, (j or 0) - 1)
			local rem = redis.call('PTTL', B .. 'lock')
			if o ~= ARGV[1] and rem > 0 and not redis.call('ZSCORE', B .. 'queue', ARGV[1]) then
				local last = redis.call('ZRANGE', B .. 'queue-exp', -1, -1, 'WITHSCORES')
				if #last > 0 then
					local t = redis.call('TIME')
					local q = tonumber(last[2]) - (tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000))
					if q > rem then
						rem = q
					end
				end
				return -1 - rem
			end
		end
	end
	if ARGV[2] == 'xq' and (ARGV[4] or '') == '' then
		local v = redis.call('GET', B .. 'lock')
		local i = v and string.find(v, ':', 1, true)
		local j = i and string.find(v, ':', i + 1, true)
		local Q = B .. 'queue'
		local rem = i and redis.call('PTTL', B .. 'lock')
		if i and string.sub(v, i + 1, (j or 0) - 1) ~= ARGV[1] and rem > 0 and not redis.call('ZSCORE', Q, ARGV[1]) then
			if string.sub(v, i - 1, i - 1) ~= 'w' then
				redis.call('SET', B .. 'lock', string.sub(v, 1, i - 1) .. 'w' .. string.sub(v, i), 'PX', rem)
			end
			local QE = B .. 'queue-exp'
			local t = redis.call('TIME')
			local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
			local now = math.floor(us / 1000)
			local exp = now + tonumber(ARGV[3])
			local seq, qend = 1, exp
			local last = redis.call('ZRANGE', Q, -1, -1, 'WITHSCORES')
			if #last > 0 then
				seq = math.floor(tonumber(last[2]) / 2) + 1
			end
			last = redis.call('ZRANGE', QE, -1, -1, 'WITHSCORES')
			if #last > 0 then
				local e = tonumber(last[2])
				if e - now > rem then
					rem = e - now
				end
				if e > qend then
					qend = e
				end
			end
			redis.call('ZADD', Q, string.format('%d', seq * 2), ARGV[1])
			redis.call('ZADD', QE, string.format('%d', exp), ARGV[1])
			local ms = string.format('%d', math.max(qend - now, 1))
			redis.call('PEXPIRE', Q, ms)
			redis.call('PEXPIRE', QE, ms)
			if (ARGV[5] or '') ~= '' then
				redis.call('HSET', B .. 'queue-notify', ARGV[1], ARGV[5])
				redis.call('PEXPIRE', B .. 'queue-notify', ms)
			end
			local bound = us - 1
			local f = tonumber(redis.call('GET', B .. 'fence') or '0')
			if f and f > bound then
				bound = f
			end
			return {-1 - rem, bound}
		end
	end
end

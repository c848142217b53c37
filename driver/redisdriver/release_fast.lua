-- release, fast paths: run before the shared prelude (see
-- acquire_fast.lua), for an exclusive hold of ARGV[1] (with token ARGV[3]
-- unless it is '0'); anything else falls through to the full script.
--
-- An exclusive hold that refused nobody (not flagged) is released with
-- GET and DEL, keeping its token as the last one (keep_token in
-- common.lua) when the clock has not passed it. When the release names
-- the token, the hold's value is compared with "<token>:<owner>" whole,
-- which costs less server time than taking it apart; a value that is not
-- that (flagged, with data, of another owner) is taken apart below.
--
-- A flagged hold, when no shared hold key exists: with an empty queue its
-- release deletes it and publishes "r" on CHAN, as the full script does;
-- with a live exclusive entry at the queue's head (not the releaser's), it
-- hands the key over as handoff in common.lua does: the head gets the
-- hold with a new token (next_token: the clock, or the last token + 1,
-- the released token counting as kept), for as long as its entry lives,
-- with the entry's data, leaves the queue, and is told on its Driver's
-- channel (QNOTE) or on CHAN. Expired entries behind the head are left for
-- the next full script to purge: they block nobody once the head holds the
-- key. A releaser with a queue entry of its own falls through.
do
	if ARGV[2] == 'x' then
		local B = KEYS[1]
		local L = B .. 'lock'
		local v = redis.call('GET', L)
		if v and ARGV[3] ~= '0' and v == ARGV[3] .. ':' .. ARGV[1] then
			-- The hold of the token, not flagged: the usual release.
			local tok = tonumber(ARGV[3])
			local t = redis.call('TIME')
			if tok >= tonumber(t[1]) * 1000000 + tonumber(t[2]) then
				redis.call('SET', B .. 'fence', ARGV[3], 'PXAT', string.format('%d', math.floor(tok / 1000) + 1))
			end
			redis.call('DEL', L)
			return 1
		end
		local i = v and string.find(v, ':', 1, true)
		if i and string.sub(v, i - 1, i - 1) ~= 'w' and string.sub(v, i + 1) == ARGV[1]
			and (ARGV[3] == '0' or string.sub(v, 1, i - 1) == ARGV[3]) then
			local tok = tonumber(string.sub(v, 1, i - 1))
			local t = redis.call('TIME')
			if tok and tok >= tonumber(t[1]) * 1000000 + tonumber(t[2]) then
				redis.call('SET', B .. 'fence', string.format('%d', tok), 'PXAT', string.format('%d', math.floor(tok / 1000) + 1))
			end
			redis.call('DEL', L)
			return 1
		end
		local j = i and string.find(v, ':', i + 1, true)
		if i and string.sub(v, i - 1, i - 1) == 'w' and string.sub(v, i + 1, (j or 0) - 1) == ARGV[1]
			and (ARGV[3] == '0' or string.sub(v, 1, i - 2) == ARGV[3])
			and redis.call('EXISTS', B .. 'readers') == 0 then
			local Q, QE = B .. 'queue', B .. 'queue-exp'
			local head = redis.call('ZRANGE', Q, 0, 0, 'WITHSCORES')
			local tok = tonumber(string.sub(v, 1, i - 2))
			local t = redis.call('TIME')
			local us = tonumber(t[1]) * 1000000 + tonumber(t[2])
			local now = math.floor(us / 1000)
			if #head == 0 then
				if tok and tok >= us then
					redis.call('SET', B .. 'fence', string.format('%d', tok), 'PXAT', string.format('%d', math.floor(tok / 1000) + 1))
				end
				redis.call('DEL', B .. 'lock')
				redis.call('PUBLISH', B .. 'released', 'r')
				return 1
			end
			local h = head[1]
			local exp = tonumber(head[2]) % 2 == 0 and h ~= ARGV[1] and not redis.call('ZSCORE', Q, ARGV[1])
				and tonumber(redis.call('ZSCORE', QE, h) or '0')
			if exp and exp > now then
				local last = tonumber(redis.call('GET', B .. 'fence') or '0') or 0
				if tok and tok > last then
					last = tok
				end
				local nt = us
				if last >= nt then
					nt = last + 1
				end
				local ntok = string.format('%d', nt)
				redis.call('SET', B .. 'fence', ntok, 'PXAT', string.format('%d', math.floor(nt / 1000) + 1))
				local data = redis.call('HGET', B .. 'queue-data', h) or ''
				local note = redis.call('HGET', B .. 'queue-notify', h)
				redis.call('SET', B .. 'lock', ntok .. 'w:' .. h .. data, 'PX', string.format('%d', math.max(exp - now, 1)))
				redis.call('ZREM', Q, h)
				redis.call('ZREM', QE, h)
				if data ~= '' then
					redis.call('HDEL', B .. 'queue-data', h)
				end
				if note then
					redis.call('HDEL', B .. 'queue-notify', h)
				end
				redis.call('PUBLISH', note or (B .. 'released'), 'g' .. ntok .. ':' .. h)
				return 1
			end
		end
	end
end

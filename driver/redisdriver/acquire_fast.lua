-- acquire, fast path: runs before the shared prelude, whose function
-- definitions cost more server time than this path's commands. With no
-- hold, no shared holds and no queue on the key, an exclusive request (not
-- a queued one, which has seen the key taken) is granted here with a new
-- token, as next_token in common.lua makes it; anything else falls through
-- to the full script, which grants, extends or refuses. Nothing is written
-- before the path knows it grants: a refused request takes no token.
do
	if redis.replicate_commands then
		-- Before the first write (Redis < 5; see common.lua): the full
		-- script may read TIME too.
		pcall(redis.replicate_commands)
	end
	local B = KEYS[1]
	if ARGV[2] == 'x' and redis.call('EXISTS', B .. 'lock', B .. 'readers', B .. 'queue', B .. 'queue-exp') == 0 then
		local t = redis.call('TIME')
		local tok = tonumber(t[1]) * 1000000 + tonumber(t[2])
		local last = tonumber(redis.call('GET', B .. 'fence') or '0')
		if last and last >= tok then
			tok = last + 1
		end
		local s = string.format('%d', tok)
		redis.call('SET', B .. 'lock', s .. ':' .. ARGV[1], 'PX', ARGV[3])
		redis.call('SET', B .. 'fence', s, 'PXAT', string.format('%d', math.floor(tok / 1000) + 1))
		return tok
	end
end

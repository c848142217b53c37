-- acquire, fast path: runs before the shared prelude, whose function
-- definitions cost more server time than this path's three commands. With
-- no shared holds and no queue on the key, an exclusive request (not a
-- queued one, which has seen the key taken) takes a
-- token and the lock with SET NX; if the lock is held (by another owner or
-- by this one) it falls through to the full script. A token taken for a
-- SET that failed is skipped: tokens only need to increase.
do
	if redis.replicate_commands then
		-- Before the first write (Redis < 5; see common.lua): the full
		-- script may read TIME after this path's INCR.
		pcall(redis.replicate_commands)
	end
	local B = KEYS[1]
	if ARGV[2] == 'x' and redis.call('EXISTS', B .. 'readers', B .. 'queue', B .. 'queue-exp') == 0 then
		local tok = redis.call('INCR', B .. 'fence')
		if redis.call('SET', B .. 'lock', string.format('%d', tok) .. ':' .. ARGV[1], 'NX', 'PX', ARGV[3]) then
			return tok
		end
	end
end

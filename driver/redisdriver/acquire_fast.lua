-- acquire, fast path: runs before the shared prelude, whose function
-- definitions cost more server time than this path's commands. With no
-- hold, no shared holds, no queue and no last token on the key, an
-- exclusive request (not a queued one, which has seen the key taken) is
-- granted here with the server's clock in microseconds as its token: no
-- token granted before is that large (see next_token in common.lua; a
-- release in the grant's own microsecond keeps the token). Anything else
-- falls through to the full script, which grants, extends or refuses. A
-- refused request takes no token.
do
	if redis.replicate_commands then
		-- Before the first write (Redis < 5; see common.lua).
		pcall(redis.replicate_commands)
	end
	local B = KEYS[1]
	if ARGV[2] == 'x' and redis.call('EXISTS', B .. 'lock', B .. 'readers', B .. 'queue', B .. 'queue-exp', B .. 'fence') == 0 then
		local t = redis.call('TIME')
		local tok = tonumber(t[1]) * 1000000 + tonumber(t[2])
		redis.call('SET', B .. 'lock', string.format('%d', tok) .. ':' .. ARGV[1], 'PX', ARGV[3])
		return tok
	end
end

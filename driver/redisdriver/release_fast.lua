-- release, fast path: runs before the shared prelude (see
-- acquire_fast.lua). An exclusive hold that refused nobody (not flagged)
-- is released with GET and DEL, keeping its token as the last one
-- (keep_token in common.lua) when the clock has not passed it; anything
-- else falls through to the full script.
do
	if ARGV[2] == 'x' then
		local B = KEYS[1]
		local v = redis.call('GET', B .. 'lock')
		local i = v and string.find(v, ':', 1, true)
		if i and string.sub(v, i - 1, i - 1) ~= 'w' and string.sub(v, i + 1) == ARGV[1]
			and (ARGV[3] == '0' or string.sub(v, 1, i - 1) == ARGV[3]) then
			local tok = tonumber(string.sub(v, 1, i - 1))
			local t = redis.call('TIME')
			if tok and tok >= tonumber(t[1]) * 1000000 + tonumber(t[2]) then
				redis.call('SET', B .. 'fence', string.format('%d', tok), 'PXAT', string.format('%d', math.floor(tok / 1000) + 1))
			end
			redis.call('DEL', B .. 'lock')
			return 1
		end
	end
end

-- release, fast path: runs before the shared prelude (see
-- acquire_fast.lua). An exclusive hold that refused nobody (not flagged)
-- is released with GET and DEL; anything else falls through to the full
-- script.
do
	if ARGV[2] == 'x' then
		local L = KEYS[1] .. 'lock'
		local v = redis.call('GET', L)
		local i = v and string.find(v, ':', 1, true)
		if i and string.sub(v, i - 1, i - 1) ~= 'w' and string.sub(v, i + 1) == ARGV[1]
			and (ARGV[3] == '0' or string.sub(v, 1, i - 1) == ARGV[3]) then
			redis.call('DEL', L)
			return 1
		end
	end
end

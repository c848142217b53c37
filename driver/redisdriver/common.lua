-- Shared by every script of package redisdriver; each script is this
-- prelude followed by its own body.
--
-- KEYS (all in one cluster hash slot, see keys.go):
--   1 lock     STRING "<token>:<owner>" with PX: the exclusive hold
--   2 fence    STRING counter, no TTL: the last token granted for the key
--   3 readers  ZSET owner -> expiry (Redis TIME, ms): the shared holds
--   4 tokens   HASH owner -> token of each shared hold
--   5 queue    ZSET owner -> seq*2 + (1 if shared else 0): the wait queue
--   6 qexp     ZSET owner -> expiry (Redis TIME, ms) of each queue entry
-- readers/tokens and queue/qexp carry a PEXPIRE no shorter than their
-- longest-lived member, so abandoned keys disappear on their own.

if redis.replicate_commands then
	-- Redis < 5 replicates scripts verbatim and refuses writes after TIME
	-- unless asked to replicate effects; later versions always do.
	pcall(redis.replicate_commands)
end

local LOCK, FENCE, READERS, TOKENS, QUEUE, QEXP = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]

-- int formats an integral number without exponent or fraction.
local function int(n)
	return string.format('%d', n)
end

-- now_ms is the server's clock in milliseconds.
local function now_ms()
	local t = redis.call('TIME')
	return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- parse_hold splits an exclusive hold "<token>:<owner>".
local function parse_hold(v)
	local i = string.find(v, ':', 1, true)
	if not i then
		return nil, nil
	end
	return string.sub(v, 1, i - 1), string.sub(v, i + 1)
end

-- purge_readers removes the shared holds that expired at or before now.
local function purge_readers(now)
	local dead = redis.call('ZRANGEBYSCORE', READERS, '-inf', int(now))
	if #dead == 0 then
		return
	end
	for i = 1, #dead do
		redis.call('HDEL', TOKENS, dead[i])
	end
	redis.call('ZREMRANGEBYSCORE', READERS, '-inf', int(now))
end

-- readers_remaining is how long the last shared hold lasts, or -1 if
-- there is none.
local function readers_remaining(now)
	local last = redis.call('ZRANGE', READERS, -1, -1, 'WITHSCORES')
	if #last == 0 then
		return -1
	end
	local ms = tonumber(last[2]) - now
	if ms < 0 then
		ms = 0
	end
	return ms
end

-- settle_readers makes readers and tokens live as long as their last
-- member.
local function settle_readers(now)
	local ms = readers_remaining(now)
	if ms < 0 then
		redis.call('DEL', READERS, TOKENS)
		return
	end
	if ms < 1 then
		ms = 1
	end
	redis.call('PEXPIRE', READERS, int(ms))
	redis.call('PEXPIRE', TOKENS, int(ms))
end

-- purge_queue removes the queue entries that expired at or before now and
-- publishes on chan when it removed any: the entries behind may now
-- proceed.
local function purge_queue(now, chan)
	local dead = redis.call('ZRANGEBYSCORE', QEXP, '-inf', int(now))
	if #dead == 0 then
		return
	end
	for i = 1, #dead do
		redis.call('ZREM', QUEUE, dead[i])
	end
	redis.call('ZREMRANGEBYSCORE', QEXP, '-inf', int(now))
	redis.call('PUBLISH', chan, 'q')
end

-- leave_queue removes owner's queue entry and reports whether it had one.
local function leave_queue(owner)
	if redis.call('ZREM', QUEUE, owner) == 0 then
		return false
	end
	redis.call('ZREM', QEXP, owner)
	return true
end

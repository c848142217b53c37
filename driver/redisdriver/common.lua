-- Shared by every script of package redisdriver; each script is this
-- prelude followed by its own body.
--
-- KEYS[1] is the base "<prefix>{<tag>}:" of one lock, itself never a key.
-- The scripts derive the lock's keys from it by appending their suffix (the
-- names of keys.go); they all carry the hash tag of KEYS[1] and so live in
-- its cluster hash slot:
--   LOCK     STRING "<token>:<owner><data>" with PX: the exclusive hold;
--            "<token>w:<owner><data>" once it has blocked another request
--            (or was granted while others queued): only then does its
--            release publish and clean the queue, so the uncontended
--            release is one GET and one DEL
--   FENCE    STRING the last token of the key, while the server's clock has
--            not passed it: expires (PXAT) in the millisecond after the
--            token's; from then on the clock alone exceeds every token
--   READERS  ZSET owner -> expiry (Redis TIME, ms): the shared holds
--   TOKENS   HASH owner -> "<token><data>" of each shared hold
--   QUEUE    ZSET owner -> seq*2 + (1 if shared else 0): the wait queue
--   QEXP     ZSET owner -> expiry (Redis TIME, ms) of each queue entry
--   QDATA    HASH owner -> "<data>" of the queue entries that have data
--   QNOTE    HASH owner -> the pub/sub channel of the Driver that queued
--            it, for the queue entries whose Driver has one: a handoff to
--            the owner is published there rather than on CHAN
--   CHAN     pub/sub channel, published on release
-- readers/tokens and queue/qexp/qdata/qnote carry a PEXPIRE no shorter than their
-- longest-lived member, so abandoned keys disappear on their own.
--
-- <data> is what a grant keeps besides its token and owner: empty for an
-- uncounted request without a value, else ":<weight>:<limit>:<value>"
-- (weight and limit 0 when uncounted; the value, any bytes, last). A hold
-- keeps the data of its grant, a queue entry that of the request that
-- made it, and a handoff copies it from the entry to the hold, so a value
-- and a weight live and die with their hold. Owners are hex digits, so
-- the first ':' after the owner starts the data.
--
-- Live shared holds and shared queue entries all have the same limit: a
-- shared request whose limit differs from theirs is refused (key_limit),
-- so the first of them tells the limit of all. A counted request takes
-- its weight of the limit's units: the weights of the live shared holds,
-- of the queue entries ahead of it and its own must not exceed the limit.
--
-- Tokens are the server's clock in microseconds (see next_token); replies
-- carry them as integers, exact below 2^53 (the year 2255).

if redis.replicate_commands and not redis.REDIS_VERSION_NUM then
	-- Redis < 5 replicates scripts verbatim and refuses writes after TIME
	-- unless asked to replicate effects; later versions always do. Redis
	-- 7, the first with REDIS_VERSION_NUM, is spared the call.
	pcall(redis.replicate_commands)
end

local B = KEYS[1]
local LOCK, FENCE, READERS, TOKENS = B .. 'lock', B .. 'fence', B .. 'readers', B .. 'tokens'
local QUEUE, QEXP, QDATA, CHAN = B .. 'queue', B .. 'queue-exp', B .. 'queue-data', B .. 'released'
local QNOTE = B .. 'queue-notify'

-- int formats an integral number without exponent or fraction.
local function int(n)
	return string.format('%d', n)
end

-- now_ms is the server's clock in milliseconds.
local function now_ms()
	local t = redis.call('TIME')
	return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

-- now_us is the server's clock in microseconds.
local function now_us()
	local t = redis.call('TIME')
	return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

-- keep_token records tok as the key's last token in FENCE until the clock
-- has passed it: FENCE expires at the millisecond after the token's, and a
-- key is expired only once the clock (of the script's start) is past that,
-- so any later TIME exceeds the token.
local function keep_token(tok)
	redis.call('SET', FENCE, int(tok), 'PXAT', int(math.floor(tok / 1000) + 1))
end

-- next_token returns a new token for the key: the server's clock in
-- microseconds, or the last token + 1 when that is larger (a grant in the
-- same microsecond, several grants by one handoff, a clock that stepped
-- back while FENCE lived), and keeps it (keep_token). Only a grant calls
-- it: a refused request leaves FENCE alone.
--
-- The fast path of acquire grants the clock's value without FENCE when
-- none of the key's keys exists, and keeps nothing: every token granted
-- before is then below the clock, since the clock does not step back, a
-- token above it is kept in FENCE, and a hold granted in the current
-- microsecond still exists, unless a release deleted it, and releases
-- keep the token of an exclusive hold that the clock has not passed
-- (release_token).
local function next_token()
	local tok = now_us()
	local last = tonumber(redis.call('GET', FENCE) or '0')
	if last and last >= tok then
		tok = last + 1
	end
	keep_token(tok)
	return tok
end

-- release_token keeps tok, the token of an exclusive hold being deleted,
-- when the clock has not passed it (see next_token).
local function release_token(tok)
	tok = tonumber(tok)
	if tok and tok >= now_us() then
		keep_token(tok)
	end
end

-- parse_hold splits an exclusive hold "<token>:<owner><data>" or
-- "<token>w:<owner><data>" into token, owner, whether it is flagged (a
-- flagged hold has blocked someone, so its release must wake waiters) and
-- data.
local function parse_hold(v)
	local i = string.find(v, ':', 1, true)
	if not i then
		return nil, nil, false, ''
	end
	local tok = string.sub(v, 1, i - 1)
	local o, data = string.sub(v, i + 1), ''
	local j = string.find(v, ':', i + 1, true)
	if j then
		o, data = string.sub(v, i + 1, j - 1), string.sub(v, j)
	end
	if string.sub(tok, -1) == 'w' then
		return string.sub(tok, 1, -2), o, true, data
	end
	return tok, o, false, data
end

-- split_token splits a shared hold's "<token><data>" (TOKENS) into token
-- and data.
local function split_token(t)
	local i = string.find(t, ':', 1, true)
	if not i then
		return t, ''
	end
	return string.sub(t, 1, i - 1), string.sub(t, i)
end

-- data_counts returns the weight and limit of data, 0 and 0 when it has
-- none.
local function data_counts(data)
	local w, l = string.match(data, '^:(%d+):(%d+):')
	if not w then
		return 0, 0
	end
	return tonumber(w), tonumber(l)
end

-- data_value returns the value of data, or ''.
local function data_value(data)
	local p = string.match(data, '^:%d+:%d+:()')
	if not p then
		return ''
	end
	return string.sub(data, p)
end

-- token_reply is the reply for a stored token: the token as an integer, or
-- the stored string when it is not one the scripts wrote (a foreign value),
-- which the driver refuses as an unexpected reply.
local function token_reply(tok)
	if string.find(tok, '^[1-9]%d*$') then
		return tonumber(tok)
	end
	return tok
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
-- publishes on CHAN when it removed any: the entries behind may now
-- proceed.
local function purge_queue(now)
	local dead = redis.call('ZRANGEBYSCORE', QEXP, '-inf', int(now))
	if #dead == 0 then
		return
	end
	for i = 1, #dead do
		redis.call('ZREM', QUEUE, dead[i])
		redis.call('HDEL', QDATA, dead[i])
		redis.call('HDEL', QNOTE, dead[i])
	end
	redis.call('ZREMRANGEBYSCORE', QEXP, '-inf', int(now))
	redis.call('PUBLISH', CHAN, 'q')
end

-- leave_queue removes owner's queue entry and reports whether it had one.
local function leave_queue(owner)
	if redis.call('ZREM', QUEUE, owner) == 0 then
		return false
	end
	redis.call('ZREM', QEXP, owner)
	redis.call('HDEL', QDATA, owner)
	redis.call('HDEL', QNOTE, owner)
	return true
end

-- readers_units returns the weights of the live shared holds summed, and
-- their limit (0 when uncounted, or when there is none). Call it after
-- purge_readers.
local function readers_units()
	local ts = redis.call('HVALS', TOKENS)
	local sum, limit = 0, 0
	for i = 1, #ts do
		local w, l = string.match(ts[i], '^[^:]*:(%d+):(%d+):')
		if w then
			sum, limit = sum + tonumber(w), tonumber(l)
		end
	end
	return sum, limit
end

-- key_limit returns the limit of the key's live shared holds or, when it
-- has none, of its first shared queue entry (0 for uncounted ones), or nil
-- when it has neither: they all have the same (see the data above). Call
-- it after purge_readers and purge_queue.
local function key_limit()
	local r = redis.call('ZRANGE', READERS, 0, 0)
	if #r > 0 then
		local _, data = split_token(redis.call('HGET', TOKENS, r[1]) or '')
		local _, l = data_counts(data)
		return l
	end
	local q = redis.call('ZRANGE', QUEUE, 0, -1, 'WITHSCORES')
	for i = 2, #q, 2 do
		if tonumber(q[i]) % 2 == 1 then
			local _, l = data_counts(redis.call('HGET', QDATA, q[i - 1]) or '')
			return l
		end
	end
	return nil
end

-- handoff is called when a release may have left room for the queue's
-- head (no exclusive hold; no live shared hold, or only counted ones): it
-- grants the key to the head of the wait queue, or to the run of shared
-- entries at its head, as far as they fit (an exclusive entry only on a
-- free key, a counted one only while the weights stay within the limit;
-- the first entry that does not fit ends the run, so that nobody
-- overtakes it), each for as long as its queue entry lives (the waiter's
-- next TryAcquireQueued extends it to its TTL and learns the token), with
-- the entry's data, and publishes "g<token>:<owner>" for each, which
-- wakes only the driver that queued that owner (no one else can proceed)
-- and gives it the token without another round trip: on that driver's own
-- channel (QNOTE) when it gave one, so that no other process reads it,
-- else on CHAN. It returns whether
-- it granted anything.
local function handoff(now)
	purge_queue(now)
	purge_readers(now)
	local held = redis.call('EXISTS', READERS) == 1
	local units, limit = 0, 0
	if held then
		units, limit = readers_units()
	end
	-- The head alone first: an exclusive head ends the run, and a long
	-- queue of exclusive waiters costs no more than a short one.
	local q = redis.call('ZRANGE', QUEUE, 0, 0, 'WITHSCORES')
	if #q > 0 and tonumber(q[2]) % 2 == 1 then
		q = redis.call('ZRANGE', QUEUE, 0, 63, 'WITHSCORES')
	end
	local granted, readers = false, false
	for i = 1, #q, 2 do
		local o, shared = q[i], tonumber(q[i + 1]) % 2 == 1
		local data = redis.call('HGET', QDATA, o) or ''
		local w, l = data_counts(data)
		if not shared and held then
			break
		end
		if shared and ((held and l ~= limit) or (l > 0 and units + w > l)) then
			break
		end
		local exp = tonumber(redis.call('ZSCORE', QEXP, o))
		local note = redis.call('HGET', QNOTE, o)
		local tok = next_token()
		if shared then
			redis.call('ZADD', READERS, int(exp), o)
			redis.call('HSET', TOKENS, o, int(tok) .. data)
			readers = true
		else
			local ms = exp - now
			if ms < 1 then
				ms = 1
			end
			redis.call('SET', LOCK, int(tok) .. 'w:' .. o .. data, 'PX', int(ms))
		end
		leave_queue(o)
		redis.call('PUBLISH', note or CHAN, 'g' .. int(tok) .. ':' .. o)
		granted, held, units, limit = true, true, units + w, l
		if not shared then
			break
		end
	end
	if readers then
		settle_readers(now)
	end
	return granted
end

-- Shared by every script of package redisdriver; each script is this
-- prelude followed by its own body.
--
-- KEYS[1] is the base "<prefix>{<tag>}:" of one lock, itself never a key.
-- The scripts derive the lock's keys from it by appending their suffix (the
-- names of keys.go); they all carry the hash tag of KEYS[1] and so live in
-- its cluster hash slot:
--   LOCK     STRING "<token>:<owner>" with PX: the exclusive hold;
--            "<token>w:<owner>" once it has blocked another request (or
--            was granted while others queued): only then does its release
--            publish and clean the queue, so the uncontended release is
--            one GET and one DEL
--   FENCE    STRING the last token of the key, while the server's clock has
--            not passed it: expires (PXAT) in the millisecond after the
--            token's; from then on the clock alone exceeds every token
--   READERS  ZSET owner -> expiry (Redis TIME, ms): the shared holds
--   TOKENS   HASH owner -> token of each shared hold
--   QUEUE    ZSET owner -> seq*2 + (1 if shared else 0): the wait queue
--   QEXP     ZSET owner -> expiry (Redis TIME, ms) of each queue entry
--   CHAN     pub/sub channel, published on release
-- readers/tokens and queue/qexp carry a PEXPIRE no shorter than their
-- longest-lived member, so abandoned keys disappear on their own.
--
-- Tokens are the server's clock in microseconds (see next_token); replies
-- carry them as integers, exact below 2^53 (the year 2255).

if redis.replicate_commands then
	-- Redis < 5 replicates scripts verbatim and refuses writes after TIME
	-- unless asked to replicate effects; later versions always do.
	pcall(redis.replicate_commands)
end

local B = KEYS[1]
local LOCK, FENCE, READERS, TOKENS = B .. 'lock', B .. 'fence', B .. 'readers', B .. 'tokens'
local QUEUE, QEXP, CHAN = B .. 'queue', B .. 'queue-exp', B .. 'released'

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

-- parse_hold splits an exclusive hold "<token>:<owner>" or
-- "<token>w:<owner>" into token, owner and whether it is flagged: a flagged
-- hold has blocked someone, so its release must wake waiters.
local function parse_hold(v)
	local i = string.find(v, ':', 1, true)
	if not i then
		return nil, nil, false
	end
	local tok = string.sub(v, 1, i - 1)
	if string.sub(tok, -1) == 'w' then
		return string.sub(tok, 1, -2), string.sub(v, i + 1), true
	end
	return tok, string.sub(v, i + 1), false
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
	return true
end

-- handoff is called when a release has left the key free (no exclusive
-- hold, no live shared hold): it grants the key to the head of the wait
-- queue, or to the run of shared entries at its head, each for as long as
-- its queue entry lives (the waiter's next TryAcquireQueued extends it to
-- its TTL and learns the token), and publishes "g<token>:<owner>" for
-- each, which wakes only the driver that queued that owner (no one else
-- can proceed) and gives it the token without another round trip.
-- It returns whether it granted anything.
local function handoff(now)
	purge_queue(now)
	local q = redis.call('ZRANGE', QUEUE, 0, 63, 'WITHSCORES')
	local granted, readers = false, false
	for i = 1, #q, 2 do
		local o, shared = q[i], tonumber(q[i + 1]) % 2 == 1
		if granted and not shared then
			break
		end
		local exp = tonumber(redis.call('ZSCORE', QEXP, o))
		local tok = next_token()
		if shared then
			redis.call('ZADD', READERS, int(exp), o)
			redis.call('HSET', TOKENS, o, int(tok))
			readers = true
		else
			local ms = exp - now
			if ms < 1 then
				ms = 1
			end
			redis.call('SET', LOCK, int(tok) .. 'w:' .. o, 'PX', int(ms))
		end
		leave_queue(o)
		redis.call('PUBLISH', CHAN, 'g' .. int(tok) .. ':' .. o)
		granted = true
		if not shared then
			break
		end
	end
	if readers then
		settle_readers(now)
	end
	return granted
end

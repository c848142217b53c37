package redisdriver

import (
	"strconv"
	"strings"
)

// Suffixes of the keys of one lock, after "<prefix>{<tag>}:".
const (
	suffixLock      = "lock"
	suffixFence     = "fence"
	suffixReaders   = "readers"
	suffixTokens    = "tokens"
	suffixQueue     = "queue"
	suffixQueueExp  = "queue-exp"
	suffixQueueData = "queue-data"
	suffixQueueNote = "queue-notify"
	suffixChannel   = "released"
)

// hashTag returns the cluster hash tag of key: key with '%', '{' and '}'
// percent-encoded. The encoding is injective, contains no brace, and is
// never empty: the empty key, which the front-end never passes, is "%",
// which no other key yields since every other '%' is followed by two hex
// digits.
func hashTag(key string) string {
	if key == "" {
		return "%"
	}
	if !needsEscape(key) {
		return key
	}
	var b strings.Builder
	b.Grow(len(key) + 8)
	for i := 0; i < len(key); i++ {
		switch c := key[i]; c {
		case '%':
			b.WriteString("%25")
		case '{':
			b.WriteString("%7B")
		case '}':
			b.WriteString("%7D")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// needsEscape reports whether key has a byte hashTag escapes; a loop over
// the bytes costs less than strings.ContainsAny on the hot path.
func needsEscape(key string) bool {
	for i := 0; i < len(key); i++ {
		if c := key[i]; c == '%' || c == '{' || c == '}' {
			return true
		}
	}
	return false
}

// base returns "<prefix>{<tag>}:", the start of every key of a lock and the
// only key the scripts get.
func (d *Driver) base(key string) string {
	return d.prefix + "{" + hashTag(key) + "}:"
}

// keys returns the Redis keys of a lock, which the scripts derive from its
// base (common.lua names them LOCK, FENCE, READERS, TOKENS, QUEUE, QEXP, QDATA and
// QNOTE, in this order; the tests check that both agree).
func (d *Driver) keys(key string) []string {
	b := d.base(key)
	return []string{
		b + suffixLock,
		b + suffixFence,
		b + suffixReaders,
		b + suffixTokens,
		b + suffixQueue,
		b + suffixQueueExp,
		b + suffixQueueData,
		b + suffixQueueNote,
	}
}

// channel returns the pub/sub channel that the scripts publish on (CHAN in
// common.lua).
func (d *Driver) channel(key string) string {
	return d.base(key) + suffixChannel
}

func quote(s string) string { return strconv.Quote(s) }

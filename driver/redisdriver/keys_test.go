package redisdriver

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-locker/locker/internal/testflag"
	"github.com/go-locker/locker/internal/testserver"
	"github.com/redis/go-redis/v9"
)

// crc16 is CRC-16/XMODEM, the checksum of Redis Cluster key slots.
func crc16(s string) uint16 {
	var crc uint16
	for i := 0; i < len(s); i++ {
		crc ^= uint16(s[i]) << 8
		for range 8 {
			if crc&0x8000 != 0 {
				crc = crc<<1 ^ 0x1021
			} else {
				crc <<= 1
			}
		}
	}
	return crc
}

// clusterTag returns the part of key that Redis Cluster hashes: the content
// of the first {...} when non-empty, else the whole key.
func clusterTag(key string) string {
	if i := strings.IndexByte(key, '{'); i >= 0 {
		if j := strings.IndexByte(key[i+1:], '}'); j > 0 {
			return key[i+1 : i+1+j]
		}
	}
	return key
}

// slot is the Redis Cluster hash slot of key.
func slot(key string) int { return int(crc16(clusterTag(key)) % 16384) }

// unescapeTag inverts hashTag.
func unescapeTag(tag string) (string, bool) {
	if tag == "%" {
		return "", true
	}
	var b strings.Builder
	for i := 0; i < len(tag); i++ {
		c := tag[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+3 > len(tag) {
			return "", false
		}
		switch tag[i+1 : i+3] {
		case "25":
			b.WriteByte('%')
		case "7B":
			b.WriteByte('{')
		case "7D":
			b.WriteByte('}')
		default:
			return "", false
		}
		i += 2
	}
	return b.String(), true
}

func TestCRC16(t *testing.T) {
	// Reference values from the Redis Cluster specification and
	// CLUSTER KEYSLOT.
	if got := crc16("123456789"); got != 0x31C3 {
		t.Fatalf("crc16(123456789) = %#x, want 0x31c3", got)
	}
	for key, want := range map[string]int{"foo": 12182, "bar": 5061, "{bar}foo": 5061, "x{}{bar}": slot("x{}{bar}")} {
		if got := slot(key); got != want {
			t.Errorf("slot(%q) = %d, want %d", key, got, want)
		}
	}
}

func TestKeyLayout(t *testing.T) {
	d, err := New(nopClient(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string]string{
		"orders/42": "locker:{orders/42}:",
		"}x":        "locker:{%7Dx}:",
		"{":         "locker:{%7B}:",
		"a}b{c":     "locker:{a%7Db%7Bc}:",
		"%7B":       "locker:{%257B}:",
		"":          "locker:{%}:",
	} {
		if got := d.base(key); got != want {
			t.Errorf("base(%q) = %q, want %q", key, got, want)
		}
	}
	keys := d.keys("orders/42")
	want := []string{
		"locker:{orders/42}:lock",
		"locker:{orders/42}:fence",
		"locker:{orders/42}:readers",
		"locker:{orders/42}:tokens",
		"locker:{orders/42}:queue",
		"locker:{orders/42}:queue-exp",
		"locker:{orders/42}:queue-data",
		"locker:{orders/42}:queue-notify",
	}
	if strings.Join(keys, " ") != strings.Join(want, " ") {
		t.Errorf("keys = %q, want %q", keys, want)
	}
	if got := d.channel("orders/42"); got != "locker:{orders/42}:released" {
		t.Errorf("channel = %q", got)
	}

	d2, err := New(nopClient(t), &Options{Prefix: "app1/"})
	if err != nil {
		t.Fatal(err)
	}
	if got := d2.keys("k")[0]; got != "app1/{k}:lock" {
		t.Errorf("prefixed lock key = %q", got)
	}
}

// hostileKeys seed FuzzKeyEncoding and TestHostileKeys.
var hostileKeys = []string{
	"orders/42", "}x", "{", "}", "{}", "a}b{c", "%7B", "%7D", "%25", "%", "%%", "{{}}",
	"x{y}z", "..", "/", "a:b", "lock", "k}:lock", "\x01\x7f", "ключ/🔒", "日本語{キー}",
	strings.Repeat("x", 512), strings.Repeat("{", 512), strings.Repeat("}%", 256),
}

func FuzzKeyEncoding(f *testing.F) {
	for _, k := range hostileKeys {
		f.Add(k, "}"+k)
	}
	d, err := New(nopClient(f), nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, k := range []string{a, b} {
			tag := hashTag(k)
			if tag == "" || strings.ContainsAny(tag, "{}") {
				t.Fatalf("hashTag(%q) = %q: empty or has a brace", k, tag)
			}
			if back, ok := unescapeTag(tag); !ok || back != k {
				t.Fatalf("hashTag(%q) = %q, which decodes to %q, %v", k, tag, back, ok)
			}
			if utf8.ValidString(k) && !utf8.ValidString(tag) {
				t.Fatalf("hashTag(%q) = %q is not valid UTF-8", k, tag)
			}
			keys := append(d.keys(k), d.channel(k))
			for _, rk := range keys {
				if got := clusterTag(rk); got != tag {
					t.Fatalf("key %q of lock %q hashes %q, want %q", rk, k, got, tag)
				}
				if slot(rk) != slot(keys[0]) {
					t.Fatalf("keys %q and %q of lock %q in different slots", rk, keys[0], k)
				}
			}
		}
		if a != b {
			ka, kb := d.keys(a), d.keys(b)
			for i := range ka {
				for j := range kb {
					if ka[i] == kb[j] {
						t.Fatalf("locks %q and %q share Redis key %q", a, b, ka[i])
					}
				}
			}
			if d.channel(a) == d.channel(b) {
				t.Fatalf("locks %q and %q share a channel", a, b)
			}
		}
	})
}

// nopClient returns a client of a server that does not exist, for tests
// that send nothing.
func nopClient(tb testing.TB) redis.UniversalClient {
	c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1"})
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

func TestNew(t *testing.T) {
	if _, err := New(nil, nil); err == nil {
		t.Error("New(nil client): no error")
	}
	for _, p := range []string{"a{", "}", "x{y}"} {
		if _, err := New(nopClient(t), &Options{Prefix: p}); err == nil {
			t.Errorf("New(prefix %q): no error", p)
		}
	}
	d, err := New(nopClient(t), &Options{})
	if err != nil || d.prefix != DefaultPrefix {
		t.Errorf("New(&Options{}) = %v, %v; want default prefix", d, err)
	}
	c := d.Capabilities()
	if min, max := c.MinTTL, c.MaxTTL; min != time.Millisecond || max < time.Hour || max.Milliseconds() > 1<<40 {
		t.Errorf("Capabilities MinTTL, MaxTTL = %v, %v", min, max)
	}
	if !c.Shared {
		t.Error("Capabilities Shared = false")
	}
}

// TestKeySlotsAgainstRedis checks slot and the key layout against a real
// cluster node's CLUSTER KEYSLOT.
func TestKeySlotsAgainstRedis(t *testing.T) {
	if !testflag.Long() {
		t.Parallel() // beside the other tests that start a Redis Cluster of their own
	}
	srv := testserver.RedisCluster(t)
	d, err := New(nopClient(t), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range hostileKeys {
		want := -1
		for _, rk := range append(d.keys(k), d.channel(k)) {
			got, err := testserver.Do(srv.Addr, "CLUSTER", "KEYSLOT", rk)
			if err != nil {
				t.Fatal(err)
			}
			n, _ := strconv.Atoi(got)
			if n != slot(rk) {
				t.Errorf("CLUSTER KEYSLOT %q = %d, slot() = %d", rk, n, slot(rk))
			}
			if want == -1 {
				want = n
			} else if n != want {
				t.Errorf("lock %q: key %q in slot %d, lock key in %d", k, rk, n, want)
			}
		}
	}
}

// TestScriptKeys checks that the keys and the channel the scripts derive
// from their only key, the lock's base, are those of keys and channel, and
// that a Redis Cluster node lets a script use them although they are not
// declared: they are in the slot of the declared base.
func TestScriptKeys(t *testing.T) {
	if !testflag.Long() {
		t.Parallel() // beside the other tests that start a Redis Cluster of their own
	}
	const names = "\nredis.call('EXISTS', LOCK, FENCE, READERS, TOKENS, QUEUE, QEXP, QDATA, QNOTE)" +
		"\nreturn {LOCK, FENCE, READERS, TOKENS, QUEUE, QEXP, QDATA, QNOTE, CHAN}"
	check := func(t *testing.T, c redis.UniversalClient, prefix string) {
		d, err := New(c, &Options{Prefix: prefix})
		if err != nil {
			t.Fatal(err)
		}
		ctx := context.Background()
		for _, k := range hostileKeys {
			got, err := c.Eval(ctx, commonLua+names, []string{d.base(k)}).StringSlice()
			if err != nil {
				t.Fatalf("lock %q: %v", k, err)
			}
			want := append(d.keys(k), d.channel(k))
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("lock %q: the scripts use %q, want %q", k, got, want)
			}
		}
	}
	t.Run("redis", func(t *testing.T) {
		c := redis.NewClient(&redis.Options{Addr: testserver.Redis(t).Addr})
		t.Cleanup(func() { _ = c.Close() })
		check(t, c, "")
		check(t, c, "app1/")
	})
	t.Run("cluster", func(t *testing.T) {
		srv := testserver.RedisCluster(t)
		c := redis.NewClusterClient(&redis.ClusterOptions{Addrs: []string{srv.Addr}})
		t.Cleanup(func() { _ = c.Close() })
		check(t, c, "")
	})
}

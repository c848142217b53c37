package memcachedriver

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"testing"
	"unicode/utf8"
)

// checkKeys checks the memcached keys of lock key under prefix: both are
// legal memcached keys, distinct, of the kinds the escaped length calls
// for, and reversible (escaped) or the key's SHA-256 (hashed). It returns
// the hold key.
func checkKeys(t *testing.T, prefix, key string) string {
	t.Helper()
	hold, fence := itemKeys(prefix, key)
	for _, k := range []string{hold, fence} {
		if len(k) > MaxKeyLen {
			t.Fatalf("itemKeys(%q, %q): key of %d bytes", prefix, key, len(k))
		}
		for i := 0; i < len(k); i++ {
			if !legalByte(k[i]) {
				t.Fatalf("itemKeys(%q, %q): key %q has byte %#x at %d", prefix, key, k, k[i], i)
			}
		}
		if !strings.HasPrefix(k, prefix) {
			t.Fatalf("itemKeys(%q, %q): key %q lacks the prefix", prefix, key, k)
		}
	}
	if hold == fence {
		t.Fatalf("itemKeys(%q, %q): hold and fence are both %q", prefix, key, hold)
	}
	kind, body := hold[len(prefix):len(prefix)+kindLen], hold[len(prefix)+kindLen:]
	if fence[len(prefix)+kindLen:] != body {
		t.Fatalf("itemKeys(%q, %q): bodies differ: %q, %q", prefix, key, hold, fence)
	}
	escapedLen := 0
	for i := 0; i < len(key); i++ {
		escapedLen++
		if mustEscape(key[i]) {
			escapedLen += 2
		}
	}
	switch kind {
	case kindHold:
		if fence[len(prefix):len(prefix)+kindLen] != kindFence {
			t.Fatalf("itemKeys(%q, %q): fence %q is not of kind %q", prefix, key, fence, kindFence)
		}
		got, err := decodeBody(body)
		if err != nil || got != key {
			t.Fatalf("itemKeys(%q, %q): body %q decodes to %q, %v", prefix, key, body, got, err)
		}
	case kindHoldHashed:
		if fence[len(prefix):len(prefix)+kindLen] != kindFenceHashed {
			t.Fatalf("itemKeys(%q, %q): fence %q is not of kind %q", prefix, key, fence, kindFenceHashed)
		}
		if len(prefix)+kindLen+escapedLen <= MaxKeyLen {
			t.Fatalf("itemKeys(%q, %q): hashed, although the escaped key (%d bytes) fits", prefix, key, escapedLen)
		}
		sum := sha256.Sum256([]byte(key))
		if body != hex.EncodeToString(sum[:]) {
			t.Fatalf("itemKeys(%q, %q): hashed body %q is not the key's SHA-256", prefix, key, body)
		}
	default:
		t.Fatalf("itemKeys(%q, %q): hold %q of unknown kind %q", prefix, key, hold, kind)
	}
	return hold
}

var keySeeds = []string{
	"", "a", "orders/42", "a b", "a%20b", "%", "%%", "%25", "l:x", "f:x", "l#x",
	"tab\there", "nl\nhere", "del\x7f", "ctl\x01\x1f", "ünïcödé", "a\u00a0b", "\u2028",
	strings.Repeat("x", 248), strings.Repeat("x", 241), strings.Repeat("x", 242), strings.Repeat(" ", 80),
	strings.Repeat("é", 256), strings.Repeat("a", 512),
}

// FuzzItemKeys checks that itemKeys maps two different lock keys to
// different memcached keys, under the default prefix and a long one,
// and that every memcached key is legal (see checkKeys).
func FuzzItemKeys(f *testing.F) {
	for _, a := range keySeeds {
		for _, b := range keySeeds[:4] {
			f.Add(a, b)
		}
	}
	prefixes := []string{DefaultPrefix, "p", strings.Repeat("P", maxPrefixLen)}
	f.Fuzz(func(t *testing.T, a, b string) {
		// The front-end passes valid UTF-8 without NUL, up to 512
		// bytes; the encoding is injective on every byte string, so
		// only the length is bounded, to keep the fuzzer's inputs
		// relevant.
		if len(a) > 512 || len(b) > 512 {
			t.Skip()
		}
		for _, p := range prefixes {
			ha, fa := itemKeys(p, a)
			hb, fb := itemKeys(p, b)
			if got := checkKeys(t, p, a); got != ha {
				t.Fatalf("itemKeys(%q, %q) is not deterministic", p, a)
			}
			checkKeys(t, p, b)
			if a != b && (ha == hb || fa == fb) {
				t.Fatalf("itemKeys(%q, ·) maps %q and %q to the same keys %q, %q", p, a, b, ha, fa)
			}
			if ha == fb || fa == hb {
				t.Fatalf("itemKeys(%q, ·): a hold key of %q is a fence key of %q", p, a, b)
			}
		}
	})
}

// TestItemKeys pins the encoding of a few keys.
func TestItemKeys(t *testing.T) {
	long := strings.Repeat("é", 256) // 512 bytes
	sum := sha256.Sum256([]byte(long))
	for _, c := range []struct{ key, hold, fence string }{
		{"orders/42", "locker:l:orders/42", "locker:f:orders/42"},
		{"a b%\x00\x7f", "locker:l:a%20b%25%00%7F", "locker:f:a%20b%25%00%7F"},
		{"ünï", "locker:l:ünï", "locker:f:ünï"},
		{long, "locker:l#" + hex.EncodeToString(sum[:]), "locker:f#" + hex.EncodeToString(sum[:])},
	} {
		h, f := itemKeys(DefaultPrefix, c.key)
		if h != c.hold || f != c.fence {
			t.Errorf("itemKeys(%q) = %q, %q; want %q, %q", c.key, h, f, c.hold, c.fence)
		}
		if !utf8.ValidString(c.key) {
			t.Errorf("bad test key %q", c.key)
		}
	}
	// The longest escaped body fits exactly; one byte more is hashed.
	fits := strings.Repeat("x", MaxKeyLen-len(DefaultPrefix)-kindLen)
	if h, _ := itemKeys(DefaultPrefix, fits); len(h) != MaxKeyLen || !strings.HasPrefix(h, DefaultPrefix+kindHold) {
		t.Errorf("key of %d bytes: hold %q; want it escaped, %d bytes", len(fits), h, MaxKeyLen)
	}
	if h, _ := itemKeys(DefaultPrefix, fits+"x"); !strings.HasPrefix(h, DefaultPrefix+kindHoldHashed) {
		t.Errorf("key of %d bytes: hold %q; want it hashed", len(fits)+1, h)
	}
}

func TestCheckPrefix(t *testing.T) {
	for _, p := range []string{"locker:", "a", strings.Repeat("p", maxPrefixLen), "ü"} {
		if err := checkPrefix(p); err != nil {
			t.Errorf("checkPrefix(%q) = %v", p, err)
		}
	}
	for _, p := range []string{"a b", "a\nb", "a\x7f", strings.Repeat("p", maxPrefixLen+1)} {
		if err := checkPrefix(p); err == nil {
			t.Errorf("checkPrefix(%q) = nil; want an error", p)
		}
	}
}

func TestDecodeBodyRejects(t *testing.T) {
	for _, b := range []string{"%", "%2", "%zz", "%41", "a b", "%2x"} {
		if got, err := decodeBody(b); err == nil {
			t.Errorf("decodeBody(%q) = %q; want an error", b, got)
		}
	}
}

func TestRecordRoundTrip(t *testing.T) {
	for _, r := range []record{
		{token: 1, nonce: 0, end: 1, ttl: 3, owner: "0123456789abcdef0123456789abcdef"},
		{token: 1<<64 - 1, nonce: 1<<64 - 1, end: -5, ttl: maxTTLSeconds, owner: "with spaces and\nnewline"},
		{token: 0, nonce: 42, end: 1700000000000, ttl: 3, owner: ""},
	} {
		got, err := parseRecord(r.encode())
		if err != nil || got != r {
			t.Errorf("parseRecord(encode(%+v)) = %+v, %v", r, got, err)
		}
	}
	for _, v := range []string{"", "1", "2 1 0000000000000000 1 3 o", "1 x 0000000000000000 1 3 o", "1 1 00 1 3 o", "1 1 0000000000000000 1 0 o", "1 1 000000000000000g 1 3 o"} {
		if r, err := parseRecord([]byte(v)); err == nil {
			t.Errorf("parseRecord(%q) = %+v; want an error", v, r)
		}
	}
}

// maxTTLSeconds is MaxTTL in seconds.
const maxTTLSeconds = int64(MaxTTL / 1e9)

package etcddriver

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-locker/locker/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

func TestEscapeKey(t *testing.T) {
	for _, c := range []struct{ in, out string }{
		{"a", "a"},
		{"a/b", "a%2Fb"},
		{"a%2Fb", "a%252Fb"},
		{"%", "%25"},
		{"/", "%2F"},
		{"//", "%2F%2F"},
		{"ключ/锁", "ключ%2F锁"},
		{"a:w/x", "a:w%2Fx"},
	} {
		if got := keyEscaper.Escape(c.in); got != c.out {
			t.Errorf("escapeKey(%q) = %q; want %q", c.in, got, c.out)
		}
		if back, ok := unescapeKey(c.out); !ok || back != c.in {
			t.Errorf("unescapeKey(%q) = %q, %v; want %q", c.out, back, ok, c.in)
		}
	}
	for _, bad := range []string{"a/b", "%", "%2", "%2f", "%41"} {
		if got, ok := unescapeKey(bad); ok {
			t.Errorf("unescapeKey(%q) = %q, true; want false: escapeKey never returns it", bad, got)
		}
	}
}

// TestLockRangesDisjoint checks the property the encoding exists for: a
// lock's entries never fall in another lock's range, so that "a" never
// waits for holders of "a/b" (as etcd's concurrency.Mutex on prefixes "a/"
// and "a/b/" would).
func TestLockRangesDisjoint(t *testing.T) {
	keys := []string{"a", "a/", "a/b", "a/b/c", "ab", "a%2Fb", "a%", "%", "/", "a/w", "a/r", "a/s", "a/w/x", "w", "r", "s"}
	for _, prefix := range []string{"locker/", "", "p"} {
		for _, k1 := range keys {
			for _, k2 := range keys {
				if k1 == k2 {
					continue
				}
				checkDisjoint(t, prefix, k1, k2)
			}
		}
	}
}

func checkDisjoint(t *testing.T, prefix, k1, k2 string) {
	t.Helper()
	b1, b2 := lockBase(prefix, k1), lockBase(prefix, k2)
	if strings.HasPrefix(b1, b2) || strings.HasPrefix(b2, b1) {
		t.Fatalf("bases %q of %q and %q of %q: one is a prefix of the other", b1, k1, b2, k2)
	}
	dirs := []string{writers, readers, counted}
	for _, dir := range dirs {
		e := entryKey(b1, dir, 0x7123456789abcdef)
		for _, dir2 := range dirs {
			start, end := conflictRange(b2, dir2)
			if e >= start && e < end {
				t.Fatalf("entry %q of lock %q lies in the %q conflict range [%q, %q) of lock %q", e, k1, dir2, start, end, k2)
			}
		}
		if !strings.HasPrefix(e, b1) {
			t.Fatalf("entry %q is not below its base %q", e, b1)
		}
	}
}

// FuzzKeyEncoding checks that the encoding is injective and yields no '/',
// and that no two locks' key ranges overlap.
func FuzzKeyEncoding(f *testing.F) {
	for _, s := range []string{"a", "a/b", "a%2Fb", "%", "/", "ключ/锁/🔒", "a/w/", ""} {
		f.Add(s, s+"/")
	}
	f.Fuzz(func(t *testing.T, k1, k2 string) {
		if !utf8.ValidString(k1) || !utf8.ValidString(k2) {
			t.Skip()
		}
		e1, e2 := keyEscaper.Escape(k1), keyEscaper.Escape(k2)
		if strings.Contains(e1, "/") {
			t.Fatalf("escapeKey(%q) = %q contains '/'", k1, e1)
		}
		if back, ok := unescapeKey(e1); !ok || back != k1 {
			t.Fatalf("unescapeKey(escapeKey(%q)) = %q, %v", k1, back, ok)
		}
		if k1 == k2 {
			return
		}
		if e1 == e2 {
			t.Fatalf("escapeKey(%q) == escapeKey(%q) == %q", k1, k2, e1)
		}
		checkDisjoint(t, "locker/", k1, k2)
	})
}

func TestConflictRange(t *testing.T) {
	b := lockBase("p/", "k")
	s, e := conflictRange(b, writers)
	if s != "p/k/" || e != clientv3.GetPrefixRangeEnd("p/k/") {
		t.Errorf("exclusive range [%q, %q)", s, e)
	}
	if s2, e2 := conflictRange(b, counted); s2 != s || e2 != e {
		t.Errorf("counted range [%q, %q); want the exclusive one", s2, e2)
	}
	// An uncounted shared entry looks at the counted and the exclusive
	// entries, not at the other uncounted shared ones.
	s, e = conflictRange(b, readers)
	if s != "p/k/s/" || e != "p/k/w0" {
		t.Errorf("shared range [%q, %q)", s, e)
	}
	for _, c := range []struct {
		k  string
		in bool
	}{{"p/k/r/000000000000001f", false}, {"p/k/s/000000000000001f", true}, {"p/k/w/000000000000001f", true}} {
		if in := c.k >= s && c.k < e; in != c.in {
			t.Errorf("%q in the shared range: %v; want %v", c.k, in, c.in)
		}
	}
	if k := entryKey(b, readers, 0x1f); k != "p/k/r/000000000000001f" || keyDir(k) != readers {
		t.Errorf("shared entry %q", k)
	}
	if k := entryKey(b, counted, 0x1f); k != "p/k/s/000000000000001f" || keyDir(k) != counted {
		t.Errorf("counted entry %q", k)
	}
	if k := entryKey(b, writers, 0x7fffffffffffffff); k != "p/k/w/7fffffffffffffff" || keyDir([]byte(k)) != writers {
		t.Errorf("exclusive entry %q", k)
	}
}

// TestEntryValue checks the encoding of entry values, with and without a
// limit and a value (of any bytes).
func TestEntryValue(t *testing.T) {
	d := &Driver{id: "0123456789abcdef"}
	const o = "00112233445566778899aabbccddeeff"
	for _, req := range []driver.Request{
		{Owner: o},
		{Owner: o, Mode: driver.Shared},
		{Owner: o, Mode: driver.Shared, Limit: 4, Weight: 3},
		{Owner: o, Value: "leader-1"},
		{Owner: o, Mode: driver.Shared, Limit: 1 << 62, Weight: 1, Value: "a\x00b/c,\x00\xff"},
	} {
		v := d.entryValue(req)
		if req.Limit == 0 && req.Value == "" && v != d.id+"/"+o {
			t.Errorf("entryValue(%+v) = %q; want the plain form", req, v)
		}
		m := parseValue([]byte(v))
		if m.owner != o || m.limit != req.Limit || m.weight != req.Weight || m.value != req.Value {
			t.Errorf("parseValue(entryValue(%+v)) = %+v", req, m)
		}
		if !isOwner([]byte(v), o) || isOwner([]byte(v), o[:31]) || parseValue([]byte(v)).owner != o {
			t.Errorf("isOwner/parseValue of %q", v)
		}
		if s := entrySentinel("p/", []byte("p/k/s/000000000000001f"), []byte(v)); s != "p/"+sentinelDir+d.id+"/1f" {
			t.Errorf("entrySentinel of %q = %q", v, s)
		}
	}
}

// unescapeKey inverts escapeKey. It reports false for a string that
// escapeKey cannot have returned.
func unescapeKey(s string) (string, bool) {
	k, err := keyEscaper.Unescape(s)
	return k, err == nil
}

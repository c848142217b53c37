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
		if got := escapeKey(c.in); got != c.out {
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
	keys := []string{"a", "a/", "a/b", "a/b/c", "ab", "a%2Fb", "a%", "%", "/", "a/w", "a/r", "a/w/x", "w", "r"}
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
	for _, m := range []driver.Mode{driver.Exclusive, driver.Shared} {
		e := entryKey(b1, m, 0x7123456789abcdef)
		for _, m2 := range []driver.Mode{driver.Exclusive, driver.Shared} {
			start, end := conflictRange(b2, m2)
			if e >= start && e < end {
				t.Fatalf("entry %q of lock %q lies in the %v conflict range [%q, %q) of lock %q", e, k1, m2, start, end, k2)
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
		e1, e2 := escapeKey(k1), escapeKey(k2)
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
	s, e := conflictRange(b, driver.Exclusive)
	if s != "p/k/" || e != clientv3.GetPrefixRangeEnd("p/k/") {
		t.Errorf("exclusive range [%q, %q)", s, e)
	}
	s, e = conflictRange(b, driver.Shared)
	if s != "p/k/w/" || e != "p/k/w0" {
		t.Errorf("shared range [%q, %q)", s, e)
	}
	if k := entryKey(b, driver.Shared, 0x1f); k != "p/k/r/000000000000001f" {
		t.Errorf("shared entry %q", k)
	}
	if k := entryKey(b, driver.Exclusive, 0x7fffffffffffffff); k != "p/k/w/7fffffffffffffff" {
		t.Errorf("exclusive entry %q", k)
	}
}

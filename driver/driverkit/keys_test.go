package driverkit_test

import (
	"testing"

	"github.com/go-locker/locker/driver/driverkit"
)

// noSlash keeps every byte but '/'.
var noSlash = driverkit.Escaper{Keep: func(c byte) bool { return c != '/' }}

func TestEscaper(t *testing.T) {
	for _, c := range []struct{ in, out string }{
		{"", ""},
		{"a", "a"},
		{"a/b", "a%2Fb"},
		{"a%2Fb", "a%252Fb"},
		{"%", "%25"},
		{"//", "%2F%2F"},
		{"ключ/锁", "ключ%2F锁"},
	} {
		if got := noSlash.Escape(c.in); got != c.out {
			t.Errorf("Escape(%q) = %q; want %q", c.in, got, c.out)
		}
		if n := noSlash.Len(c.in); n != len(c.out) {
			t.Errorf("Len(%q) = %d; want %d", c.in, n, len(c.out))
		}
		if got := string(noSlash.Append([]byte("p:"), c.in)); got != "p:"+c.out {
			t.Errorf("Append(p:, %q) = %q; want %q", c.in, got, "p:"+c.out)
		}
		if got := noSlash.Concat("p:", c.in, "/"); got != "p:"+c.out+"/" {
			t.Errorf("Concat(p:, %q, /) = %q; want %q", c.in, got, "p:"+c.out+"/")
		}
		if n := testing.AllocsPerRun(10, func() { _ = noSlash.Concat("p:", c.in, "/") }); n > 1 {
			t.Errorf("Concat(p:, %q, /): %v allocations; want at most 1", c.in, n)
		}
		if back, err := noSlash.Unescape(c.out); err != nil || back != c.in {
			t.Errorf("Unescape(%q) = %q, %v; want %q", c.out, back, err, c.in)
		}
	}
	// Names Escape never returns: a byte that must be escaped, a
	// truncated or lower-case escape, an escaped byte that keeps.
	for _, bad := range []string{"a/b", "%", "%2", "%2f", "%41", "%G0"} {
		if got, err := noSlash.Unescape(bad); err == nil {
			t.Errorf("Unescape(%q) = %q, nil; want an error", bad, got)
		}
	}
}

func TestUnhex(t *testing.T) {
	for in, want := range map[string]string{"": "", "a": "a", "%41": "A", "%2E%2Fx": "./x", "%00": "\x00", "%FF": "\xff"} {
		if got, err := driverkit.Unhex(in); err != nil || got != want {
			t.Errorf("Unhex(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"%", "%4", "%4g", "x%zz"} {
		if got, err := driverkit.Unhex(bad); err == nil {
			t.Errorf("Unhex(%q) = %q, nil; want an error", bad, got)
		}
	}
}

// FuzzEscaper checks that escaping is injective and that Unescape inverts
// it.
func FuzzEscaper(f *testing.F) {
	f.Add("a/b%2F", "a%2Fb")
	f.Fuzz(func(t *testing.T, a, b string) {
		ea, eb := noSlash.Escape(a), noSlash.Escape(b)
		if a != b && ea == eb {
			t.Fatalf("%q and %q both escape to %q", a, b, ea)
		}
		if back, err := noSlash.Unescape(ea); err != nil || back != a {
			t.Fatalf("Unescape(Escape(%q)) = %q, %v", a, back, err)
		}
		if k, err := noSlash.Unescape(a); err == nil && noSlash.Escape(k) != a {
			t.Fatalf("Unescape(%q) = %q, which escapes to %q", a, k, noSlash.Escape(k))
		}
	})
}

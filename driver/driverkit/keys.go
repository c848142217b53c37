package driverkit

import (
	"errors"
	"fmt"
	"strings"
)

// An Escaper percent-encodes lock keys into names that a backend with a
// restricted alphabet accepts (an etcd key segment, a ZooKeeper node, a
// memcached key): a byte for which Keep reports true stands for itself;
// '%', and every other byte, is written '%' and two upper-case hex
// digits. The mapping is injective, and Unescape inverts it.
type Escaper struct {
	// Keep reports whether byte c may stand for itself. '%' never does.
	Keep func(c byte) bool
}

const upperHex = "0123456789ABCDEF"

// keeps reports whether c is written as itself.
func (e Escaper) keeps(c byte) bool { return c != '%' && e.Keep(c) }

// Len returns len(e.Escape(key)), without building it.
func (e Escaper) Len(key string) int {
	n := len(key)
	for i := 0; i < len(key); i++ {
		if !e.keeps(key[i]) {
			n += 2
		}
	}
	return n
}

// Append appends e.Escape(key) to b and returns the result.
func (e Escaper) Append(b []byte, key string) []byte {
	for i := 0; i < len(key); i++ {
		if c := key[i]; e.keeps(c) {
			b = append(b, c)
		} else {
			b = append(b, '%', upperHex[c>>4], upperHex[c&15])
		}
	}
	return b
}

// Write writes e.Escape(key) to b, for a caller that builds a longer
// name in one allocation.
func (e Escaper) Write(b *strings.Builder, key string) {
	for i := 0; i < len(key); i++ {
		if c := key[i]; e.keeps(c) {
			b.WriteByte(c)
		} else {
			b.WriteByte('%')
			b.WriteByte(upperHex[c>>4])
			b.WriteByte(upperHex[c&15])
		}
	}
}

// Escape returns the name of key: key itself when every byte keeps, with
// no allocation.
func (e Escaper) Escape(key string) string {
	n := e.Len(key)
	if n == len(key) {
		return key
	}
	return string(e.Append(make([]byte, 0, n), key))
}

// Concat returns prefix + e.Escape(key) + suffix in one allocation.
func (e Escaper) Concat(prefix, key, suffix string) string {
	var b strings.Builder
	b.Grow(len(prefix) + e.Len(key) + len(suffix))
	b.WriteString(prefix)
	e.Write(&b, key)
	b.WriteString(suffix)
	return b.String()
}

// Unescape inverts Escape: it returns the key whose name is s, or an error
// if Escape never returns s (a malformed escape, an escaped byte that
// keeps, a byte that does not).
func (e Escaper) Unescape(s string) (string, error) {
	key, err := Unhex(s)
	if err != nil {
		return "", err
	}
	if e.Escape(key) != s {
		return "", fmt.Errorf("%q is not an escaped key: it would be written %q", s, e.Escape(key))
	}
	return key, nil
}

// errTruncated reports a '%' without two hex digits after it.
var errTruncated = errors.New("truncated escape")

// Unhex decodes every '%' and two upper-case hex digits of s into the byte
// they write, and leaves the other bytes as they are. It does not check
// that s is as an [Escaper] writes it (Unescape does): a driver whose names
// follow extra rules decodes with Unhex and checks those itself.
func Unhex(s string) (string, error) {
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b = append(b, s[i])
			continue
		}
		if i+2 >= len(s) {
			return "", errTruncated
		}
		hi, lo := unhex(s[i+1]), unhex(s[i+2])
		if hi < 0 || lo < 0 {
			return "", fmt.Errorf("bad escape %q", s[i:i+3])
		}
		b = append(b, byte(hi<<4|lo))
		i += 2
	}
	return string(b), nil
}

// unhex returns the value of the upper-case hex digit c, or -1.
func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

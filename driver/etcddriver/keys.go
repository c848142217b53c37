package etcddriver

import (
	"strconv"
	"strings"

	"github.com/go-locker/locker/driver"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Entry keys of one lock, below its base "<prefix><escaped key>/":
//
//	w/<lease>  an exclusive entry (a writer: holder or waiter)
//	r/<lease>  a shared entry (a reader: holder or waiter)
//
// where <lease> is the entry's lease ID in 16 hex digits, and the value is
// "<driver id>/<owner>": the ID of the Driver that made it (which names its
// lease's sentinel, see loss.go) and the owner. A lease carries one entry at a time, so the key is unique
// among live entries; and as the driver reuses its idle leases, a key
// locked over and over reuses a few etcd keys instead of leaving a new
// tombstone in etcd's index with every hold (which every range read of the
// lock would walk until the next compaction).
const (
	writers = "w/"
	readers = "r/"
)

// escapeKey escapes '%' and '/' in key as %25 and %2F. The result never
// contains '/', and unescaping it gives key back, so the mapping is
// injective.
func escapeKey(key string) string {
	n := strings.Count(key, "%") + strings.Count(key, "/")
	if n == 0 {
		return key
	}
	var b strings.Builder
	b.Grow(len(key) + 2*n)
	for i := 0; i < len(key); i++ {
		switch c := key[i]; c {
		case '%':
			b.WriteString("%25")
		case '/':
			b.WriteString("%2F")
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// unescapeKey inverts escapeKey. It reports false for a string that
// escapeKey cannot have returned.
func unescapeKey(s string) (string, bool) {
	if strings.IndexByte(s, '/') >= 0 {
		return "", false
	}
	if strings.IndexByte(s, '%') < 0 {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '%' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "%25"):
			b.WriteByte('%')
		case strings.HasPrefix(s[i:], "%2F"):
			b.WriteByte('/')
		default:
			return "", false
		}
		i += 2
	}
	return b.String(), true
}

// lockBase returns the base of key's entries: prefix, the escaped key,
// and a '/' that ends it. As the escaped key has no '/', no base is a
// prefix of another, so the key ranges of two locks never overlap.
func lockBase(prefix, key string) string {
	return prefix + escapeKey(key) + "/"
}

// modeDir returns the sub-prefix of entries in mode m.
func modeDir(m driver.Mode) string {
	if m == driver.Shared {
		return readers
	}
	return writers
}

// entryKey returns the key of the entry in mode m on lease below base.
func entryKey(base string, m driver.Mode, lease clientv3.LeaseID) string {
	const hex = "0123456789abcdef"
	var b [16]byte
	for i := range b {
		b[i] = hex[uint64(lease)>>(60-4*i)&0xf]
	}
	return base + modeDir(m) + string(b[:])
}

// conflictRange returns the range [start, end) of the entries that an
// entry in mode m waits for: every entry of the lock for Exclusive, the
// exclusive entries for Shared.
func conflictRange(base string, m driver.Mode) (start, end string) {
	if m == driver.Shared {
		start = base + writers
	} else {
		start = base
	}
	return start, clientv3.GetPrefixRangeEnd(start)
}

// entryValue returns the value of an entry of owner made by the driver.
func (d *Driver) entryValue(owner string) string { return d.id + "/" + owner }

// valueOwner returns the owner in an entry's value.
func valueOwner(v []byte) string {
	for i, c := range v {
		if c == '/' {
			return string(v[i+1:])
		}
	}
	return ""
}

// isOwner reports whether an entry's value names owner.
func isOwner(v []byte, owner string) bool {
	i := 0
	for i < len(v) && v[i] != '/' {
		i++
	}
	return i < len(v) && string(v[i+1:]) == owner
}

// entrySentinel returns the sentinel key of the lease of the entry k with
// value v, or "" if they are malformed.
func entrySentinel(prefix string, k, v []byte) string {
	i := 0
	for i < len(v) && v[i] != '/' {
		i++
	}
	if i == len(v) || len(k) < 16 {
		return ""
	}
	lease, err := strconv.ParseUint(string(k[len(k)-16:]), 16, 64)
	if err != nil {
		return ""
	}
	return prefix + sentinelDir + string(v[:i]) + "/" + strconv.FormatUint(lease, 16)
}

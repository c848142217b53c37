package etcddriver

import (
	"bytes"
	"strconv"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The sub-prefixes of a lock's entries (see docs/etcddriver.md). "s/"
// sorts between "r/" and "w/", so that the entries an uncounted shared
// entry must look at are one range.
const (
	readers = "r/"
	counted = "s/"
	writers = "w/"
)

// keyEscaper escapes '%' and '/' in a key as %25 and %2F. The result
// never contains '/', and unescaping it gives the key back, so the mapping
// is injective.
var keyEscaper = driverkit.Escaper{Keep: func(c byte) bool { return c != '/' }}

// lockBase returns the base of key's entries: prefix, the escaped key,
// and a '/' that ends it. As the escaped key has no '/', no base is a
// prefix of another, so the key ranges of two locks never overlap.
func lockBase(prefix, key string) string {
	return keyEscaper.Concat(prefix, key, "/") // one allocation
}

// reqDir returns the sub-prefix of the entries of req: counted for a
// counted Shared request (Limit > 0).
func reqDir(req driver.Request) string {
	switch {
	case req.Mode != driver.Shared:
		return writers
	case req.Limit > 0:
		return counted
	}
	return readers
}

// keyDir returns the sub-prefix (readers, counted or writers) of the entry
// key k, whose last 18 bytes are "<dir><16 hex digits>".
func keyDir[S ~string | ~[]byte](k S) string {
	if len(k) < 18 {
		return ""
	}
	return string(k[len(k)-18 : len(k)-16])
}

// entryKey returns the key of the entry in dir on lease below base.
func entryKey(base, dir string, lease clientv3.LeaseID) string {
	const hex = "0123456789abcdef"
	var b [16]byte
	for i := range b {
		b[i] = hex[uint64(lease)>>(60-4*i)&0xf]
	}
	return base + dir + string(b[:])
}

// conflictRange returns the range [start, end) of the entries that an
// entry in dir must look at to be granted: every entry of the lock for an
// exclusive or a counted one, the counted and exclusive ones for an
// uncounted shared one.
func conflictRange(base, dir string) (start, end string) {
	if dir == readers {
		return base + counted, clientv3.GetPrefixRangeEnd(base + writers)
	}
	return base, clientv3.GetPrefixRangeEnd(base)
}

// valueSep separates the parts of an entry's value (see docs/etcddriver.md).
const valueSep = 0

// entryValue returns the value of the entry of req made by the driver.
func (d *Driver) entryValue(req driver.Request) string {
	if req.Limit == 0 && req.Value == "" {
		return d.id + "/" + req.Owner
	}
	sep := string(rune(valueSep))
	return d.id + "/" + req.Owner + sep + strconv.FormatInt(req.Limit, 10) + "," + strconv.FormatInt(req.Weight, 10) + sep + req.Value
}

// entryMeta is what an entry's value says besides its driver.
type entryMeta struct {
	owner         string
	limit, weight int64
	value         string
}

// parseValue parses an entry's value (see entryValue). A malformed limit
// or weight reads as 0.
func parseValue(v []byte) entryMeta {
	_, rest, ok := bytes.Cut(v, []byte{'/'})
	if !ok {
		return entryMeta{}
	}
	owner, rest, _ := bytes.Cut(rest, []byte{valueSep})
	m := entryMeta{owner: string(owner)}
	if lw, val, ok := bytes.Cut(rest, []byte{valueSep}); ok {
		if l, w, ok := bytes.Cut(lw, []byte{','}); ok {
			m.limit, _ = strconv.ParseInt(string(l), 10, 64)
			m.weight, _ = strconv.ParseInt(string(w), 10, 64)
		}
		m.value = string(val)
	}
	return m
}

// isOwner reports whether an entry's value names owner.
func isOwner(v []byte, owner string) bool {
	_, rest, ok := bytes.Cut(v, []byte{'/'})
	o, _, _ := bytes.Cut(rest, []byte{valueSep})
	return ok && string(o) == owner
}

// entrySentinel returns the sentinel key of the lease of the entry k with
// value v, or "" if they are malformed.
func entrySentinel(prefix string, k, v []byte) string {
	i := bytes.IndexByte(v, '/')
	if i < 0 || len(k) < 16 {
		return ""
	}
	lease, err := strconv.ParseUint(string(k[len(k)-16:]), 16, 64)
	if err != nil {
		return ""
	}
	return prefix + sentinelDir + string(v[:i]) + "/" + strconv.FormatUint(lease, 16)
}

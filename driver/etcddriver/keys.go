package etcddriver

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Entry keys of one lock, below its base "<prefix><escaped key>/":
//
//	r/<lease>  an uncounted shared entry (a reader: holder or waiter)
//	s/<lease>  a counted shared entry (a semaphore permit: holder or waiter)
//	w/<lease>  an exclusive entry (a writer: holder or waiter)
//
// where <lease> is the entry's lease ID in 16 hex digits, and the value is
// described at entryValue. A lease carries one entry at a time, so the
// key is unique among live entries; and as the driver reuses its idle
// leases, a key locked over and over reuses a few etcd keys instead of
// leaving a new tombstone in etcd's index with every hold (which every
// range read of the lock would walk until the next compaction). "s/" sorts
// between "r/" and "w/", so that the entries an uncounted shared entry
// must look at (counted and exclusive ones) are one range.
const (
	readers = "r/"
	counted = "s/"
	writers = "w/"
)

// keyEscaper escapes '%' and '/' in a key as %25 and %2F. The result
// never contains '/', and unescaping it gives the key back, so the mapping
// is injective.
var keyEscaper = driverkit.Escaper{Keep: func(c byte) bool { return c != '/' }}

// escapeKey returns key escaped by keyEscaper.
func escapeKey(key string) string { return keyEscaper.Escape(key) }

// unescapeKey inverts escapeKey. It reports false for a string that
// escapeKey cannot have returned.
func unescapeKey(s string) (string, bool) {
	k, err := keyEscaper.Unescape(s)
	return k, err == nil
}

// lockBase returns the base of key's entries: prefix, the escaped key,
// and a '/' that ends it. As the escaped key has no '/', no base is a
// prefix of another, so the key ranges of two locks never overlap.
func lockBase(prefix, key string) string {
	return prefix + escapeKey(key) + "/"
}

// modeDir returns the sub-prefix of uncounted entries in mode m.
func modeDir(m driver.Mode) string {
	if m == driver.Shared {
		return readers
	}
	return writers
}

// reqDir returns the sub-prefix of the entries of req: counted for a
// counted Shared request (Limit > 0).
func reqDir(req driver.Request) string {
	if req.Limit > 0 && req.Mode == driver.Shared {
		return counted
	}
	return modeDir(req.Mode)
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

// An entry's value is
//
//	<driver id>/<owner>
//
// for an entry with neither a limit nor a value (the exclusive and
// uncounted shared entries of package locker's mutexes), and
//
//	<driver id>/<owner> NUL <limit> "," <weight> NUL <value>
//
// otherwise: the limit and the weight in decimal (both 0 for an uncounted
// entry), and the request's value, any bytes, to the end. The driver ID is
// 16 hex digits and names the lease's sentinel (see loss.go); owners have
// no NUL (package locker makes them of 32 hex digits).
const valueSep = 0

// entryValue returns the value of the entry of req made by the driver.
func (d *Driver) entryValue(req driver.Request) string {
	if req.Limit == 0 && req.Value == "" {
		return d.id + "/" + req.Owner
	}
	var b strings.Builder
	b.Grow(len(d.id) + len(req.Owner) + len(req.Value) + 24)
	b.WriteString(d.id)
	b.WriteByte('/')
	b.WriteString(req.Owner)
	b.WriteByte(valueSep)
	b.WriteString(strconv.FormatInt(req.Limit, 10))
	b.WriteByte(',')
	b.WriteString(strconv.FormatInt(req.Weight, 10))
	b.WriteByte(valueSep)
	b.WriteString(req.Value)
	return b.String()
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
	i := bytes.IndexByte(v, '/')
	if i < 0 {
		return entryMeta{}
	}
	rest := v[i+1:]
	j := bytes.IndexByte(rest, valueSep)
	if j < 0 {
		return entryMeta{owner: string(rest)}
	}
	m := entryMeta{owner: string(rest[:j])}
	rest = rest[j+1:]
	if j = bytes.IndexByte(rest, valueSep); j < 0 {
		return m
	}
	lw, val := rest[:j], rest[j+1:]
	if c := bytes.IndexByte(lw, ','); c >= 0 {
		m.limit, _ = strconv.ParseInt(string(lw[:c]), 10, 64)
		m.weight, _ = strconv.ParseInt(string(lw[c+1:]), 10, 64)
	}
	m.value = string(val)
	return m
}

// valueOwner returns the owner in an entry's value.
func valueOwner(v []byte) string { return parseValue(v).owner }

// isOwner reports whether an entry's value names owner.
func isOwner(v []byte, owner string) bool {
	i := bytes.IndexByte(v, '/')
	if i < 0 {
		return false
	}
	rest := v[i+1:]
	if j := bytes.IndexByte(rest, valueSep); j >= 0 {
		rest = rest[:j]
	}
	return string(rest) == owner
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

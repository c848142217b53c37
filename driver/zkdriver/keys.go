package zkdriver

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
)

// keySafe reports whether byte c stands for itself in an encoded key: the
// ASCII letters and digits and the punctuation of RFC 3986 path segments
// except '%', which escapes.
func keySafe(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.IndexByte("-._~!$&'()*+,;=:@", c) >= 0
}

// nameEscaper writes the bytes outside keySafe of a znode name %XX.
var nameEscaper = driverkit.Escaper{Keep: keySafe}

// Names of the keys that writeKey does not merely escape.
const (
	emptyName     = "%"           // the empty key, which the front-end never passes
	zookeeperName = "%7Aookeeper" // "zookeeper", which ZooKeeper reserves
	dotEscape     = "%2E"         // a '.' that starts a key
)

// writeKey writes the znode name of key to b, at most 3*len(key)+2 bytes:
// one path segment ZooKeeper accepts, never "." nor ".." nor "zookeeper".
// Bytes outside keySafe are written %XX, a leading '.' %2E. The mapping is
// injective (decodeKey, in the tests, inverts it).
func writeKey(b *strings.Builder, key string) {
	switch {
	case key == "":
		b.WriteString(emptyName)
	case key == "zookeeper":
		b.WriteString(zookeeperName)
	case key[0] == '.':
		b.WriteString(dotEscape)
		nameEscaper.Write(b, key[1:])
	default:
		nameEscaper.Write(b, key)
	}
}

// protectedPrefix starts every lock node's name (see docs/zkdriver.md):
// with the owner after it, a protected node in Curator's sense, found
// again by its owner after a create whose reply was lost.
const protectedPrefix = "_c_"

// errInvalidOwner: an owner is 1 to 64 ASCII letters and digits (the
// front-end's are 32 hex digits); parseNode tells Curator's ids by it.
var errInvalidOwner = errors.New("zkdriver: invalid owner: want 1 to 64 ASCII letters and digits")

func checkOwner(owner string) error {
	if owner == "" || len(owner) > 64 {
		return errInvalidOwner
	}
	for i := 0; i < len(owner); i++ {
		c := owner[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9') {
			return errInvalidOwner
		}
	}
	return nil
}

// nodePrefix returns the name of owner's lock node in mode, without the
// sequence number; limit and weight are a counted node's (0 for others).
func nodePrefix(owner string, m driver.Mode, limit, weight int64) string {
	if limit > 0 {
		owner += "." + strconv.FormatInt(limit, 10) + "." + strconv.FormatInt(weight, 10)
	}
	return protectedPrefix + owner + modeInfix(m)
}

// modeInfix returns what follows the owner in a lock node's name.
func modeInfix(m driver.Mode) string {
	if m == driver.Shared {
		return "-r-"
	}
	return "-w-"
}

// child is one parsed child of a lock's parent node.
type child struct {
	name  string
	owner string
	mode  driver.Mode
	seq   int64
	// limit and weight are a counted node's; 0 for the others.
	limit, weight int64
	// foreign marks a node this driver did not write (see parseNode):
	// held for as long as its session lives, never judged by a lease.
	foreign bool
	// curator marks a foreign node named by a Curator lock recipe.
	curator bool
}

// parseCounted reads a counted node's id, "<owner>.<limit>.<weight>",
// into c; it reports false for an id of another form.
func parseCounted(c *child, id string) bool {
	j := strings.IndexByte(id, '.')
	lim, wt, ok := strings.Cut(id[j+1:], ".")
	if j <= 0 || !ok || c.mode != driver.Shared {
		return false
	}
	c.owner = id[:j]
	if c.limit, ok = parseCount(lim); !ok {
		return false
	}
	c.weight, ok = parseCount(wt)
	return ok && c.weight <= c.limit
}

// parseCount parses a positive limit or weight as nodePrefix writes it.
func parseCount(s string) (int64, bool) {
	if s == "" || s[0] < '1' || s[0] > '9' { // no sign, no leading 0
		return 0, false
	}
	n, err := strconv.ParseInt(s, 10, 64)
	return n, err == nil
}

// encodeData returns a node's data: its lease length in whole
// milliseconds, rounded up, and, when value is not empty, a newline and
// the value.
func encodeData(ttl time.Duration, value string) []byte {
	return appendData(make([]byte, 0, 12+len(value)), ttl, value)
}

// appendData appends a node's data (see encodeData) to b.
func appendData(b []byte, ttl time.Duration, value string) []byte {
	ms := (ttl + time.Millisecond - 1) / time.Millisecond
	b = strconv.AppendInt(b, int64(ms), 10)
	if value != "" {
		b = append(b, '\n')
		b = append(b, value...)
	}
	return b
}

// decodeTTL parses the lease length of a node's data; it reports false for
// data the driver did not write.
func decodeTTL(data []byte) (time.Duration, bool) {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		data = data[:i]
	}
	ms, err := strconv.ParseInt(string(data), 10, 64)
	if err != nil || ms <= 0 || ms > int64(maxDataTTL/time.Millisecond) {
		return 0, false
	}
	return time.Duration(ms) * time.Millisecond, true
}

// decodeValue returns the value in a node's data, or "".
func decodeValue(data []byte) string {
	if i := bytes.IndexByte(data, '\n'); i >= 0 {
		return string(data[i+1:])
	}
	return ""
}

const maxDataTTL = 1000 * 24 * time.Hour

// checkRoot validates a root path: absolute, no empty, "." or ".."
// segment, no trailing slash (except the root "/" itself), no character
// ZooKeeper rejects, and not in ZooKeeper's reserved /zookeeper tree.
func checkRoot(root string) error {
	bad := func(why string) error { return fmt.Errorf("zkdriver: invalid root %q: %s", root, why) }
	if !strings.HasPrefix(root, "/") {
		return bad("not absolute")
	}
	if root == "/" {
		return nil
	}
	if strings.HasSuffix(root, "/") {
		return bad("trailing slash")
	}
	if !utf8.ValidString(root) {
		return bad("not valid UTF-8")
	}
	for _, seg := range strings.Split(root[1:], "/") {
		switch seg {
		case "":
			return bad("empty segment")
		case ".", "..":
			return bad("relative segment")
		}
		for _, r := range seg {
			if r <= 0x1f || (r >= 0x7f && r <= 0x9f) || (r >= 0xd800 && r <= 0xf8ff) || r >= 0xfff0 {
				return bad("reserved character")
			}
		}
	}
	if root == "/zookeeper" || strings.HasPrefix(root, "/zookeeper/") {
		return bad("ZooKeeper's reserved tree")
	}
	return nil
}

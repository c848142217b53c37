package memcachedriver

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"

	"github.com/go-locker/locker/driver/driverkit"
)

// MaxKeyLen is the longest key memcached accepts, in bytes.
const MaxKeyLen = 250

// The kinds of items of a lock, written after the prefix: the hold and the
// fence counter, each with its lock key escaped or, when the escaped key
// does not fit, hashed. The four are distinct strings of the same length,
// so no key of one kind is a key of another.
const (
	kindHold        = "l:"
	kindFence       = "f:"
	kindHoldHashed  = "l#"
	kindFenceHashed = "f#"
	kindLen         = 2
)

// hashedLen is the length of a hashed key's body: SHA-256 in hex.
const hashedLen = 2 * sha256.Size

// maxPrefixLen is the longest prefix that leaves room for a hashed key.
const maxPrefixLen = MaxKeyLen - kindLen - hashedLen

// legalByte reports whether memcached's text protocol (and gomemcache)
// accept b in a key: no control characters, no space, no DEL.
func legalByte(b byte) bool { return b > ' ' && b != 0x7f }

// mustEscape reports whether b is written as %XX in a key's body.
func mustEscape(b byte) bool { return !legalByte(b) || b == '%' }

// bodyEscaper writes the body of an escaped key (see itemKeys).
var bodyEscaper = driverkit.Escaper{Keep: legalByte}

// checkPrefix reports why p cannot start the driver's keys, or nil.
func checkPrefix(p string) error {
	if len(p) > maxPrefixLen {
		return fmt.Errorf("prefix of %d bytes is longer than %d", len(p), maxPrefixLen)
	}
	for i := 0; i < len(p); i++ {
		if !legalByte(p[i]) {
			return fmt.Errorf("prefix %q contains byte %#x, which memcached keys cannot contain", p, p[i])
		}
	}
	return nil
}

// itemKeys returns the memcached keys of the hold and of the fence
// counter of lock key.
//
// The body of both is key with every byte that memcached keys cannot hold
// (control characters, space, DEL) and '%' written as '%' and two
// upper-case hex digits, which is injective and reversible
// ([decodeBody]), when the result fits in MaxKeyLen; otherwise it is the
// hex SHA-256 of key, under kinds of its own. See the package
// documentation for why hashing is needed and why it is safe.
func itemKeys(prefix, key string) (hold, fence string) {
	n := bodyEscaper.Len(key)
	if len(prefix)+kindLen+n > MaxKeyLen {
		sum := sha256.Sum256([]byte(key))
		body := hex.EncodeToString(sum[:])
		return prefix + kindHoldHashed + body, prefix + kindFenceHashed + body
	}
	b := make([]byte, 0, len(prefix)+kindLen+n)
	b = append(b, prefix...)
	b = append(b, kindHold...)
	start := len(b)
	b = bodyEscaper.Append(b, key)
	hold = string(b)
	copy(b[start-kindLen:], kindFence)
	return hold, string(b)
}

const hexDigits = "0123456789ABCDEF"

// decodeBody reverses the escaping of itemKeys: it returns the lock key
// whose escaped body is body. It exists to show, in tests, that the
// escaping is injective.
func decodeBody(body string) (string, error) { return bodyEscaper.Unescape(body) }

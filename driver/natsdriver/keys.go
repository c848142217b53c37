package natsdriver

import (
	"strings"

	"github.com/go-locker/locker/driver/driverkit"
)

// keyEscaper writes a lock key in the alphabet of key-value keys, which
// nats.go allows as [-/_=.a-zA-Z0-9]: letters, digits, '-', '_' and '/'
// stand for themselves, and every other byte (the dot, which would split
// the key into subject tokens, included) is written '%' and two hex
// digits, the '%' then turned into '=', which nothing else writes. The
// mapping is injective, and a key of any bytes becomes a single subject
// token.
var keyEscaper = driverkit.Escaper{Keep: func(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '/'
}}

// encodeKey returns the bucket key of a lock key.
func encodeKey(key string) string {
	return strings.ReplaceAll(keyEscaper.Escape(key), "%", "=")
}

// decodeKey inverts encodeKey.
func decodeKey(name string) (string, error) {
	return keyEscaper.Unescape(strings.ReplaceAll(name, "=", "%"))
}

// subject returns the subject of key's messages in the bucket.
func (d *Driver) subject(key string) string {
	return d.pre + encodeKey(key)
}

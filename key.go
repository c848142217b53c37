package locker

import (
	"fmt"

	"github.com/go-locker/locker/driver"
	"strings"
	"unicode/utf8"
)

// MaxKeyLen is the longest key, in bytes, that every driver accepts.
const MaxKeyLen = driver.MaxKeyLen

// validateKey checks a key against the rules every driver relies on.
func validateKey(key string) error {
	switch {
	case key == "":
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	case len(key) > MaxKeyLen:
		return fmt.Errorf("%w: %d bytes, more than the maximum of %d", ErrInvalidKey, len(key), MaxKeyLen)
	case !utf8.ValidString(key):
		return fmt.Errorf("%w: not valid UTF-8", ErrInvalidKey)
	case strings.IndexByte(key, 0) >= 0:
		return fmt.Errorf("%w: contains a NUL byte", ErrInvalidKey)
	}
	return nil
}

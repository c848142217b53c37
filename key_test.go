package locker_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver/memdriver"
)

// FuzzKey checks that a key is accepted exactly when it follows the
// documented rules, that a rejected key reaches no backend, and that an
// accepted one locks and unlocks.
func FuzzKey(f *testing.F) {
	for _, k := range []string{"", "orders/42", "a/b", "..", "ключ/锁/🔒", "{", "}x", "a\x00b", "\xff", " sp ace ", strings.Repeat("x", 512), strings.Repeat("é", 257)} {
		f.Add(k)
	}
	f.Fuzz(func(t *testing.T, key string) {
		valid := key != "" && len(key) <= locker.MaxKeyLen && utf8.ValidString(key) && !strings.ContainsRune(key, 0)
		b := memdriver.NewBackend()
		m := locker.NewMutex(b.Driver(), key)
		ok, err := m.TryLockContext(context.Background())
		if !valid {
			if ok || !errors.Is(err, locker.ErrInvalidKey) || b.Calls() != 0 {
				t.Fatalf("invalid key %q: ok=%v err=%v calls=%d", key, ok, err, b.Calls())
			}
			return
		}
		if !ok || err != nil {
			t.Fatalf("valid key %q: ok=%v err=%v", key, ok, err)
		}
		if err := m.UnlockContext(context.Background()); err != nil {
			t.Fatal(err)
		}
	})
}

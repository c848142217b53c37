//go:build go1.25

package limbo_test

import (
	"context"
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/internal/goleak"
	"github.com/go-locker/locker/internal/limbo"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSet(t *testing.T) {
	const ttl = time.Second
	var s limbo.Set
	if s.Doubtful("k", "a", 0, 7) {
		t.Fatal("an empty Set doubts a grant")
	}
	// An answered give-back leaves nothing in doubt.
	s.GaveBack("k", "a", 0, 7, nil, ttl)
	s.GaveBack("k", "a", 1, 7, fmt.Errorf("release: %w", driver.ErrNotHeld), ttl)
	if s.Len() != 0 || s.Doubtful("k", "a", 0, 7) {
		t.Fatalf("answered give-backs left %d owners in limbo", s.Len())
	}
	// An unanswered one puts that grant, and only it, in doubt.
	s.GaveBack("k", "a", 1, 7, context.DeadlineExceeded, ttl)
	for _, c := range []struct {
		key, owner string
		server     int
		tok        uint64
	}{{"k", "b", 1, 7}, {"j", "a", 1, 7}, {"k", "a", 0, 7}} {
		if s.Doubtful(c.key, c.owner, c.server, c.tok) {
			t.Errorf("Doubtful(%+v) = true; only server 1's grant 7 of a at k is in doubt", c)
		}
	}
	if !s.Doubtful("k", "a", 1, 7) || !s.Doubtful("k", "a", 1, 7) {
		t.Fatal("the grant whose give-back is unanswered is not in doubt")
	}
	// A grant with another token ends the doubt: the server dropped 7.
	if s.Doubtful("k", "a", 1, 9) {
		t.Fatal("a new grant (token 9) is in doubt")
	}
	if s.Doubtful("k", "a", 1, 7) || s.Len() != 0 {
		t.Fatal("the doubt outlived a grant with another token")
	}
	// So does an answered give-back of the same grant, and Forget.
	s.GaveBack("k", "a", 1, 7, context.DeadlineExceeded, ttl)
	s.GaveBack("k", "a", 1, 7, nil, ttl)
	if s.Doubtful("k", "a", 1, 7) {
		t.Fatal("the doubt outlived an answered give-back")
	}
	s.GaveBack("k", "a", 1, 7, context.DeadlineExceeded, ttl)
	s.GaveBack("k", "a", 2, 8, context.DeadlineExceeded, ttl)
	s.Forget("k", "a")
	if s.Doubtful("k", "a", 1, 7) || s.Doubtful("k", "a", 2, 8) || s.Len() != 0 {
		t.Fatal("Forget left grants in doubt")
	}
}

// TestSetPrunes checks that an entry no call touched for ten TTLs (at
// least a minute) goes when another grant enters limbo, so that owners
// that never release do not pile up.
func TestSetPrunes(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		const ttl = time.Second
		var s limbo.Set
		s.GaveBack("k", "old", 0, 1, context.DeadlineExceeded, ttl)
		s.GaveBack("k", "kept", 0, 2, context.DeadlineExceeded, ttl)
		time.Sleep(59 * time.Second)
		if !s.Doubtful("k", "kept", 0, 2) { // touches it
			t.Fatal("kept is not in doubt")
		}
		time.Sleep(2 * time.Second)
		s.GaveBack("k", "new", 0, 3, context.DeadlineExceeded, ttl)
		if s.Len() != 2 || s.Doubtful("k", "old", 0, 1) || !s.Doubtful("k", "kept", 0, 2) {
			t.Fatalf("after 61 s: %d owners in limbo; want kept and new", s.Len())
		}
	})
}

// Package limbo keeps the grants whose give-back is in doubt, for drivers
// that give a grant back and then let the same owner ask again.
//
// A driver gives a grant back when it cannot report it: a quorum attempt
// that got a minority, a grant that too few replicas acknowledged. The
// front-end then asks again with the same owner. A give-back whose answer
// did not come back may still be on its way: on a slow connection, or in
// the buffer of a stalled server that reads it after its client gave up.
// If it lands after the next grant, it deletes the grant that the driver
// reported, and another owner can be granted the key while the first
// believes it holds it.
//
// So a give-back names the grant's token, and while its outcome is
// unknown the grant is in limbo: a grant or renewal of the same owner on
// the same server that carries that token must not count, since the
// release on its way may still delete it. A grant with another token
// counts: the server dropped the old one, tokens are never granted twice,
// and the release on its way matches nothing any more. A give-back that
// was answered (released, or not held) ends the doubt.
package limbo

import (
	"errors"
	"sync"
	"time"

	"github.com/go-locker/locker/driver"
)

// A Set is the grants in limbo of one driver, per key, owner and server
// (a quorum member's index, or 0). The zero value is empty and ready for
// use; a Set is safe for concurrent use.
type Set struct {
	mu sync.Mutex
	m  map[key]*entry
}

type key struct{ key, owner string }

// An entry holds, per server, the token of the grant that a release in
// doubt names.
type entry struct {
	tokens  map[int]uint64
	touched time.Time
}

// keep is how long an entry lives without news: the owner's calls refresh
// it, and its final Release drops it (Forget). An owner whose lock call
// ended without a final Release (a refused TryLock) leaves its entry
// until then, so that the Set does not grow without bound.
func keep(ttl time.Duration) time.Duration { return max(10*ttl, time.Minute) }

// Doubtful reports whether the grant or renewal with token tok of owner at
// key, on server, may still be deleted by a release on its way. A token
// other than the one in limbo ends the doubt about that server.
func (s *Set) Doubtful(k, owner string, server int, tok uint64) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.m[key{k, owner}]
	if e == nil {
		return false
	}
	t, ok := e.tokens[server]
	switch {
	case !ok:
		return false
	case t == tok:
		e.touched = time.Now()
		return true
	}
	s.settleLocked(k, owner, server)
	return false
}

// GaveBack records the outcome err of the give-back of the grant with
// token tok of owner at key, on server, for a lease of ttl: an answer
// (nil, or an error wrapping driver.ErrNotHeld) ends the doubt; any other
// error puts the grant in limbo.
func (s *Set) GaveBack(k, owner string, server int, tok uint64, err error, ttl time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err == nil || errors.Is(err, driver.ErrNotHeld) {
		s.settleLocked(k, owner, server)
		return
	}
	now := time.Now()
	for kk, e := range s.m {
		if now.Sub(e.touched) > keep(ttl) {
			delete(s.m, kk)
		}
	}
	if s.m == nil {
		s.m = map[key]*entry{}
	}
	e := s.m[key{k, owner}]
	if e == nil {
		e = &entry{tokens: map[int]uint64{}}
		s.m[key{k, owner}] = e
	}
	e.tokens[server] = tok
	e.touched = now
}

// settleLocked ends the doubt about server's grant for owner at key.
func (s *Set) settleLocked(k, owner string, server int) {
	if e := s.m[key{k, owner}]; e != nil {
		delete(e.tokens, server)
		if len(e.tokens) == 0 {
			delete(s.m, key{k, owner})
		}
	}
}

// Forget drops what the Set knows about owner at key: its final Release
// went out, and no later attempt will use the owner.
func (s *Set) Forget(k, owner string) {
	s.mu.Lock()
	delete(s.m, key{k, owner})
	s.mu.Unlock()
}

// Len returns the number of owners with a grant in limbo.
func (s *Set) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}

package quorumdriver

import (
	"errors"
	"sync"
	"time"

	"github.com/go-locker/locker/driver"
)

// A limbo remembers the members' grants whose give-back is in doubt.
//
// An attempt that does not reach a majority gives back what members
// granted it, and the front-end's next attempt asks again with the same
// owner. A give-back whose answer did not come back in time may still be
// on its way: on a slow connection, or in the buffer of a stalled member,
// it can reach the member after the next attempt, and delete the grant
// that attempt counted. Two such members of three, and another owner gets
// a majority while this one believes it holds the key.
//
// So a give-back names the member's token (Release with Lease.Token), and
// when its answer is unknown, the member's grant with that token is in
// limbo: a grant or renewal from that member that carries the same token
// does not count for the owner, since the release on its way may still
// delete it. A grant with another token counts: the member gave the old
// one up, and tokens are never granted twice, so the release on its way
// no longer matches anything. A give-back whose answer came back (done,
// or not held) ends the doubt.
type limbo struct {
	mu sync.Mutex
	m  map[limboKey]*limboEntry
}

type limboKey struct{ key, owner string }

// A limboEntry holds, per member, the token of the grant a release in
// doubt names.
type limboEntry struct {
	tokens  map[int]uint64
	touched time.Time
}

// limboKeep is how long an entry lives without news: the owner's calls
// refresh it, and its final Release drops it. An owner whose lock call
// failed without a final Release (a refused TryLock) leaves its entry
// until then, so the map does not grow without bound.
func limboKeep(ttl time.Duration) time.Duration { return max(10*ttl, time.Minute) }

// doubtful reports whether member i's grant or renewal with token tok, for
// owner at key, may still be deleted by a release on its way. A token
// other than the one in limbo ends the doubt about member i.
func (b *limbo) doubtful(key, owner string, i int, tok uint64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	e := b.m[limboKey{key, owner}]
	if e == nil {
		return false
	}
	t, ok := e.tokens[i]
	switch {
	case !ok:
		return false
	case t == tok:
		e.touched = time.Now()
		return true
	}
	b.settleLocked(key, owner, i)
	return false
}

// sift removes from ok the members whose lease in rs is in doubt and
// returns them apart.
func (b *limbo) sift(key, owner string, rs []result[driver.Lease], ok []int) (counted, doubted []int) {
	for _, i := range ok {
		if b.doubtful(key, owner, i, rs[i].v.Token) {
			doubted = append(doubted, i)
		} else {
			counted = append(counted, i)
		}
	}
	return counted, doubted
}

// gaveBack records the outcome of the give-back of member i's grant tok:
// an answer (nil, or not held) ends the doubt; any other error puts the
// grant in limbo.
func (b *limbo) gaveBack(key, owner string, i int, tok uint64, err error, ttl time.Duration) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if err == nil || errors.Is(err, driver.ErrNotHeld) {
		b.settleLocked(key, owner, i)
		return
	}
	now := time.Now()
	for k, e := range b.m {
		if now.Sub(e.touched) > limboKeep(ttl) {
			delete(b.m, k)
		}
	}
	if b.m == nil {
		b.m = map[limboKey]*limboEntry{}
	}
	k := limboKey{key, owner}
	e := b.m[k]
	if e == nil {
		e = &limboEntry{tokens: map[int]uint64{}}
		b.m[k] = e
	}
	e.tokens[i] = tok
	e.touched = now
}

// settleLocked ends the doubt about member i's grant for owner at key.
func (b *limbo) settleLocked(key, owner string, i int) {
	k := limboKey{key, owner}
	if e := b.m[k]; e != nil {
		delete(e.tokens, i)
		if len(e.tokens) == 0 {
			delete(b.m, k)
		}
	}
}

// forget drops what is known about owner at key: its final Release went
// out, and no later attempt will use the owner.
func (b *limbo) forget(key, owner string) {
	b.mu.Lock()
	delete(b.m, limboKey{key, owner})
	b.mu.Unlock()
}

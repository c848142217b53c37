package mongodriver

import (
	"iter"
	"slices"
	"strconv"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
)

// A version is one document of the collection: the whole state of a key
// after one change. Versions are never updated: a change inserts the next
// version, whose _id names the key and the version number, so that of the
// writers that read version v only one can insert v+1 (see the package
// documentation).
type version struct {
	ID    string `bson:"_id"`
	Key   string `bson:"k"`
	V     int64  `bson:"v"`
	Fence int64  `bson:"f"` // the highest token granted for Key
	Holds []hold `bson:"h"`
}

// A hold is one grant in a version. End is on the server's clock, in
// microseconds since the Unix epoch: an upper bound of the server's clock
// when the holder's lease ends on the holder's own clock.
type hold struct {
	Owner  string `bson:"o"`
	Mode   int32  `bson:"m"`
	Token  int64  `bson:"t"`
	End    int64  `bson:"e"`
	TTL    int64  `bson:"l"` // nanoseconds
	Limit  int64  `bson:"n,omitempty"`
	Weight int64  `bson:"w,omitempty"`
	Value  []byte `bson:"x,omitempty"`
}

// span bounds the server's clock at one local instant, in microseconds
// since the Unix epoch.
type span struct{ lo, hi int64 }

// docID is the _id of version v of key: injective, since the version's
// digits contain no colon.
func docID(key string, v int64) string {
	return strconv.FormatInt(v, 36) + ":" + key
}

// next returns the version that follows s, with holds and fence.
func (s *version) next(holds []hold, fence int64) *version {
	v := s.V + 1
	return &version{ID: docID(s.Key, v), Key: s.Key, V: v, Fence: fence, Holds: holds}
}

// live returns a copy of the holds of s that have not ended by lo.
func (s *version) live(lo int64) []hold {
	var out []hold
	for _, h := range s.Holds {
		if h.End > lo {
			out = append(out, h)
		}
	}
	return out
}

// end is the End of a lease of ttl measured from now: the upper bound of
// the server's clock, plus ttl rounded up to a microsecond.
func end(now span, ttl time.Duration) int64 {
	return now.hi + int64((ttl+time.Microsecond-1)/time.Microsecond)
}

// find returns the index of l's hold in holds: l.Owner's, in l.Mode, with
// l.Token (any token when l.Abandoned), or -1.
func find(holds []hold, l driver.Lease) int {
	return slices.IndexFunc(holds, func(h hold) bool {
		return h.Owner == l.Owner && h.Mode == int32(l.Mode) && (l.Abandoned || uint64(h.Token) == l.Token)
	})
}

func claims(holds []hold) iter.Seq[driverkit.Claim] {
	return func(yield func(driverkit.Claim) bool) {
		for _, h := range holds {
			if !yield(driverkit.Claim{Mode: driver.Mode(h.Mode), Limit: h.Limit, Weight: h.Weight}) {
				return
			}
		}
	}
}

// grant computes the version after granting req to req.Owner at now, and
// the hold it grants, or the refusal: a *driver.LockedError or a
// *driver.LimitError. An owner that holds the key gets its hold back,
// extended, with its token, weight and value.
func grant(s *version, req driver.Request, now span) (*version, hold, error) {
	holds := s.live(now.lo)
	if i := slices.IndexFunc(holds, func(h hold) bool { return h.Owner == req.Owner }); i >= 0 {
		holds[i].End, holds[i].TTL = end(now, req.TTL), int64(req.TTL)
		return s.next(holds, s.Fence), holds[i], nil
	}
	c := driverkit.Claim{Mode: req.Mode, Limit: req.Limit, Weight: req.Weight}
	ok, lerr := driverkit.Admit(c, claims(holds))
	if lerr != nil {
		return nil, hold{}, lerr
	}
	if !ok {
		return nil, hold{}, &driver.LockedError{Remaining: remaining(holds, req.Limit > 0, now.lo)}
	}
	// Tokens come from the previous version's fence, and from the
	// server's clock when that is greater, so that they keep increasing
	// even when every version of the key is deleted.
	h := hold{
		Owner: req.Owner, Mode: int32(req.Mode), Token: max(s.Fence+1, now.lo),
		End: end(now, req.TTL), TTL: int64(req.TTL),
		Limit: req.Limit, Weight: req.Weight, Value: []byte(req.Value),
	}
	return s.next(append(holds, h), h.Token), h, nil
}

// remaining is how long the holds in the way may last, judged at lo: the
// first to end for a counted request (it may make room), the last
// otherwise. A hold's time is at most its TTL: its end on the server
// exceeds the holder's own by the clock's uncertainty.
func remaining(holds []hold, first bool, lo int64) time.Duration {
	var r time.Duration
	for i, h := range holds {
		d := min(time.Duration(h.End-lo)*time.Microsecond, time.Duration(h.TTL))
		if i == 0 || (first && d < r) || (!first && d > r) {
			r = d
		}
	}
	return max(r, 0)
}

// renew computes the version after extending l at now, and the extended
// hold; an error wrapping driver.ErrNotHeld when l is not live in s.
func renew(s *version, l driver.Lease, now span) (*version, hold, error) {
	holds := s.live(now.lo)
	i := find(holds, l)
	if i < 0 {
		return nil, hold{}, driver.ErrNotHeld
	}
	holds[i].End = end(now, l.TTL)
	return s.next(holds, s.Fence), holds[i], nil
}

// drop computes the version after releasing l at now, and the hold it
// removes; an error wrapping driver.ErrNotHeld when l is not live in s.
func drop(s *version, l driver.Lease, now span) (*version, hold, error) {
	holds := s.live(now.lo)
	i := find(holds, l)
	if i < 0 {
		return nil, hold{}, driver.ErrNotHeld
	}
	h := holds[i]
	return s.next(slices.Delete(holds, i, i+1), s.Fence), h, nil
}

// has reports whether top holds h with an End no earlier than h's: h's
// write is then in force (it, or a later write that kept h at least as
// long, is the key's current version).
func has(top *version, h hold) bool {
	return slices.ContainsFunc(top.Holds, func(t hold) bool {
		return t.Owner == h.Owner && t.Token == h.Token && t.End >= h.End
	})
}

// lacks reports whether top holds none of gone (same owner and token).
func lacks(top *version, gone []hold) bool {
	return !slices.ContainsFunc(top.Holds, func(t hold) bool {
		return slices.ContainsFunc(gone, func(g hold) bool {
			return t.Owner == g.Owner && t.Token == g.Token
		})
	})
}

package etcddriver

import (
	"fmt"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
	"go.etcd.io/etcd/api/v3/mvccpb"
)

// A class is what the grant rules need of an entry or a request: its
// sub-prefix (readers, counted or writers) and, for a counted one, its
// limit and weight.
type class struct {
	dir           string
	limit, weight int64
}

// classOf returns the class of the entry kv.
func classOf(kv *mvccpb.KeyValue) class {
	c := class{dir: keyDir(kv.Key)}
	if c.dir == counted {
		m := parseValue(kv.Value)
		c.limit, c.weight = m.limit, m.weight
	}
	return c
}

// mismatch returns the *driver.LimitError that an entry of class c gets
// from an older entry of class o, or nil: shared entries must agree on the
// limit, an uncounted one having limit 0. Exclusive entries agree with
// everyone (they conflict instead).
func mismatch(c, o class) error {
	if c.dir == writers || o.dir == writers || c.limit == o.limit {
		return nil
	}
	return fmt.Errorf("limit %d: %w", c.limit, &driver.LimitError{Limit: o.limit})
}

// admit decides whether an entry of class c with create revision rev is
// granted, given kvs, entries of the lock in any order of which it looks
// at those older than rev (math.MaxInt64 for an entry yet to be put), by
// driverkit.Admit. Older shared entries that disagree on the limit make it
// fail with a *driver.LimitError instead (see mismatch).
func admit(c class, rev int64, kvs []*mvccpb.KeyValue) (bool, error) {
	ok, lerr := driverkit.Admit(c.claim(), func(yield func(driverkit.Claim) bool) {
		for _, kv := range kvs {
			if kv.CreateRevision < rev && !yield(classOf(kv).claim()) {
				return
			}
		}
	})
	if lerr != nil {
		return false, fmt.Errorf("limit %d: %w", c.limit, lerr)
	}
	return ok, nil
}

// claim returns what driverkit.Admit reads of an entry of class c.
func (c class) claim() driverkit.Claim {
	m := driver.Shared
	if c.dir == writers {
		m = driver.Exclusive
	}
	return driverkit.Claim{Mode: m, Limit: c.limit, Weight: c.weight}
}

package memcachedriver

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// valueVersion starts every hold item's value, so that a later format can
// be told apart.
const valueVersion = "1"

// record is the value of a hold item:
//
//	1 <token> <nonce> <end> <ttl> <owner>
//
// token is the fencing token in decimal, 0 while the grant is pending
// (between the add that claimed the key and the compare-and-swap that
// writes the token); nonce, 16 hex digits, names the attempt that wrote
// the pending record; end is the Unix time in milliseconds, on the clock of
// the client that wrote the record, at which the lease ends as that client
// counts it; ttl is the lease's TTL in whole seconds; owner, the rest of
// the value, is the owner string as given.
type record struct {
	token uint64
	nonce uint64
	end   int64 // Unix milliseconds
	ttl   int64 // seconds
	owner string
}

// newRecord returns the record of a lease of ttl seconds for owner that
// starts now.
func newRecord(token, nonce uint64, ttl int64, owner string) record {
	return record{
		token: token,
		nonce: nonce,
		end:   time.Now().Add(time.Duration(ttl) * time.Second).UnixMilli(),
		ttl:   ttl,
		owner: owner,
	}
}

func (r record) encode() []byte {
	b := make([]byte, 0, 64+len(r.owner))
	b = append(b, valueVersion...)
	b = append(b, ' ')
	b = strconv.AppendUint(b, r.token, 10)
	b = append(b, ' ')
	b = appendNonce(b, r.nonce)
	b = append(b, ' ')
	b = strconv.AppendInt(b, r.end, 10)
	b = append(b, ' ')
	b = strconv.AppendInt(b, r.ttl, 10)
	b = append(b, ' ')
	return append(b, r.owner...)
}

func appendNonce(b []byte, n uint64) []byte {
	for shift := 60; shift >= 0; shift -= 4 {
		b = append(b, hexDigits[(n>>shift)&15])
	}
	return b
}

// parseRecord decodes a hold item's value.
func parseRecord(v []byte) (record, error) {
	f := strings.SplitN(string(v), " ", 6)
	if len(f) != 6 || f[0] != valueVersion || len(f[2]) != 16 {
		return record{}, fmt.Errorf("hold item holds %q, which is not a record of this driver", truncate(v))
	}
	var r record
	var err error
	if r.token, err = strconv.ParseUint(f[1], 10, 64); err != nil {
		return record{}, fmt.Errorf("hold item %q: token: %w", truncate(v), err)
	}
	if r.nonce, err = strconv.ParseUint(f[2], 16, 64); err != nil {
		return record{}, fmt.Errorf("hold item %q: nonce: %w", truncate(v), err)
	}
	if r.end, err = strconv.ParseInt(f[3], 10, 64); err != nil {
		return record{}, fmt.Errorf("hold item %q: end: %w", truncate(v), err)
	}
	if r.ttl, err = strconv.ParseInt(f[4], 10, 64); err != nil || r.ttl <= 0 {
		return record{}, fmt.Errorf("hold item %q: bad TTL", truncate(v))
	}
	r.owner = f[5]
	return r, nil
}

// remaining is how long the lease of r may still last, as far as this
// client can tell: the time until its end on this client's clock, at
// least 0 and at most its TTL (clocks of different clients may differ).
func (r record) remaining() time.Duration {
	d := time.Duration(r.end-time.Now().UnixMilli()) * time.Millisecond
	return min(max(d, 0), time.Duration(r.ttl)*time.Second)
}

func truncate(v []byte) string {
	const max = 80
	if len(v) > max {
		return string(v[:max]) + "…"
	}
	return string(v)
}

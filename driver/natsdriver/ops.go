package natsdriver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// maxRounds bounds the rounds of one call whose conditional write keeps
// failing because the key changed under it: the call then fails with an
// error the front-end may retry.
const maxRounds = 8

// errBusy is the error of a call that ran out of rounds.
var errBusy = fmt.Errorf("the key changed under %d conditional writes in a row", maxRounds)

// Header names and values of the key-value protocol (nats.go's, which it
// does not export).
const (
	hdrOperation = "KV-Operation"
	opPurge      = "PURGE"
)

// TryAcquire implements driver.Driver. A grant of a key that has no
// message, or whose marker the driver knows (see revCache), is one round
// trip: a publish that expects it; otherwise a refused publish costs a
// read and, when the key is free, a second publish that expects what the
// read found. docs/natsdriver.md lists the round trips of each case.
func (d *Driver) TryAcquire(ctx context.Context, req driver.Request) (driver.Lease, error) {
	const op = "acquire"
	if err := d.errs.Begin(ctx, op, req.Key); err != nil {
		return driver.Lease{}, err
	}
	tok, err := d.acquire(ctx, d.subject(req.Key), req.Owner, req.Value, req.TTL)
	if err != nil {
		return driver.Lease{}, d.errs.Wrap(ctx, op, req.Key, err)
	}
	return driver.Lease{Key: req.Key, Owner: req.Owner, Mode: req.Mode, Token: tok, TTL: req.TTL}, nil
}

// acquire grants the key of subject subj to owner for ttl and returns the
// token: the revision of the message that granted it. Every write is
// conditional on the last revision of the subject, as read. A grant that
// fails its condition after a read found the key free lost a race: the
// key went to someone else since, and acquire reports it held rather than
// race the other contenders again (on a key handed over faster than a
// read and a write, it would lose round after round).
func (d *Driver) acquire(ctx context.Context, subj, owner, value string, ttl time.Duration) (uint64, error) {
	expect, readFree := d.revs.freeSeq(subj), false // the subject's last revision; 0: none
	for range maxRounds {
		seq, err := d.publish(ctx, subj, encodeHold(owner, 0, value), expect, ttl, nil)
		if err == nil {
			d.revs.put(subj, seen{seq: seq, owner: owner, token: seq, value: value})
		}
		if !wrongRevision(err) {
			return seq, err
		}
		m, err := d.last(ctx, subj)
		if err != nil {
			return 0, err
		}
		h, st := parseHold(m)
		switch st {
		case none, free:
			if readFree {
				return 0, &driver.LockedError{}
			}
			readFree, expect = true, 0
			if m != nil {
				expect = m.Sequence
			}
			continue
		case foreign:
			return 0, errForeign
		}
		if h.owner != owner {
			return 0, &driver.LockedError{Remaining: h.remaining()}
		}
		// owner holds it: extend the lease, keep the token and value.
		seq, err = d.publish(ctx, subj, encodeHold(owner, h.token, h.value), m.Sequence, ttl, nil)
		if err == nil {
			d.revs.put(subj, seen{seq: seq, owner: owner, token: h.token, value: h.value})
		}
		if !wrongRevision(err) {
			return h.token, err
		}
	}
	return 0, errBusy
}

// Refresh implements driver.Driver: a publish of the hold again with the
// lease's TTL, conditional on the revision of the hold's last message, as
// the driver wrote it (one round trip) or as it reads it (two). It never
// re-creates a hold: the read finds none, or the publish's condition
// fails.
func (d *Driver) Refresh(ctx context.Context, l driver.Lease) (driver.Lease, error) {
	const op = "refresh"
	if err := d.errs.Begin(ctx, op, l.Key); err != nil {
		return driver.Lease{}, err
	}
	err := d.rewrite(ctx, d.subject(l.Key), l, func(subj string, h hold) (seen, error) {
		seq, err := d.publish(ctx, subj, encodeHold(l.Owner, h.token, h.value), h.seq, l.TTL, nil)
		return seen{seq: seq, owner: l.Owner, token: h.token, value: h.value}, err
	})
	if err != nil {
		return driver.Lease{}, d.errs.Wrap(ctx, op, l.Key, err)
	}
	l.Start = time.Time{}
	return l, nil
}

// Release implements driver.Driver: a purge of the key conditional on the
// revision of the hold's last message, known (one round trip) or read
// (two).
// The purge leaves a marker that watchers receive (the waiters' wake-up)
// and that expires after MarkerTTL, leaving nothing of the key; the
// marker names the owner, so that a purge applied by a request that was
// sent again (see attempt) is known as the call's own. With l.Abandoned
// it releases l.Owner's hold whatever its token.
func (d *Driver) Release(ctx context.Context, l driver.Lease) error {
	const op = "release"
	if err := d.errs.Begin(ctx, op, l.Key); err != nil {
		return err
	}
	subj, sent := d.subject(l.Key), false
	err := d.rewrite(ctx, subj, l, func(subj string, h hold) (seen, error) {
		sent = true
		seq, err := d.purge(ctx, subj, h.seq, l.Owner)
		return seen{seq: seq}, err
	})
	if errors.Is(err, driver.ErrNotHeld) && sent && d.releasedBy(ctx, subj, l.Owner) {
		err = nil // a purge this call sent was applied, its reply lost
	}
	if err != nil {
		return d.errs.Wrap(ctx, op, l.Key, err)
	}
	return nil
}

// rewrite calls write with l's hold, its revision as the driver last
// wrote it when it knows it, or as it reads it otherwise; write's publish
// is conditional on that revision, and when another write came between
// the two rewrite reads again, up to maxRounds times. A key without l's
// hold is ErrNotHeld. What write wrote becomes the revision the driver
// knows.
func (d *Driver) rewrite(ctx context.Context, subj string, l driver.Lease, write func(string, hold) (seen, error)) error {
	if h, ok := d.revs.hold(subj, l); ok {
		s, err := write(subj, h)
		if err == nil {
			d.revs.put(subj, s)
		}
		if !wrongRevision(err) {
			return err
		}
		d.revs.drop(subj)
	}
	for range maxRounds {
		m, err := d.last(ctx, subj)
		if err != nil {
			return err
		}
		h, st := parseHold(m)
		if st != held || h.owner != l.Owner || (!l.Abandoned && h.token != l.Token) {
			return driver.ErrNotHeld
		}
		s, err := write(subj, h)
		if err == nil {
			d.revs.put(subj, s)
		}
		if !wrongRevision(err) {
			return err
		}
	}
	return errBusy
}

// publish publishes data to subj, expecting expect as the subject's last
// revision (0: no message), with a per-message TTL when ttl > 0, and
// returns the revision of the new message.
func (d *Driver) publish(ctx context.Context, subj string, data []byte, expect uint64, ttl time.Duration, hdr nats.Header) (uint64, error) {
	var seq uint64
	err := d.attempt(ctx, func(ctx context.Context) error {
		m := &nats.Msg{Subject: subj, Data: data, Header: hdr}
		ack, err := d.js.PublishMsg(ctx, m, jetstream.WithExpectLastSequencePerSubject(expect), jetstream.WithMsgTTL(ttl),
			jetstream.WithRetryWait(noResponderWait), jetstream.WithRetryAttempts(noResponderRetries))
		if err == nil {
			seq = ack.Sequence
		}
		return err
	})
	return seq, err
}

// attemptTimeout bounds one request of a call: a request written on a
// connection just as it broke gets no reply, and is sent again after it,
// or after a third of the time left to the call's deadline when that is
// shorter (a renewal must be confirmed before its holder's local
// deadline), but not before minAttempt. callTimeout bounds the calls
// whose context has no deadline.
const (
	attemptTimeout = time.Second
	minAttempt     = 100 * time.Millisecond
	callTimeout    = 10 * time.Second
)

// A publish that finds no stream to take it (a replicated stream between
// leaders) is sent again every noResponderWait, within its attempt.
const (
	noResponderWait    = 50 * time.Millisecond
	noResponderRetries = int(attemptTimeout / noResponderWait)
)

// attempt calls f with a context that ends after one attempt's time (see
// attemptTimeout), or with ctx, and calls it again when that timeout (not
// ctx) ended it, for at most callTimeout when ctx has no deadline. This is
// the one request the driver repeats without the backend saying it was
// not applied: nats.go neither fails nor resends a request whose
// connection broke under it, and waits for its reply until the context
// ends, which for a renewal is the holder's local deadline. Every request
// the driver makes is a read or a write conditional on the key's last
// revision, so that a request sent twice is applied at most once; the
// repeat happens within the call, never after it returned.
func (d *Driver) attempt(ctx context.Context, f func(context.Context) error) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, callTimeout)
		defer cancel()
	}
	for {
		dl, _ := ctx.Deadline()
		actx, cancel := context.WithTimeout(ctx, min(attemptTimeout, max(minAttempt, time.Until(dl)/3)))
		err := f(actx)
		cancel()
		if err == nil || ctx.Err() != nil || !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
		if err := d.closedNow(ctx); err != nil {
			return err
		}
	}
}

// purge replaces every message of subj, whose last revision must be seq,
// with a purge marker that lives MarkerTTL and names owner (empty: an
// administrator's), and returns its revision.
func (d *Driver) purge(ctx context.Context, subj string, seq uint64, owner string) (uint64, error) {
	hdr := nats.Header{hdrOperation: []string{opPurge}, jetstream.MsgRollup: []string{jetstream.MsgRollupSubject}}
	return d.publish(ctx, subj, []byte(owner), seq, MarkerTTL, hdr)
}

// releasedBy reports whether the last message of subj is the marker of a
// release by owner.
func (d *Driver) releasedBy(ctx context.Context, subj, owner string) bool {
	m, err := d.last(ctx, subj)
	return err == nil && m != nil && m.Header.Get(hdrOperation) == opPurge && string(m.Data) == owner
}

// last returns the last message of subj, or nil when it has none.
func (d *Driver) last(ctx context.Context, subj string) (*jetstream.RawStreamMsg, error) {
	var m *jetstream.RawStreamMsg
	err := d.attempt(ctx, func(ctx context.Context) (err error) {
		m, err = d.stream.GetLastMsgForSubject(ctx, subj)
		return err
	})
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil, nil
	}
	return m, err
}

// wrongRevision reports whether err is JetStream's refusal of a publish
// whose expected last revision of the subject was not the last one
// (replicated streams use a code of their own for it).
func wrongRevision(err error) bool {
	var apiErr *jetstream.APIError
	if err == nil || !errors.As(err, &apiErr) {
		return false
	}
	return apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == errCodeWrongLastSequenceReplicated
}

// errCodeWrongLastSequenceReplicated is the code of a refused conditional
// publish on a replicated stream (recent nats.go names it
// JSErrCodeStreamWrongLastSequenceConstant; the oldest nats.go the driver
// works with does not).
const errCodeWrongLastSequenceReplicated jetstream.ErrorCode = 10164

// hold is a live hold read from the bucket.
type hold struct {
	owner   string
	token   uint64
	value   string        // Request.Value of the grant
	seq     uint64        // the revision of the message read
	written time.Time     // when the server stored it
	ttl     time.Duration // its per-message TTL
}

// encodeHold returns the value of a hold message: the owner; then, after
// a space, the token (0 in the grant's own message, whose revision is the
// token), omitted in a grant without a value; then, after a space, the
// grant's Request.Value, if any.
func encodeHold(owner string, token uint64, value string) []byte {
	b := make([]byte, 0, len(owner)+22+len(value))
	b = append(b, owner...)
	if token != 0 || value != "" {
		b = append(b, ' ')
		b = strconv.AppendUint(b, token, 10)
	}
	if value != "" {
		b = append(b, ' ')
		b = append(b, value...)
	}
	return b
}

// state is what the last message of a key says.
type state uint8

const (
	none    state = iota // no message
	free                 // a marker: of a release, a purge or an expiry
	held                 // a hold
	foreign              // a value the driver did not write
)

// errForeign is the error of an acquire of a key whose value the driver
// did not write: another program uses the bucket.
var errForeign = driver.Permanent(errors.New("the key holds a value that is not a lock's: the bucket is shared with another program"))

// parseHold decodes m, the last message of a key, and says what it is.
func parseHold(m *jetstream.RawStreamMsg) (hold, state) {
	switch {
	case m == nil:
		return hold{}, none
	case m.Header.Get(hdrOperation) != "" || m.Header.Get(jetstream.MarkerReasonHeader) != "":
		return hold{}, free
	}
	owner, rest, hasTok := strings.Cut(string(m.Data), " ")
	if len(owner) != ownerLen {
		return hold{}, foreign
	}
	h := hold{owner: owner, token: m.Sequence, seq: m.Sequence, written: m.Time}
	if hasTok {
		tok, value, _ := strings.Cut(rest, " ")
		t, err := strconv.ParseUint(tok, 10, 64)
		if err != nil {
			return hold{}, foreign
		}
		if t != 0 {
			h.token = t
		}
		h.value = value
	}
	h.ttl, _ = time.ParseDuration(m.Header.Get(jetstream.MsgTTLHeader))
	return h, held
}

// ownerLen is the length of the front-end's owner strings.
const ownerLen = 32

// remaining returns how long h may still live, as the server's clock
// stamped it: its TTL from when it was written, at least a millisecond
// and at most its TTL (clocks disagree).
func (h hold) remaining() time.Duration {
	if h.ttl <= 0 {
		return 0
	}
	return min(max(time.Until(h.written.Add(h.ttl)), time.Millisecond), h.ttl)
}

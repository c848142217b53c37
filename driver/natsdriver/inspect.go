package natsdriver

import (
	"context"

	"github.com/go-locker/locker/driver"
)

// Inspect implements driver.Inspector in one read: the key's holder, with
// its token and the time left of its lease by the server's clock. Fence
// is the holder's token, or 0 when the key is free: the revisions are the
// bucket's, and the next grant's is greater than every one before.
func (d *Driver) Inspect(ctx context.Context, key string) (driver.KeyState, error) {
	const op = "inspect"
	if err := d.errs.Begin(ctx, op, key); err != nil {
		return driver.KeyState{}, err
	}
	m, err := d.last(ctx, d.subject(key))
	if err != nil {
		return driver.KeyState{}, d.errs.Wrap(ctx, op, key, err)
	}
	h, st := parseHold(m)
	if st != held {
		return driver.KeyState{}, nil
	}
	return driver.KeyState{
		Mode:    driver.Exclusive,
		Holders: []driver.Holder{{Owner: h.owner, Token: h.token, Remaining: h.remaining(), Value: h.value}},
		Fence:   h.token,
	}, nil
}

// ForceRelease implements driver.Inspector: it purges the key's hold, as
// Release does, whoever holds it, and returns 1, or 0 when nobody held it.
// The holder learns of it at its next renewal.
func (d *Driver) ForceRelease(ctx context.Context, key string) (int, error) {
	const op = "force-release"
	if err := d.errs.Begin(ctx, op, key); err != nil {
		return 0, err
	}
	subj := d.subject(key)
	for range maxRounds {
		m, err := d.last(ctx, subj)
		if err != nil {
			return 0, d.errs.Wrap(ctx, op, key, err)
		}
		if h, st := parseHold(m); st != held {
			return 0, nil
		} else if _, err := d.purge(ctx, subj, h.seq, ""); !wrongRevision(err) {
			if err != nil {
				return 0, d.errs.Wrap(ctx, op, key, err)
			}
			return 1, nil
		}
	}
	return 0, d.errs.Wrap(ctx, op, key, errBusy)
}

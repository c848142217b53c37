package quorumdriver

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/go-locker/locker/driver"
)

// Subscribe implements driver.Notifier for a quorum whose Capabilities
// report Notify, as they do when every member's do; otherwise it returns
// a permanent error wrapping errors.ErrUnsupported (the front-end never
// calls it then). It subscribes to key on every member, in parallel, and
// fails unless every member's subscription succeeded (a release is
// published only by the members that refused someone, which may be any
// of them). The subscription's channel receives a value when any member's
// does.
func (d *Driver) Subscribe(ctx context.Context, key string) (driver.Subscription, error) {
	const op = "subscribe"
	if !d.caps.Notify {
		return nil, errs.Wrap(ctx, op, key, driver.Permanent(fmt.Errorf("a member does not notify: %w", errors.ErrUnsupported)))
	}
	if err := ctx.Err(); err != nil {
		return nil, errs.Wrap(ctx, op, key, err)
	}
	rs := fanOut(ctx, d.memberTimeout(0), d.all, func(ctx context.Context, i int) (driver.Subscription, error) {
		n, ok := d.members[i].(driver.Notifier)
		if !ok {
			return nil, driver.Permanent(fmt.Errorf("%T reports Notify but is no driver.Notifier: %w", d.members[i], errors.ErrUnsupported))
		}
		return n.Subscribe(ctx, key)
	})
	t, ok := tallyOf(rs)
	subs := make([]driver.Subscription, 0, len(ok))
	for _, i := range ok {
		subs = append(subs, rs[i].v)
	}
	if len(t.errs) > 0 {
		for _, s := range subs {
			_ = s.Close()
		}
		err := d.failure(ctx, op, key, &t, nil)
		if t.permanent > 0 && !driver.IsPermanent(err) {
			err = driver.Permanent(err)
		}
		return nil, err
	}
	s := &subscription{subs: subs, ch: make(chan struct{}, 1), done: make(chan struct{})}
	for _, ms := range subs {
		s.wg.Go(func() {
			for {
				select {
				case <-ms.C():
					select {
					case s.ch <- struct{}{}:
					default:
					}
				case <-s.done:
					return
				}
			}
		})
	}
	return s, nil
}

// subscription merges the subscriptions of the members.
type subscription struct {
	subs []driver.Subscription
	ch   chan struct{}
	done chan struct{}
	once sync.Once
	wg   sync.WaitGroup
	err  error
}

// C implements driver.Subscription.
func (s *subscription) C() <-chan struct{} { return s.ch }

// Close implements driver.Subscription: it closes every member's
// subscription. It may be called more than once.
func (s *subscription) Close() error {
	s.once.Do(func() {
		close(s.done)
		s.wg.Wait()
		var errs []error
		for i, ms := range s.subs {
			if err := ms.Close(); err != nil {
				errs = append(errs, fmt.Errorf("member %d: %w", i, err))
			}
		}
		if err := errors.Join(errs...); err != nil {
			s.err = fmt.Errorf("quorumdriver: close subscription: %w", err)
		}
	})
	return s.err
}

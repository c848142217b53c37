package locker

import (
	"context"
	"sync"

	"github.com/go-locker/locker/driver"
)

// handle is what Mutex and RWMutex share: the driver, key and options, and
// the hold that Token, Done and Err report.
type handle struct {
	_   noCopy
	drv driver.Driver
	key string
	cfg config

	mu   sync.Mutex
	last *hold // the hold Token, Done and Err report; guarded by mu
}

func (hd *handle) init(d driver.Driver, key string, opts []Option) {
	hd.drv, hd.key, hd.cfg = d, key, newConfig(opts)
}

// acquire runs one lock call; it returns nil and no error when a try finds
// the key taken.
func (hd *handle) acquire(ctx context.Context, op string, mode driver.Mode, try bool) (*hold, error) {
	return acquire(ctx, lockOp{op: op, drv: hd.drv, key: hd.key, mode: mode, cfg: &hd.cfg, try: try})
}

// mustLock is the sync.Locker form of a lock call.
func (hd *handle) mustLock(err error) {
	if err != nil {
		panic(err)
	}
}

// reportTry is the bool form of a try: input errors panic, others go to
// the error handler.
func (hd *handle) reportTry(ok bool, err error) bool {
	if err != nil {
		if isInputError(err) {
			panic(err)
		}
		hd.cfg.reportError(err)
	}
	return ok
}

// claimLocked marks h as being unlocked and returns it, or nil if there
// is nothing to unlock. hd.mu is held.
func claimLocked(h *hold) *hold {
	if h == nil || h.unlocking {
		return nil
	}
	h.unlocking = true
	return h
}

// unlockOrPanic ends h for an Unlock without error result: a missing hold
// is a run-time error, as in package sync; any other error goes to the
// error handler.
func (hd *handle) unlockOrPanic(h *hold, op, misuse string) {
	if h == nil {
		panic("locker: " + misuse)
	}
	if err := h.unlock(context.Background(), op); err != nil {
		hd.cfg.reportError(err)
	}
}

// unlockContext ends h for an Unlock with an error result.
func (hd *handle) unlockContext(ctx context.Context, h *hold, op string) error {
	if h == nil {
		return opError(op, hd.key, ErrNotHeld)
	}
	return h.unlock(ctx, op)
}

func (hd *handle) token() Token {
	hd.mu.Lock()
	defer hd.mu.Unlock()
	if hd.last == nil {
		return 0
	}
	return hd.last.token()
}

func (hd *handle) done() <-chan struct{} {
	hd.mu.Lock()
	defer hd.mu.Unlock()
	if hd.last == nil || hd.last.unlocking {
		return closedChan
	}
	return hd.last.done
}

func (hd *handle) err() error {
	hd.mu.Lock()
	defer hd.mu.Unlock()
	if hd.last == nil {
		return nil
	}
	_, err := hd.last.status()
	return err
}

var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// noCopy lets go vet's copylocks check flag copies of lock handles.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}

package driverkit

import (
	"context"
	"sync"
)

// Call runs f, a request to a client whose calls take no context, so that
// the call returns by ctx's deadline: when ctx can be done, f runs on a
// goroutine of its own and Call returns ctx's error (ctx.Err()) as soon as
// ctx is done, leaving f to finish; then, once f has returned, undo (if
// not nil) is called with its results, so that the caller can take back
// what f did (delete a node it created). When f and ctx end together, f's
// result wins. When ctx cannot be done, f runs on the caller's goroutine.
//
// The request itself is not cancelled: the client must bound it (by its
// connection's life, or a timeout of its own).
func Call[T any](ctx context.Context, f func() (T, error), undo func(T, error)) (T, error) {
	if ctx.Done() == nil {
		return f()
	}
	if err := ctx.Err(); err != nil {
		var zero T
		return zero, err
	}
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	var mu sync.Mutex
	abandoned := false
	go func() {
		v, err := f()
		// The result is sent under mu, so that the caller, which
		// looks for it under mu before it gives up, either takes it or
		// leaves it to undo.
		mu.Lock()
		a := abandoned
		if !a {
			ch <- result{v, err} // never blocks: one send, one slot
		}
		mu.Unlock()
		if a && undo != nil {
			undo(v, err)
		}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		mu.Lock()
		select {
		case r := <-ch:
			mu.Unlock()
			return r.v, r.err
		default:
		}
		abandoned = true
		mu.Unlock()
		var zero T
		return zero, ctx.Err()
	}
}

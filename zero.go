package locker

import (
	"context"
	"errors"
	"fmt"
)

// ErrZeroValue means a method was called on a value that was not made by
// its constructor: a zero Mutex (var m locker.Mutex, or a Mutex field of a
// struct) rather than one from NewMutex or Client.Mutex, a zero Client
// rather than one from New, and so on. The types of this package that talk
// to a backend need a driver, which only their constructors give them: a
// zero value cannot lock anything. Methods that return an error return one
// wrapping ErrZeroValue that names the type and its constructors; Lock,
// RLock and TryLock, which return none, panic with it, as package sync
// panics on misuse. Keep lock handles in struct fields as pointers:
//
//	type Orders struct {
//		mu *locker.Mutex // from Client.Mutex
//	}
var ErrZeroValue = errors.New("zero value")

// A kind names an exported type and its constructors, for errors about
// zero values.
type kind struct{ name, ctors string }

var (
	kindClient    = kind{"Client", "New"}
	kindMutex     = kind{"Mutex", "NewMutex or Client.Mutex"}
	kindRWMutex   = kind{"RWMutex", "NewRWMutex or Client.RWMutex"}
	kindReentrant = kind{"ReentrantMutex", "NewReentrantMutex or Client.ReentrantMutex"}
	kindSemaphore = kind{"Semaphore", "Client.Semaphore"}
	kindElection  = kind{"Election", "Client.Election"}
	kindMultiLock = kind{"MultiLock", "Client.MultiLock"}
	kindHold      = kind{"Hold", "an Acquire method"}
	kindMultiHold = kind{"MultiHold", "MultiLock.Acquire"}
)

// zeroError is the error of operation op on a zero value of kind k.
func zeroError(op string, k kind) error {
	return opError(op, "", fmt.Errorf("%w of locker.%s: make it with %s", ErrZeroValue, k.name, k.ctors))
}

// isZero reports whether c was not made by New.
func (c *Client) isZero() bool { return c == nil || c.ctx == nil }

// zero returns the error of op when the value of kind k has the Client c
// (nil for a zero value of k) and c, or the value, is not usable.
func zeroCheck(op string, k kind, c *Client) error {
	switch {
	case c == nil:
		return zeroError(op, k)
	case c.isZero():
		return zeroError(op, kindClient)
	}
	return nil
}

// zeroContext returns a context cancelled with cause err, for the Context
// of a zero Hold or MultiHold.
func zeroContext(err error) context.Context {
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(err)
	return ctx
}

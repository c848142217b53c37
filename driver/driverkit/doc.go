// Package driverkit holds what the drivers of package
// github.com/go-locker/locker/driver have in common, for the authors of
// drivers: the drivers of this module use it, and third-party drivers may
// too. It is not part of the contract: a driver that passes
// lockertest.TestDriver is correct whether or not it uses the kit.
//
// # Errors
//
// [OpError] names the driver, the operation and the key of a failed call
// and wraps its cause; [CheckCount] checks the counted fields of a
// request before any I/O.
//
// # Retries
//
// [Backoff] spaces the retries of a loop.
//
// # Waiting and loss
//
// [Fanout] keeps the subscriptions of a driver's notifier and wakes them;
// [LossCallback] holds the function a driver calls once when it learns
// that a lease was lost.
package driverkit

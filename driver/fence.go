package driver

import "context"

// TokenFloor is implemented by drivers that can raise a key's fencing
// tokens above a value chosen elsewhere, such as the token a quorum of
// several backends agreed on (package quorumdriver writes its grant's token
// back to the members that granted it, so that any two majorities are
// ordered by a member they share).
//
// Without it, a driver's tokens are ordered only among themselves; package
// quorumdriver refuses members that lack it.
type TokenFloor interface {
	// RaiseTokenFloor makes every token that the driver grants for l.Key
	// after it returns nil greater than floor, for as long as that
	// matters: a driver whose tokens come from a clock may forget the
	// floor once its clock has passed it. When l.Owner holds l.Key in
	// l.Mode with a token lower than floor, floor becomes that hold's
	// token, as if it had been granted with it: an idempotent re-acquire
	// returns it, and the hold's release keeps it as a released token
	// would be kept. When l.Owner does not hold the key, it returns an
	// error wrapping ErrNotHeld, and the floor may or may not have been
	// raised: only a holder's floor is guaranteed (a driver may keep it
	// in the hold's token alone). A floor lower than what the driver
	// already guarantees changes nothing. l.Token is ignored.
	RaiseTokenFloor(ctx context.Context, l Lease, floor uint64) error
}

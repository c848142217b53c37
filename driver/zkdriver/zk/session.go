package zk

import (
	"sync/atomic"
	"time"
)

// SessionTimeout returns the session timeout the server negotiated for the
// current session or, before the first session, the one passed to Connect.
func (c *Conn) SessionTimeout() time.Duration {
	return time.Duration(atomic.LoadInt32(&c.sessionTimeoutMs)) * time.Millisecond
}

// Done returns a channel that is closed when Close is called.
func (c *Conn) Done() <-chan struct{} {
	return c.shouldQuit
}

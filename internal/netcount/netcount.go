// Package netcount counts the writes on the connections it dials. For a
// client that writes each request, pipeline or pub/sub command with one
// Write and then waits for its reply (go-redis, go-zookeeper), a write is
// a round trip; the tests and the bench count round trips with it.
package netcount

import (
	"context"
	"net"
	"sync/atomic"
)

// A Counter counts the writes on every connection it dialed. Its value
// (Load) is the count so far. The zero value is ready to use.
type Counter struct {
	atomic.Int64
	dials atomic.Int64
}

// Dials returns the number of connections c was asked to dial so far,
// whether or not they were made.
func (c *Counter) Dials() int64 { return c.dials.Load() }

// DialContext dials a connection whose writes c counts; it fits
// redis.Options.Dialer.
func (c *Counter) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	c.dials.Add(1)
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return countedConn{conn, c}, nil
}

type countedConn struct {
	net.Conn
	c *Counter
}

func (cc countedConn) Write(b []byte) (int, error) {
	cc.c.Add(1)
	return cc.Conn.Write(b)
}

package zkdriver

import (
	"bufio"
	"encoding/binary"
	"net"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"
)

// dial is the dialer of a connection made with ConnOption: it wraps each
// network connection in a sniffConn.
func (s *Session) dial(network, addr string, timeout time.Duration) (net.Conn, error) {
	dial := s.Dialer
	if dial == nil {
		dial = net.DialTimeout
	}
	c, err := dial(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	return &sniffConn{Conn: c, s: s}, nil
}

// sniffConn is a network connection of go-zookeeper made with a Session's
// ConnOption. It reads the connect response (session id, negotiated
// timeout), spots the close request, and keeps the last zxid seen in the
// Session instead of go-zookeeper's Conn.
//
// go-zookeeper v1.0.4 stores the zxid of each reply in a field of its Conn
// on its receiving goroutine, and after a reconnection reads that field on
// its main goroutine to set its watches again, with no synchronisation: a
// data race (go-zookeeper/zk pull request 35), which the race detector
// reports in every test that reconnects with watches set. So sniffConn
// zeroes the zxid in the header of each reply, which go-zookeeper then
// never stores (it keeps 0), keeps it in the Session, and writes the one
// seen before this connection into the two requests that carry the field:
// the connect request (LastZxidSeen, so that no server behind what the
// client saw takes the session) and the set-watches request (RelativeZxid,
// so that the server fires the watches whose nodes changed since, and only
// those: not the zxid of a reply on this connection, which may be past a
// change the old connection never told). Only the connection's own
// goroutines read and write its bytes.
//
// Its reads go through a buffer: go-zookeeper reads a reply's length and
// then its body, two system calls where one serves both, and the replies
// that arrived together.
type sniffConn struct {
	net.Conn
	s      *Session
	hs     []byte // the connect response read so far
	hsDone bool   // read: replies follow
	reply  replyHead
	r      *bufio.Reader
	seen   int64 // the last zxid seen before this connection
}

// Frame offsets. A connect request: len, protocolVersion int32,
// lastZxidSeen int64, timeOut int32, .... A connect response: len, protocolVersion int32,
// timeOut int32, sessionId int64, passwd. Other requests: len, xid int32,
// opcode int32, then for set-watches relativeZxid int64. A reply: len, xid
// int32, zxid int64, err int32, body.
const (
	reqZxidOff       = 4 + 4
	reqTimeoutOff    = 4 + 4 + 8
	respTimeoutOff   = 4 + 4
	respSessionOff   = 4 + 4 + 4
	opOff            = 4 + 4
	setWatchesZxidOf = 4 + 4 + 4
	opCloseSession   = -11 // the request only zk.Conn.Close sends
	opSetWatches     = 101
)

func (c *sniffConn) Write(p []byte) (int, error) {
	// go-zookeeper writes each request with one Write.
	switch {
	case !c.hsDone && len(p) >= reqTimeoutOff+4:
		c.s.requested.Store(int64(binary.BigEndian.Uint32(p[reqTimeoutOff:])) * int64(time.Millisecond))
		c.seen = c.s.zxid.Load()
		return c.writeZxid(p, reqZxidOff)
	case len(p) < opOff+4:
	case int32(binary.BigEndian.Uint32(p[opOff:])) == opCloseSession:
		c.s.connClosed()
	case int32(binary.BigEndian.Uint32(p[opOff:])) == opSetWatches && len(p) >= setWatchesZxidOf+8:
		return c.writeZxid(p, setWatchesZxidOf)
	}
	return c.Conn.Write(p)
}

// writeZxid writes a copy of p with c.seen at off.
func (c *sniffConn) writeZxid(p []byte, off int) (int, error) {
	q := append([]byte(nil), p...)
	binary.BigEndian.PutUint64(q[off:], uint64(c.seen))
	return c.Conn.Write(q)
}

func (c *sniffConn) Read(p []byte) (int, error) {
	if c.r == nil {
		c.r = bufio.NewReaderSize(c.Conn, 64<<10)
	}
	n, err := c.r.Read(p)
	b := p[:n]
	if !c.hsDone {
		b = c.handshake(b)
	}
	c.reply.scan(b, &c.s.zxid)
	return n, err
}

// handshake reads b, the next bytes of the connect response, and returns
// those that follow it.
func (c *sniffConn) handshake(b []byte) []byte {
	c.hs = append(c.hs, b...)
	if len(c.hs) < respSessionOff+8 || len(c.hs) < 4+int(binary.BigEndian.Uint32(c.hs)) {
		return nil
	}
	size := 4 + int(binary.BigEndian.Uint32(c.hs))
	rest := b[len(b)-(len(c.hs)-size):]
	ms := int32(binary.BigEndian.Uint32(c.hs[respTimeoutOff:]))
	id := int64(binary.BigEndian.Uint64(c.hs[respSessionOff:]))
	c.hs, c.hsDone = nil, true
	if id == 0 { // the server no longer knows our session
		c.s.zxid.Store(0) // as go-zookeeper does
		c.s.end(0, zk.ErrSessionExpired)
	} else {
		c.s.established(id, time.Duration(ms)*time.Millisecond)
	}
	return rest
}

// replyHead follows the replies of a connection through its reads.
type replyHead struct {
	pos  int      // bytes of the current reply read, length included
	size int      // its length + 4, once pos >= 4
	head [16]byte // its length, xid and zxid
}

// scan reads b, the next bytes of the replies: it moves the zxid of each
// reply to a request (xid >= 0, as go-zookeeper reads it) out of b and
// into last.
func (r *replyHead) scan(b []byte, last *atomic.Int64) {
	for i := 0; i < len(b); {
		if r.pos < len(r.head) {
			r.head[r.pos] = b[i]
			if r.pos >= 8 && int32(binary.BigEndian.Uint32(r.head[4:])) >= 0 {
				b[i] = 0
			}
			r.pos++
			i++
			switch r.pos {
			case 4:
				r.size = 4 + int(binary.BigEndian.Uint32(r.head[:4]))
			case len(r.head):
				if xid, z := int32(binary.BigEndian.Uint32(r.head[4:])), int64(binary.BigEndian.Uint64(r.head[8:])); xid >= 0 && z > 0 {
					last.Store(z)
				}
			}
		} else {
			k := min(len(b)-i, r.size-r.pos)
			r.pos += k
			i += k
		}
		if r.pos >= 4 && r.pos >= r.size {
			r.pos = 0
		}
	}
}

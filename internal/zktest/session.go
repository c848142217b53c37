package zktest

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"syscall"
	"time"
)

// Sessions records the id and password of every ZooKeeper session
// established through its Dial, so that a test can end one of them as an
// administrator would ([CloseSession]). Pass its Dial to go-zookeeper as
// the connection's dialer: zk.WithDialer(s.Dial). The zero value is ready
// to use and safe for concurrent use.
type Sessions struct {
	mu     sync.Mutex
	passwd map[int64][]byte
}

// Dial dials like net.DialTimeout and records the session that the
// server's first reply on the connection (its connect response) names.
func (s *Sessions) Dial(network, address string, timeout time.Duration) (net.Conn, error) {
	c, err := net.DialTimeout(network, address, timeout)
	if err != nil {
		return nil, err
	}
	return &sniffConn{Conn: c, s: s}, nil
}

// Password returns the password of session id, if it was recorded.
func (s *Sessions) Password(id int64) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.passwd[id]
	return p, ok
}

func (s *Sessions) record(id int64, passwd []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.passwd == nil {
		s.passwd = make(map[int64][]byte)
	}
	s.passwd[id] = passwd
}

// sniffConn passes a connection through and parses the first frame the
// server sends: the connect response.
type sniffConn struct {
	net.Conn
	s    *Sessions
	head []byte // the first frame so far; nil once parsed
	done bool
}

func (c *sniffConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if !c.done && n > 0 {
		c.head = append(c.head, b[:n]...)
		if id, passwd, ok := parseConnectResponse(c.head); ok {
			c.done, c.head = true, nil
			if id != 0 {
				c.s.record(id, passwd)
			}
		}
	}
	return n, err
}

// parseConnectResponse parses a length-prefixed connect response:
// protocolVersion int32, timeOut int32, sessionId int64, passwd buffer. It
// reports false until b holds the whole frame.
func parseConnectResponse(b []byte) (id int64, passwd []byte, ok bool) {
	if len(b) < 4 {
		return 0, nil, false
	}
	n := int(binary.BigEndian.Uint32(b))
	if len(b) < 4+n || n < 20 {
		return 0, nil, false
	}
	f := b[4 : 4+n]
	id = int64(binary.BigEndian.Uint64(f[8:]))
	pl := int(int32(binary.BigEndian.Uint32(f[16:])))
	if pl < 0 || 20+pl > len(f) {
		return 0, nil, true // no password: nothing to record
	}
	return id, append([]byte(nil), f[20:20+pl]...), true
}

// ErrSessionGone is returned by CloseSession when the session had already
// ended.
var ErrSessionGone = errors.New("zktest: session already ended")

// CloseSession ends ZooKeeper session id, as an administrator would: it
// connects to the server at addr as that session (with its password, which
// a Sessions recorded), and asks the server to close it. The server deletes
// the session's ephemeral nodes; the session's own client learns, when it
// reconnects, that its session has expired.
//
// Taking the session over closes its client's connection, and a client
// that reconnects at once can take the session back before the close
// request is applied (its new connection then stays attached to the
// closed session, unanswered, until the client's own read timeout).
// So the close request goes in the same write as the connect request, and
// CloseSession connects as the session again until the server answers
// that it is gone: that last takeover closes any connection still attached
// to it.
//
// A try may get no answer at all: when the close request of an earlier
// try, whose connection the client took back, is applied between the
// server's acceptance of this try's connect request and the arrival of its
// close request, the server finds the session closing and drops the
// request without a reply ("Dropping request", a MissingSessionException
// in ZooKeeperServer), leaving the connection open. So a try waits
// replyWait for its reply, then the next one asks again. CloseSession
// gives up after closeTimeout. It returns ErrSessionGone if the session
// had ended before the first try.
func CloseSession(addr string, id int64, passwd []byte) error {
	deadline := time.Now().Add(closeTimeout)
	var last error
	for try := 0; time.Now().Before(deadline); try++ {
		err := closeSession(addr, id, passwd, deadline)
		switch {
		case errors.Is(err, ErrSessionGone):
			if try > 0 {
				return nil
			}
			return err
		case err == nil, errors.Is(err, errTakenBack), errors.Is(err, errNoReply):
			// Closed, taken back, or dropped: make sure.
			last = err
		default:
			return err
		}
	}
	if last == nil {
		return fmt.Errorf("zktest: CloseSession: the session still lives after %v", closeTimeout)
	}
	return fmt.Errorf("zktest: CloseSession: the session still lives after %v: %w", closeTimeout, last)
}

// closeTimeout bounds CloseSession, and replyWait how long one of its
// tries waits for the reply to its close request (which takes a few
// milliseconds, tens on a loaded machine: one fsynced write).
const (
	closeTimeout = 10 * time.Second
	replyWait    = time.Second
)

// errTakenBack means the server closed the connection before the session
// was closed: its client reconnected.
var errTakenBack = errors.New("connection closed by the server")

// errNoReply means the server accepted the connection as the session but
// did not answer its close request within replyWait.
var errNoReply = errors.New("no reply to the close request within " + replyWait.String())

// closeSession connects as session id and closes it, by deadline. It
// returns ErrSessionGone if the server does not know the session.
func closeSession(addr string, id int64, passwd []byte, deadline time.Time) error {
	c, err := net.DialTimeout("tcp", addr, time.Until(deadline))
	if err != nil {
		return fmt.Errorf("zktest: CloseSession: %w", err)
	}
	defer c.Close()
	_ = c.SetDeadline(deadline)

	// ConnectRequest: protocolVersion, lastZxidSeen, timeOut, sessionId,
	// passwd, readOnly; then RequestHeader{xid 1, type closeSession (-11)}.
	req := binary.BigEndian.AppendUint32(nil, 0)
	req = binary.BigEndian.AppendUint64(req, 0)
	req = binary.BigEndian.AppendUint32(req, uint32(MaxSessionTimeout.Milliseconds()))
	req = binary.BigEndian.AppendUint64(req, uint64(id))
	req = binary.BigEndian.AppendUint32(req, uint32(len(passwd)))
	req = append(req, passwd...)
	req = append(req, 0)
	var opCloseSession int32 = -11
	hdr := binary.BigEndian.AppendUint32(nil, 1)
	hdr = binary.BigEndian.AppendUint32(hdr, uint32(opCloseSession))
	if _, err := c.Write(append(frame(req), frame(hdr)...)); err != nil {
		return fmt.Errorf("zktest: CloseSession: connect: %w", takenBack(err))
	}
	resp, err := readFrame(c)
	if err != nil {
		return fmt.Errorf("zktest: CloseSession: connect response: %w", takenBack(err))
	}
	if len(resp) < 16 {
		return fmt.Errorf("zktest: CloseSession: short connect response (%d bytes)", len(resp))
	}
	if timeout := int32(binary.BigEndian.Uint32(resp[4:])); timeout <= 0 {
		return fmt.Errorf("%w: %#x", ErrSessionGone, id)
	}
	if got := int64(binary.BigEndian.Uint64(resp[8:])); got != id {
		return fmt.Errorf("zktest: CloseSession: server gave session %#x, want %#x", got, id)
	}
	if replyBy := time.Now().Add(replyWait); replyBy.Before(deadline) {
		_ = c.SetReadDeadline(replyBy)
	}
	return readCloseReply(c)
}

// readCloseReply reads the reply to the close request (xid 1) from c.
func readCloseReply(c net.Conn) error {
	for {
		// ReplyHeader: xid int32, zxid int64, err int32. Watch events
		// (xid -1) and pings (xid -2) may come first.
		r, err := readFrame(c)
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return fmt.Errorf("zktest: CloseSession: reply: %w (%w)", errNoReply, err)
		}
		if err != nil {
			return fmt.Errorf("zktest: CloseSession: reply: %w", takenBack(err))
		}
		if len(r) < 16 {
			return fmt.Errorf("zktest: CloseSession: short reply (%d bytes)", len(r))
		}
		if xid := int32(binary.BigEndian.Uint32(r)); xid != 1 {
			continue
		}
		if code := int32(binary.BigEndian.Uint32(r[12:])); code != 0 {
			return fmt.Errorf("zktest: CloseSession: server error %d", code)
		}
		return nil
	}
}

// takenBack marks err, an error of a connection the server closed, with
// errTakenBack.
func takenBack(err error) error {
	var ne net.Error
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) || (errors.As(err, &ne) && !ne.Timeout()) {
		return fmt.Errorf("%w: %w", errTakenBack, err)
	}
	return err
}

// frame returns b with its length in front.
func frame(b []byte) []byte {
	return append(binary.BigEndian.AppendUint32(nil, uint32(len(b))), b...)
}

func readFrame(r io.Reader) ([]byte, error) {
	var n [4]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return nil, err
	}
	l := binary.BigEndian.Uint32(n[:])
	if l > 1<<20 {
		return nil, fmt.Errorf("frame of %d bytes", l)
	}
	b := make([]byte, l)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, err
	}
	return b, nil
}

package zkdriver

import (
	"net"
	"sync"
	"time"
)

// batchWriter writes a connection's requests in batches. go-zookeeper
// writes each request with a system call of its own, from its one sending
// goroutine; with many requests in flight those calls are most of the
// client's CPU. Write appends the request to a buffer and returns; a
// goroutine of the connection writes what the buffer holds, so the
// requests that come while it writes one batch go out together in the
// next. The order of the requests is kept: they have one buffer and one
// writer.
//
// A failed write fails every later Write and closes the connection, which
// go-zookeeper's receiving goroutine then reports as the connection's loss
// (as it would have after its own failed write). Each write has the
// deadline go-zookeeper asked for its last request (SetWriteDeadline:
// its receive timeout).
type batchWriter struct {
	conn net.Conn
	kick chan struct{} // one slot: the buffer has data
	done chan struct{} // closed by stop
	once sync.Once

	mu      sync.Mutex
	buf     []byte        // to write
	err     error         // of a failed write
	timeout time.Duration // of each write; 0: none
	started bool          // the writing goroutine runs
}

func newBatchWriter(c net.Conn) *batchWriter {
	return &batchWriter{conn: c, kick: make(chan struct{}, 1), done: make(chan struct{})}
}

// Write queues a copy of p.
func (w *batchWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	if w.err != nil {
		w.mu.Unlock()
		return 0, w.err
	}
	w.buf = append(w.buf, p...)
	if !w.started {
		w.started = true
		go w.run()
	}
	w.mu.Unlock()
	select {
	case w.kick <- struct{}{}:
	default:
	}
	return len(p), nil
}

// setDeadline records the time go-zookeeper gives a write, from the
// deadline it sets before one. It sets none on the connection: a write
// of a batch may be under way.
func (w *batchWriter) setDeadline(t time.Time) {
	if t.IsZero() {
		return // go-zookeeper's clearing after its write
	}
	w.mu.Lock()
	w.timeout = time.Until(t)
	w.mu.Unlock()
}

// run writes the buffer whenever it has data, until stop or a failed
// write.
func (w *batchWriter) run() {
	var out []byte
	for {
		select {
		case <-w.kick:
		case <-w.done:
			return
		}
		w.mu.Lock()
		out, w.buf = w.buf, out[:0]
		d := w.timeout
		w.mu.Unlock()
		if len(out) == 0 {
			continue
		}
		if d > 0 {
			_ = w.conn.SetWriteDeadline(time.Now().Add(d))
		}
		if _, err := w.conn.Write(out); err != nil {
			w.mu.Lock()
			w.err = err
			w.mu.Unlock()
			_ = w.conn.Close()
			return
		}
	}
}

// stop ends the writing goroutine; what it has not written is dropped
// (the connection is closing).
func (w *batchWriter) stop() { w.once.Do(func() { close(w.done) }) }

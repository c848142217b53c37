package zkdriver

import (
	"bytes"
	"errors"
	"io"
	"net"
	"os"
	"testing"
	"testing/synctest"
	"time"
)

// TestBatchWriterOrder: every request written reaches the peer, whole and
// in order, however the writes were batched.
func TestBatchWriterOrder(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		defer b.Close()
		w := newBatchWriter(a)
		defer w.stop()
		var want bytes.Buffer
		got := make(chan []byte)
		go func() {
			p, _ := io.ReadAll(b)
			got <- p
		}()
		for i := range 200 {
			p := bytes.Repeat([]byte{byte(i)}, 1+i%7)
			want.Write(p)
			w.setDeadline(time.Now().Add(time.Second))
			if n, err := w.Write(p); n != len(p) || err != nil {
				t.Fatalf("Write %d = %d, %v", i, n, err)
			}
			w.setDeadline(time.Time{}) // go-zookeeper's clearing: ignored
			if i%50 == 0 {
				synctest.Wait() // one batch out before the next writes
			}
		}
		synctest.Wait()
		w.stop()
		a.Close()
		if p := <-got; !bytes.Equal(p, want.Bytes()) {
			t.Fatalf("the peer read %d bytes, not the %d written in order", len(p), want.Len())
		}
	})
}

// TestBatchWriterFailure: a write that fails closes the connection, and
// every later Write fails with its error.
func TestBatchWriterFailure(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		b.Close()
		w := newBatchWriter(a)
		defer w.stop()
		if _, err := w.Write([]byte("x")); err != nil {
			t.Fatalf("first Write: %v; want queued", err)
		}
		synctest.Wait()
		if _, err := w.Write([]byte("y")); !errors.Is(err, io.ErrClosedPipe) {
			t.Fatalf("Write after a failed write: %v; want io.ErrClosedPipe", err)
		}
		if _, err := a.Read(make([]byte, 1)); !errors.Is(err, io.ErrClosedPipe) {
			t.Fatalf("Read after the failed write: %v; want the connection closed", err)
		}
	})
}

// TestBatchWriterDeadline: a batch the peer does not read fails at the
// deadline go-zookeeper set for its request.
func TestBatchWriterDeadline(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		a, b := net.Pipe()
		defer b.Close()
		w := newBatchWriter(a)
		defer w.stop()
		w.setDeadline(time.Now().Add(2 * time.Second))
		start := time.Now()
		if _, err := w.Write([]byte("x")); err != nil {
			t.Fatal(err)
		}
		synctest.Wait()
		if _, err := w.Write([]byte("y")); err != nil {
			t.Fatalf("Write before the deadline: %v", err)
		}
		time.Sleep(3 * time.Second)
		synctest.Wait()
		_, err := w.Write([]byte("z"))
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("Write %v after the unread batch: %v; want os.ErrDeadlineExceeded", time.Since(start), err)
		}
	})
}

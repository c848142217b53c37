package netcount_test

import (
	"context"
	"io"
	"net"
	"testing"

	"github.com/go-locker/locker/internal/goleak"
	"github.com/go-locker/locker/internal/netcount"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestCounter(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	done := make(chan int64)
	go func() {
		s, err := ln.Accept()
		if err != nil {
			done <- -1
			return
		}
		n, _ := io.Copy(io.Discard, s)
		s.Close()
		done <- n
	}()
	var c netcount.Counter
	conn, err := c.DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"PING\r\n", "GET k\r\n", "SET k v\r\n"} {
		if _, err := conn.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	conn.Close()
	if got := c.Dials(); got != 1 {
		t.Errorf("Dials() = %d; want 1", got)
	}
	if got := <-done; got != 22 {
		t.Errorf("the server read %d bytes; want 22", got)
	}
	if got := c.Load(); got != 3 {
		t.Errorf("Counter = %d after 3 writes", got)
	}
	if _, err := c.DialContext(context.Background(), "tcp", "127.0.0.1:0"); err == nil {
		t.Error("DialContext to port 0 succeeded")
	}
}

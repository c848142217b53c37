package zk

import (
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-locker/locker/internal/zktest"
)

// TestFLWRealServer runs the four-letter words against a real standalone
// server with one client connected. FLWSrvr and FLWCons parse the output
// format of ZooKeeper 3.4 (go-zookeeper v1.0.4's, kept unchanged in this
// copy), which 3.5 and later changed (a build date of the form 2024-12-29,
// a fractional avglat): TestFLWSrvrParse and TestFLWConsParse check the
// parsing on that format.
func TestFLWRealServer(t *testing.T) {
	srv := zktest.Standalone(t)
	c := connectTest(t, srv)
	servers := []string{srv.Addr}

	if oks := FLWRuok(servers, 10*time.Second); len(oks) != 1 || !oks[0] {
		t.Errorf("FLWRuok = %v; want [true]", oks)
	}
	srvr, err := fourLetterWord(srv.Addr, "srvr", 10*time.Second)
	if err != nil || !strings.Contains(string(srvr), "\nMode: standalone\n") {
		t.Errorf("srvr: %q, %v; want the stats of a standalone server", srvr, err)
	}
	cons, err := fourLetterWord(srv.Addr, "cons", 10*time.Second)
	if sid := "sid=0x" + strconv.FormatInt(c.SessionID(), 16) + ","; err != nil || !strings.Contains(string(cons), sid) {
		t.Errorf("cons: %q, %v; want a line with %s", cons, err, sid)
	}
	if oks := FLWRuok([]string{"127.0.0.1:1"}, time.Second); len(oks) != 1 || oks[0] {
		t.Errorf("FLWRuok of a closed port = %v; want [false]", oks)
	}
}

// fourLetterServer serves response to each four-letter word on a loopback
// port until t ends.
func fourLetterServer(t *testing.T, response string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			cmd := make([]byte, 4)
			if _, err := io.ReadFull(conn, cmd); err == nil {
				conn.Write([]byte(response))
			}
			conn.Close()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		wg.Wait()
	})
	return ln.Addr().String()
}

func TestFLWSrvrParse(t *testing.T) {
	addr := fourLetterServer(t, "Zookeeper version: 3.4.6-1569965, built on 02/20/2014 09:09 GMT\n"+
		"Latency min/avg/max: 0/1.5/10\nReceived: 4207\nSent: 4220\nConnections: 81\nOutstanding: 1\n"+
		"Zxid: 0x110a7a8f37\nMode: leader\nNode count: 306\n")
	stats, ok := FLWSrvr([]string{addr}, 10*time.Second)
	if !ok || len(stats) != 1 || stats[0].Error != nil {
		t.Fatalf("FLWSrvr = %+v, %v; want one server's stats", stats, ok)
	}
	want := ServerStats{
		Server: addr, Version: "3.4.6-1569965", BuildTime: time.Date(2014, 2, 20, 9, 9, 0, 0, time.UTC),
		MinLatency: 0, AvgLatency: 1.5, MaxLatency: 10, Received: 4207, Sent: 4220, Connections: 81,
		Outstanding: 1, Epoch: 0x11, Counter: 0x0a7a8f37, Mode: ModeLeader, NodeCount: 306,
	}
	got := *stats[0]
	if !got.BuildTime.Equal(want.BuildTime) {
		t.Errorf("BuildTime %v; want %v", got.BuildTime, want.BuildTime)
	}
	got.BuildTime = want.BuildTime
	if got != want {
		t.Errorf("FLWSrvr:\n got %+v\nwant %+v", got, want)
	}

	unparsable := fourLetterServer(t, "Zookeeper version: 3.8.0-${mvngit.commit.id}, built on 2024-12-29 17:54 UTC\n")
	stats, ok = FLWSrvr([]string{addr, unparsable, "127.0.0.1:1"}, 10*time.Second)
	if ok || len(stats) != 3 || stats[0].Error != nil || stats[0].Mode != ModeLeader || stats[1].Error == nil || stats[1].Server != unparsable || stats[2].Error == nil {
		t.Errorf("FLWSrvr of a good, an unparsable and a closed server = %+v, %v; want stats, two errors, false", stats, ok)
	}
}

func TestFLWConsParse(t *testing.T) {
	addr := fourLetterServer(t, " /10.42.45.231:45361[1](queued=0,recved=9435,sent=9457,sid=0x94c2989e04716b5,lop=PING,"+
		"est=1427238717217,to=20001,lcxid=0x55120915,lzxid=0xffffffffffffffff,lresp=1427259255908,llat=0,minlat=0,avglat=1,maxlat=17)\n"+
		" /127.0.0.1:54772[0](queued=0,recved=1,sent=0)\n\n")
	sc, ok := FLWCons([]string{addr}, 10*time.Second)
	if ok || len(sc) != 1 || sc[0].Error != nil || len(sc[0].Clients) != 1 {
		// The second line (the cons connection itself) does not parse: ok
		// is false and the line left out, as in go-zookeeper.
		t.Fatalf("FLWCons = %+v, %v; want one client and false", sc, ok)
	}
	want := ServerClient{
		Addr: "10.42.45.231:45361", Queued: 0, Received: 9435, Sent: 9457, SessionID: 0x94c2989e04716b5,
		LastOperation: "PING", Established: time.Unix(1427238717217, 0), Timeout: 20001,
		Lcxid: 0x55120915, Lzxid: -1, LastResponse: time.Unix(1427259255908, 0),
		LastLatency: 0, MinLatency: 0, AvgLatency: 1, MaxLatency: 17,
	}
	if got := *sc[0].Clients[0]; got != want {
		t.Errorf("FLWCons:\n got %+v\nwant %+v", got, want)
	}

	sc, ok = FLWCons([]string{"127.0.0.1:1"}, time.Second)
	if ok || len(sc) != 1 || sc[0].Error == nil {
		t.Errorf("FLWCons of a closed port = %+v, %v; want an error and false", sc, ok)
	}
}

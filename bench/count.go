package main

import (
	"context"
	"maps"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-locker/locker/internal/netcount"
	"google.golang.org/grpc"
)

// Round trips are counted as the client's Write calls on its connections:
// go-redis and go-zookeeper write each command, pipeline or request with
// one Write, so a Write is a request that waits for its reply. (locker's
// copy of go-zookeeper writes the requests queued together with one Write:
// zkConn counts each request in it.) For etcd,
// whose gRPC client writes HTTP/2 frames in batches, with window updates
// and pings, the count is of gRPC requests instead (see rpcCounter).

// counter counts the round trips of every client of one server.
type counter = netcount.Counter

// cmdStats is Redis's INFO commandstats: calls per command, and under
// usecKey(command) the server time the calls took, in microseconds.
type cmdStats map[string]int64

const usecPrefix = "usec "

func usecKey(cmd string) string { return usecPrefix + cmd }

func isUsec(k string) bool { return strings.HasPrefix(k, usecPrefix) }

// redisCmdStats reads INFO commandstats from addr over a connection of its
// own, which is not counted.
func redisCmdStats(addr string) (cmdStats, error) {
	s, err := redisDo(addr, "INFO", "commandstats")
	if err != nil {
		return nil, err
	}
	m := cmdStats{}
	for line := range strings.SplitSeq(s, "\n") {
		// cmdstat_set:calls=3,usec=12,usec_per_call=4.00,...
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		if !ok || !strings.HasPrefix(name, "cmdstat_") {
			continue
		}
		name = strings.ToUpper(strings.TrimPrefix(name, "cmdstat_"))
		for f := range strings.SplitSeq(rest, ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				m[name] = n
			}
			if v, ok := strings.CutPrefix(f, "usec="); ok {
				n, _ := strconv.ParseInt(v, 10, 64)
				m[usecKey(name)] = n
			}
		}
	}
	return m, nil
}

// sub returns the calls made between o and s, without INFO itself.
func (s cmdStats) sub(o cmdStats) cmdStats {
	d := cmdStats{}
	for k, v := range s {
		if k == "INFO" || k == usecKey("INFO") {
			continue
		}
		if v -= o[k]; v > 0 {
			d[k] = v
		}
	}
	return d
}

func (s cmdStats) total() int64 {
	var t int64
	for k, v := range s {
		if !isUsec(k) && k != zkWrites {
			t += v
		}
	}
	return t
}

// perCall returns the server time per call of cmd in microseconds, or 0.
func (s cmdStats) perCall(cmd string) float64 {
	if s[cmd] == 0 {
		return 0
	}
	return float64(s[usecKey(cmd)]) / float64(s[cmd])
}

// rpcCounter counts the gRPC requests of etcd clients, by method: a unary
// call is one request, a message sent on a stream (Watch, LeaseKeepAlive)
// another. Each is also one round trip on the server's counter.
type rpcCounter struct{ opCounter }

func (c *rpcCounter) add(method string) {
	if i := strings.LastIndexByte(method, '/'); i >= 0 {
		method = method[i+1:]
	}
	c.opCounter.add(method)
}

func (c *rpcCounter) unary(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
	c.add(method)
	return invoker(ctx, method, req, reply, cc, opts...)
}

func (c *rpcCounter) stream(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
	s, err := streamer(ctx, desc, cc, method, opts...)
	if err != nil {
		return nil, err
	}
	return countStream{s, c, method}, nil
}

type countStream struct {
	grpc.ClientStream
	c      *rpcCounter
	method string
}

func (s countStream) SendMsg(m any) error {
	s.c.add(s.method)
	return s.ClientStream.SendMsg(m)
}

// zkOps names ZooKeeper's request opcodes.
var zkOps = map[int32]string{
	1: "create", 2: "delete", 3: "exists", 4: "getData", 5: "setData", 6: "getACL", 7: "setACL",
	8: "getChildren", 9: "sync", 11: "ping", 12: "getChildren2", 13: "check", 14: "multi",
	15: "create2", 16: "reconfig", 17: "checkWatches", 18: "removeWatches", 19: "createContainer",
	20: "deleteContainer", 21: "createTTL", 22: "multiRead", -11: "closeSession", 100: "setAuth",
	101: "setWatches", 102: "sasl", 104: "getEphemerals", 105: "getAllChildrenNumber",
	106: "addWatch", 107: "whoAmI",
}

// zkConn counts ZooKeeper requests by opcode: each request is a 4-byte
// length followed by xid, opcode and body. go-zookeeper writes each
// request with one Write; locker's copy of it (driver/zkdriver/zk) writes
// the requests queued together with one Write, so a Write is read as
// the requests it carries, each a round trip for its caller. The first
// Write of a connection is the connect request, which has no opcode.
type zkConn struct {
	net.Conn
	c       *opCounter
	started bool
}

func (z *zkConn) Write(b []byte) (int, error) {
	if !z.started {
		z.started = true
		z.c.add("connect")
		return z.Conn.Write(b)
	}
	z.c.write()
	for p := b; len(p) >= 12; {
		code := int32(uint32(p[8])<<24 | uint32(p[9])<<16 | uint32(p[10])<<8 | uint32(p[11]))
		op := zkOps[code]
		if op == "" {
			op = "op" + strconv.Itoa(int(code))
		}
		z.c.add(op)
		n := 4 + int(uint32(p[0])<<24|uint32(p[1])<<16|uint32(p[2])<<8|uint32(p[3]))
		if n > len(p) {
			break
		}
		p = p[n:]
	}
	return z.Conn.Write(b)
}

// opCounter counts requests by kind, and each as a round trip, and the
// Writes (system calls) that carried them.
type opCounter struct {
	trips *counter
	mu    sync.Mutex
	m     cmdStats
}

// zkWrites is the key of the Writes in an opCounter's counts.
const zkWrites = "(writes)"

func (c *opCounter) write() {
	c.mu.Lock()
	if c.m == nil {
		c.m = cmdStats{}
	}
	c.m[zkWrites]++
	c.mu.Unlock()
}

func (c *opCounter) add(op string) {
	c.trips.Add(1)
	c.mu.Lock()
	if c.m == nil {
		c.m = cmdStats{}
	}
	c.m[op]++
	c.mu.Unlock()
}

// snapshot returns the counts so far.
func (c *opCounter) snapshot() cmdStats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.m)
}

// dialTimeout dials a ZooKeeper connection whose requests are counted, in
// go-zookeeper's form.
func (c *opCounter) dialTimeout(network, addr string, timeout time.Duration) (net.Conn, error) {
	conn, err := net.DialTimeout(network, addr, timeout)
	if err != nil {
		return nil, err
	}
	return &zkConn{Conn: conn, c: c}, nil
}

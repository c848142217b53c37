package zkdriver

import "github.com/go-locker/locker/driver/zkdriver/zk"

// ReconnectAtOnce returns zk.WithReconnectAtOnce(): a connection that
// worked and broke is retried at once, then after 50, 150, 300 and 300 ms,
// before go-zookeeper's pauses of a second, which a lease of a second or
// two cannot absorb. Connect uses it unless its zkOpts set another host
// provider.
func ReconnectAtOnce() func(*zk.Conn) { return zk.WithReconnectAtOnce() }

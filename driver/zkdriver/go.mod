module github.com/go-locker/locker/driver/zkdriver

go 1.24

require (
	github.com/go-locker/locker v0.1.0
	github.com/go-zookeeper/zk v1.0.4
)

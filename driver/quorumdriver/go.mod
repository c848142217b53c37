module github.com/go-locker/locker/driver/quorumdriver

go 1.26.0

require (
	github.com/go-locker/locker v0.1.0
	github.com/go-locker/locker/driver/redisdriver v0.1.0
	github.com/redis/go-redis/v9 v9.23.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.48.0 // indirect
)

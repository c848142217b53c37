module github.com/go-locker/locker/driver/memcachedriver

go 1.24

require (
	github.com/bradfitz/gomemcache v0.0.0-20260422231931-4d751bb6e37c
	github.com/go-locker/locker v0.1.0
)

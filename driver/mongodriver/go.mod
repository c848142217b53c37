module github.com/go-locker/locker/driver/mongodriver

go 1.25.0

require (
	github.com/go-locker/locker v0.1.0
	go.mongodb.org/mongo-driver/v2 v2.10.0
)

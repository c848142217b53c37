module github.com/go-locker/locker/driver/natsdriver

go 1.24

require (
	github.com/go-locker/locker v0.1.0
	github.com/nats-io/nats.go v1.47.0
)

require (
	github.com/klauspost/compress v1.18.0 // indirect
	github.com/nats-io/nkeys v0.4.11 // indirect
	github.com/nats-io/nuid v1.0.1 // indirect
	golang.org/x/crypto v0.37.0 // indirect
	golang.org/x/sys v0.32.0 // indirect
)

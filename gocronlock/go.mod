module github.com/go-locker/locker/gocronlock

go 1.26.0

require (
	github.com/go-co-op/gocron/v2 v2.21.2
	github.com/go-locker/locker v0.1.0
	github.com/jonboulle/clockwork v0.5.0
)

require (
	github.com/google/uuid v1.6.0 // indirect
	github.com/robfig/cron/v3 v3.0.1 // indirect
	github.com/stretchr/testify v1.12.1 // indirect
)

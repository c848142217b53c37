module github.com/go-locker/locker

go 1.25.0

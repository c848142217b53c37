module github.com/go-locker/locker

go 1.24

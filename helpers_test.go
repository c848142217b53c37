package locker_test

import (
	"time"

	"github.com/go-locker/locker/driver"
)

func driverRequest(key string) driver.Request {
	return driver.Request{Key: key, Owner: "0123456789abcdef0123456789abcdef", Mode: driver.Exclusive, TTL: 15 * time.Second}
}

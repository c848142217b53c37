package memcachedriver_test

import (
	"github.com/bradfitz/gomemcache/memcache"
	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/memcachedriver"
)

// dialMatrix opens a client of the fault matrix.
func dialMatrix(addr string) (driver.Driver, func() error, error) {
	c := memcache.New(addr)
	c.Timeout = clientTimeout
	c.MaxIdleConns = 16
	d, err := memcachedriver.New(c, nil)
	if err != nil {
		return nil, nil, err
	}
	return d, func() error {
		_ = d.Close()
		return c.Close()
	}, nil
}

// Package memcachedriver is a locker driver for memcached.
package memcachedriver

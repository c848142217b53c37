// Package etcddriver is a locker driver for etcd.
package etcddriver

// Command etcd is the etcd server the tests of driver/etcddriver and
// cmd/locker run as a process of its own (built by
// internal/proc.GoBinary): etcd's own command line, at the version this
// module requires, kept out of every published go.mod.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }

package etcddriver_test

import (
	"context"
	"fmt"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver/etcddriver"
	"github.com/go-locker/locker/internal/etcdtest"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// A lock on etcd, and a write to etcd that happens only while the lock is
// held: the write's transaction compares the lock entry's create revision
// with the hold's fencing token.
func Example() {
	// An etcd server for the example; use your own cluster's endpoints.
	srv, err := etcdtest.StartServer()
	if err != nil {
		panic(err)
	}
	defer srv.Close()
	cli, err := clientv3.New(clientConfig(srv.ClientURL))
	if err != nil {
		panic(err)
	}
	defer cli.Close()

	d, err := etcddriver.New(cli, nil)
	if err != nil {
		panic(err)
	}
	defer d.Close()
	ctx := context.Background()

	c := locker.New(d, locker.WithTTL(10*time.Second)) // one Client per process
	defer c.Close(ctx)
	m := c.Mutex("orders/42")
	if err := m.LockContext(ctx); err != nil {
		panic(err)
	}
	held, _ := d.Cmp(m.Key(), uint64(m.Token()))
	resp, err := cli.Txn(ctx).If(held).Then(clientv3.OpPut("orders/42/state", "paid")).Commit()
	if err != nil {
		panic(err)
	}
	fmt.Println("written while held:", resp.Succeeded)

	first := m.Token()
	if err := m.UnlockContext(ctx); err != nil {
		panic(err)
	}
	resp, err = cli.Txn(ctx).If(held).Then(clientv3.OpPut("orders/42/state", "refunded")).Commit()
	if err != nil {
		panic(err)
	}
	fmt.Println("written after unlock:", resp.Succeeded)

	if err := m.LockContext(ctx); err != nil {
		panic(err)
	}
	fmt.Println("next token is greater:", m.Token() > first)
	m.Unlock()
	// Output:
	// written while held: true
	// written after unlock: false
	// next token is greater: true
}

package zkdriver

import (
	"context"

	"github.com/go-locker/locker/driver/driverkit"
	"github.com/go-zookeeper/zk"
)

// The requests the driver makes with a context. go-zookeeper's calls take
// none: each waits for its reply or the loss of the connection. They run
// through driverkit.Call, which returns by ctx's deadline and leaves the
// request to finish (a watch it sets is then never read).

// reply holds the results of one request.
type reply struct {
	data  []byte
	stat  *zk.Stat
	names []string
	ch    <-chan zk.Event
	multi []zk.MultiResponse
}

func (d *Driver) get(ctx context.Context, path string) ([]byte, *zk.Stat, error) {
	r, err := driverkit.Call(ctx, func() (r reply, err error) {
		r.data, r.stat, err = d.conn.Get(path)
		return r, err
	}, nil)
	return r.data, r.stat, err
}

func (d *Driver) getW(ctx context.Context, path string) ([]byte, *zk.Stat, <-chan zk.Event, error) {
	r, err := driverkit.Call(ctx, func() (r reply, err error) {
		r.data, r.stat, r.ch, err = d.conn.GetW(path)
		return r, err
	}, nil)
	return r.data, r.stat, r.ch, err
}

func (d *Driver) children(ctx context.Context, path string) ([]string, error) {
	r, err := driverkit.Call(ctx, func() (r reply, err error) {
		r.names, _, err = d.conn.Children(path)
		return r, err
	}, nil)
	return r.names, err
}

func (d *Driver) childrenW(ctx context.Context, path string) ([]string, <-chan zk.Event, error) {
	r, err := driverkit.Call(ctx, func() (r reply, err error) {
		r.names, _, r.ch, err = d.conn.ChildrenW(path)
		return r, err
	}, nil)
	return r.names, r.ch, err
}

func (d *Driver) set(ctx context.Context, path string, data []byte, version int32) (*zk.Stat, error) {
	r, err := driverkit.Call(ctx, func() (r reply, err error) {
		r.stat, err = d.conn.Set(path, data, version)
		return r, err
	}, nil)
	return r.stat, err
}

func (d *Driver) del(ctx context.Context, path string, version int32) error {
	_, err := driverkit.Call(ctx, func() (reply, error) { return reply{}, d.conn.Delete(path, version) }, nil)
	return err
}

func (d *Driver) multi(ctx context.Context, ops ...any) ([]zk.MultiResponse, error) {
	r, err := driverkit.Call(ctx, func() (r reply, err error) {
		r.multi, err = d.conn.Multi(ops...)
		return r, err
	}, nil)
	return r.multi, err
}

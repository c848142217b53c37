package etcddriver

import (
	"context"
	"math"
	"sort"
	"time"

	"github.com/go-locker/locker/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Inspect implements driver.Inspector: one range read of the lock's
// entries, of which holders are those the grant rule admits in
// create-revision order (see admit) and the rest waiters, then one
// TimeToLive per holder. Fence is the largest holder token (etcd's tokens
// are revisions of the whole cluster, with no counter per key).
func (d *Driver) Inspect(ctx context.Context, key string) (st driver.KeyState, err error) {
	holders, waiters, err := d.entries(ctx, key)
	if err != nil {
		return st, d.errs.Wrap(ctx, "inspect", key, err)
	}
	st.Waiting = len(waiters)
	for _, kv := range holders {
		m := parseValue(kv.Value)
		h := driver.Holder{Owner: m.owner, Token: uint64(kv.CreateRevision), Value: m.value}
		if kv.Lease != 0 {
			ttl, err := d.leases.TimeToLive(d.request(ctx), clientv3.LeaseID(kv.Lease))
			if err != nil {
				return driver.KeyState{}, d.errs.Wrap(ctx, "inspect", key, err)
			}
			h.Remaining = time.Duration(max(ttl.TTL, 0)) * time.Second
		}
		switch keyDir(kv.Key) {
		case counted:
			st.Mode, st.Limit, h.Weight = driver.Shared, m.limit, m.weight
		case readers:
			st.Mode = driver.Shared
		}
		st.Holders = append(st.Holders, h)
		st.Fence = max(st.Fence, h.Token)
	}
	return st, nil
}

// entries reads the entries of key's lock and splits them into holders and
// waiters, each in create-revision order.
func (d *Driver) entries(ctx context.Context, key string) (holders, waiters []*mvccpb.KeyValue, err error) {
	if err := d.begin(ctx); err != nil {
		return nil, nil, err
	}
	resp, err := d.kv.Get(d.request(ctx), d.base(key), clientv3.WithPrefix())
	if err != nil {
		return nil, nil, err
	}
	kvs := resp.Kvs
	sort.Slice(kvs, func(i, j int) bool { return kvs[i].CreateRevision < kvs[j].CreateRevision })
	n := 0 // holders are the entries admit grants, in create-revision order
	for n < len(kvs) {
		if ok, err := admit(classOf(kvs[n]), math.MaxInt64, kvs[:n]); !ok || err != nil {
			break
		}
		n++
	}
	return kvs[:n], kvs[n:], nil
}

// ForceRelease implements driver.Inspector: it deletes each holder's
// entry in a transaction that checks its create revision (so that a new
// grant is never deleted), which wakes the waiters; the holders' leases
// are left to them.
func (d *Driver) ForceRelease(ctx context.Context, key string) (n int, err error) {
	holders, _, err := d.entries(ctx, key)
	for _, kv := range holders {
		k := string(kv.Key)
		var resp *clientv3.TxnResponse
		resp, err = d.kv.Txn(d.request(ctx)).If(clientv3.Compare(clientv3.CreateRevision(k), "=", kv.CreateRevision)).Then(clientv3.OpDelete(k)).Commit()
		if err != nil {
			break
		}
		if resp.Succeeded {
			n++
		}
	}
	return n, d.errs.Wrap(ctx, "force-release", key, err)
}

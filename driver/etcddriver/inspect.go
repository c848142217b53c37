package etcddriver

import (
	"context"
	"sort"
	"strings"
	"time"

	"github.com/go-locker/locker/driver"
	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Inspect implements driver.Inspector: one linearizable range read of the
// lock's entries, then one TimeToLive per holder for its remaining TTL.
// Holders are the entries granted by create-revision order (an exclusive
// entry at the head, or the shared entries before the first exclusive
// one); the other entries are waiters. Fence is the largest holder token:
// etcd's tokens are revisions of the whole cluster, with no counter per
// key.
func (d *Driver) Inspect(ctx context.Context, key string) (driver.KeyState, error) {
	const op = "inspect"
	if err := d.begin(ctx); err != nil {
		return driver.KeyState{}, opError(op, key, err)
	}
	holders, waiters, err := d.entries(ctx, key)
	if err != nil {
		return driver.KeyState{}, opError(op, key, err)
	}
	st := driver.KeyState{Waiting: len(waiters)}
	for _, kv := range holders {
		h := driver.Holder{Owner: valueOwner(kv.Value), Token: uint64(kv.CreateRevision)}
		if kv.Lease != 0 {
			ttl, err := d.leases.TimeToLive(ctx, clientv3.LeaseID(kv.Lease))
			if err != nil {
				return driver.KeyState{}, opError(op, key, err)
			}
			h.Remaining = time.Duration(max(ttl.TTL, 0)) * time.Second
		}
		st.Holders = append(st.Holders, h)
		st.Fence = max(st.Fence, h.Token)
		if strings.HasPrefix(string(kv.Key), d.base(key)+readers) {
			st.Mode = driver.Shared
		}
	}
	return st, nil
}

// entries reads the entries of key's lock and splits them into holders and
// waiters, each in create-revision order.
func (d *Driver) entries(ctx context.Context, key string) (holders, waiters []*mvccpb.KeyValue, err error) {
	base := d.base(key)
	resp, err := d.kv.Get(ctx, base, clientv3.WithPrefix())
	if err != nil {
		return nil, nil, err
	}
	kvs := resp.Kvs
	sort.Slice(kvs, func(i, j int) bool { return kvs[i].CreateRevision < kvs[j].CreateRevision })
	for i, kv := range kvs {
		shared := strings.HasPrefix(string(kv.Key), base+readers)
		if len(waiters) == 0 && (shared || i == 0) {
			holders = append(holders, kv)
			if !shared {
				waiters = kvs[i+1:]
				break
			}
			continue
		}
		waiters = kvs[i:]
		break
	}
	return holders, waiters, nil
}

// ForceRelease implements driver.Inspector: it deletes the entry of every
// holder of key (each in a transaction that checks the entry's create
// revision, so that a new grant is never deleted), which wakes the
// waiters and, through their watch on the entry, the holders' LossWatcher
// registrations. The holders' leases are left to them.
func (d *Driver) ForceRelease(ctx context.Context, key string) (int, error) {
	const op = "force-release"
	if err := d.begin(ctx); err != nil {
		return 0, opError(op, key, err)
	}
	holders, _, err := d.entries(ctx, key)
	if err != nil {
		return 0, opError(op, key, err)
	}
	n := 0
	for _, kv := range holders {
		k := string(kv.Key)
		resp, err := d.kv.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(k), "=", kv.CreateRevision)).
			Then(clientv3.OpDelete(k)).Commit()
		if err != nil {
			return n, opError(op, key, err)
		}
		if resp.Succeeded {
			n++
		}
	}
	return n, nil
}

var _ driver.Inspector = (*Driver)(nil)

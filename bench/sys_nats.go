package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/go-locker/locker/driver/natsdriver"
	"github.com/go-locker/locker/internal/proc"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsSystems are the systems on nats-server: locker over natsdriver,
// and the plain key-value lock a NATS user writes first.
func natsSystems() []*system {
	return []*system{
		{
			name: "locker", server: "nats", kind: kindLocker, clients: 4,
			desc: "locker.Mutex over natsdriver, TTL 10s; contended cells: 4 drivers (one connection each, like 4 processes), goroutine i on driver i%4",
			open: openLockerNats,
		},
		{
			name: "locker 1 driver", server: "nats", kind: kindLocker, clients: 1, contendedOnly: true,
			desc: "as locker, but all goroutines on one driver (one process)",
			open: openLockerNats,
		},
		{
			name: "raw", server: "nats", kind: kindRaw, clients: 4,
			desc: "kv.Create + kv.Delete(LastRevision) on the same bucket, no TTL; waiters keep a kv.Watch of the key (UpdatesOnly) and retry on DEL/PURGE",
			open: openRawNats,
		},
	}
}

// natsBucket is the bucket of the bench's locks, which natsdriver
// creates with its settings (file storage, per-key TTLs).
const natsBucket = "bench"

// startNats starts nats-server (servers/nats, built by proc.GoBinary)
// with JetStream on file storage; sync selects JetStream's sync_interval
// ("" for the default of 2 minutes, "always" for every write).
func startNats(sync string) (*server, error) {
	bin, err := proc.GoBinary("nats")
	if err != nil {
		return nil, fmt.Errorf("nats-server: %w", errNotInstalled)
	}
	port, err := freePort()
	if err != nil {
		return nil, err
	}
	mport, err := freePort()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "locker-bench-nats-")
	if err != nil {
		return nil, err
	}
	conf := fmt.Sprintf("listen: \"127.0.0.1:%d\"\nhttp: \"127.0.0.1:%d\"\njetstream {\n  store_dir: %q\n", port, mport, dir+"/js")
	if sync != "" {
		conf += "  sync_interval: " + sync + "\n"
	}
	conf += "}\n"
	if err := os.WriteFile(dir+"/nats.conf", []byte(conf), 0o600); err != nil {
		return nil, err
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	hc := &http.Client{Timeout: time.Second}
	s, err := start("nats", dir, addr, exec.Command(bin, "-c", dir+"/nats.conf"), func() error {
		resp, err := hc.Get(fmt.Sprintf("http://127.0.0.1:%d/healthz", mport))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return errors.New(resp.Status)
		}
		return nil
	}, 60*time.Second)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	s.note = ", default sync interval (2 min)"
	if sync != "" {
		s.note = ", sync_interval " + sync
	}
	return s, nil
}

// natsConns opens n connections to the server.
func natsConns(e *env, n int) ([]*nats.Conn, error) {
	cs := make([]*nats.Conn, 0, n)
	for range n {
		c, err := nats.Connect("nats://" + e.nats.addr)
		if err != nil {
			closeNats(cs)
			return nil, err
		}
		cs = append(cs, c)
	}
	return cs, nil
}

func closeNats(cs []*nats.Conn) {
	for _, c := range cs {
		c.Close()
	}
}

func openLockerNats(e *env, n int) (*instance, error) {
	cs, err := natsConns(e, n)
	if err != nil {
		return nil, err
	}
	ds := make([]*natsdriver.Driver, 0, n)
	closeAll := func() {
		for _, d := range ds {
			_ = d.Close()
		}
		closeNats(cs)
	}
	for _, c := range cs {
		d, err := natsdriver.NewConn(context.Background(), c, &natsdriver.Options{Bucket: natsBucket})
		if err != nil {
			closeAll()
			return nil, err
		}
		ds = append(ds, d)
	}
	return lockerInstance(ds, false, closeAll), nil
}

// rawNatsHandle is the plain key-value lock: Create, and Delete of the
// revision it created; a waiter watches the key from its first refusal.
type rawNatsHandle struct {
	kv  jetstream.KeyValue
	key string
	rev uint64
	w   jetstream.KeyWatcher
}

func (h *rawNatsHandle) Lock(ctx context.Context) error {
	for {
		rev, err := h.kv.Create(ctx, h.key, []byte("held"))
		if err == nil {
			h.rev = rev
			return nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return err
		}
		if h.w == nil {
			// Watch, then try again before waiting: no release is missed.
			if h.w, err = h.kv.Watch(ctx, h.key, jetstream.UpdatesOnly()); err != nil {
				return err
			}
			continue
		}
		if err := h.waitFree(ctx); err != nil {
			return err
		}
	}
}

// waitFree waits for a DEL or PURGE of the key.
func (h *rawNatsHandle) waitFree(ctx context.Context) error {
	for {
		select {
		case en, ok := <-h.w.Updates():
			if !ok {
				return errors.New("watcher closed")
			}
			if en != nil && en.Operation() != jetstream.KeyValuePut {
				return nil
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (h *rawNatsHandle) Unlock(ctx context.Context) error {
	return h.kv.Delete(ctx, h.key, jetstream.LastRevision(h.rev))
}

func openRawNats(e *env, n int) (*instance, error) {
	cs, err := natsConns(e, n)
	if err != nil {
		return nil, err
	}
	kvs := make([]jetstream.KeyValue, n)
	for i, c := range cs {
		js, err := jetstream.New(c)
		if err == nil {
			kvs[i], err = js.CreateOrUpdateKeyValue(context.Background(), jetstream.KeyValueConfig{
				Bucket: natsBucket, Storage: jetstream.FileStorage, LimitMarkerTTL: natsdriver.MarkerTTL,
				Description: "locks of github.com/go-locker/locker",
			})
		}
		if err != nil {
			closeNats(cs)
			return nil, err
		}
	}
	var handles []*rawNatsHandle
	return &instance{
		newLock: func(i int, key string) (lockHandle, error) {
			h := &rawNatsHandle{kv: kvs[i], key: natsKey(key)}
			handles = append(handles, h)
			return h, nil
		},
		close: func() {
			for _, h := range handles {
				if h.w != nil {
					_ = h.w.Stop()
				}
			}
			closeNats(cs)
		},
	}, nil
}

// natsKey makes a bench key a valid key-value key (its '/'s stay, as
// they may).
func natsKey(key string) string {
	b := []byte(key)
	for i, c := range b {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '-' || c == '_' || c == '/' || c == '=') {
			b[i] = '_'
		}
	}
	return string(b)
}

// natsVersion is the version of the server the bench runs.
const natsVersion = "nats-server v2.15.2 (servers/nats, own process, JetStream file storage)"

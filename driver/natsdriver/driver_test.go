package natsdriver_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/natsdriver"
	"github.com/go-locker/locker/internal/natstest"
	"github.com/nats-io/nats.go/jetstream"
)

const ttl = 2 * time.Second

// jsOf returns a JetStream context on a connection of its own to url,
// closed at t's cleanup, for what a test reads or sets up beside the
// driver.
func jsOf(t *testing.T, url string) jetstream.JetStream {
	t.Helper()
	nc, err := connect(url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return js
}

// lastMsg returns the last message of key in bucket, or nil.
func lastMsg(t *testing.T, js jetstream.JetStream, bucket, key string) *jetstream.RawStreamMsg {
	t.Helper()
	s, err := js.Stream(ctxT(t), "KV_"+bucket)
	if err != nil {
		t.Fatal(err)
	}
	m, err := s.GetLastMsgForSubject(ctxT(t), "$KV."+bucket+"."+natsdriver.EncodeKey(key))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestCreatedBucket checks the settings of the bucket the driver creates.
func TestCreatedBucket(t *testing.T) {
	srv := server(t)
	newDriver(t, srv.Addr, &natsdriver.Options{Bucket: "created"})
	s, err := jsOf(t, srv.URL).Stream(ctxT(t), "KV_created")
	if err != nil {
		t.Fatal(err)
	}
	c := s.CachedInfo().Config
	if c.Storage != jetstream.FileStorage || !c.AllowMsgTTL || c.SubjectDeleteMarkerTTL != natsdriver.MarkerTTL ||
		c.MaxMsgsPerSubject != 1 || c.Replicas != 1 || c.MaxAge != 0 {
		t.Errorf("created bucket: %+v", c)
	}
}

// TestRefusedBuckets checks that New refuses the buckets that cannot keep
// the guarantees, naming why, and accepts one with a MaxAge, as the
// longest TTL.
func TestRefusedBuckets(t *testing.T) {
	srv := server(t)
	js := jsOf(t, srv.URL)
	for _, c := range []jetstream.KeyValueConfig{
		{Bucket: "memory", Storage: jetstream.MemoryStorage, LimitMarkerTTL: time.Second},
		{Bucket: "nottl", Storage: jetstream.FileStorage},
	} {
		if _, err := js.CreateKeyValue(ctxT(t), c); err != nil {
			t.Fatal(err)
		}
		_, err := natsdriver.New(ctxT(t), js, &natsdriver.Options{Bucket: c.Bucket})
		if !errors.Is(err, natsdriver.ErrBucket) {
			t.Errorf("New on bucket %q = %v; want ErrBucket", c.Bucket, err)
		} else {
			t.Log(err)
		}
	}
	c := jetstream.KeyValueConfig{Bucket: "maxage", Storage: jetstream.FileStorage, LimitMarkerTTL: time.Second, TTL: time.Minute}
	if _, err := js.CreateKeyValue(ctxT(t), c); err != nil {
		t.Fatal(err)
	}
	d, err := natsdriver.New(ctxT(t), js, &natsdriver.Options{Bucket: "maxage"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if got := d.Capabilities().MaxTTL; got != time.Minute {
		t.Errorf("MaxTTL on a bucket of MaxAge 1m = %v", got)
	}
}

// TestTokens checks that tokens are the revisions of the grants: strictly
// increasing across release, expiry and re-grant, the same on refresh and
// re-acquire, whose messages have revisions of their own.
func TestTokens(t *testing.T) {
	srv := server(t)
	d := newDriver(t, srv.Addr, nil)
	key := uniqueKey(t)
	a := mustAcquire(t, d, req(key, owner(), ttl))
	again := mustAcquire(t, d, req(key, a.Owner, ttl))
	if again.Token != a.Token {
		t.Fatalf("re-acquire token %d; want %d", again.Token, a.Token)
	}
	r, err := d.Refresh(ctxT(t), a)
	if err != nil || r.Token != a.Token {
		t.Fatalf("Refresh = %+v, %v; want token %d", r, err, a.Token)
	}
	if err := d.Release(ctxT(t), a); err != nil {
		t.Fatal(err)
	}
	b := mustAcquire(t, d, req(key, owner(), ttl))
	if b.Token <= a.Token {
		t.Fatalf("token after release %d; want more than %d", b.Token, a.Token)
	}
	time.Sleep(ttl + 1500*time.Millisecond) // b expires on the server
	c := mustAcquire(t, d, req(key, owner(), ttl))
	if c.Token <= b.Token {
		t.Fatalf("token after expiry %d; want more than %d", c.Token, b.Token)
	}
}

// TestRefreshKeepsTTL checks the trap of kv.Update, which drops the
// per-key TTL: a refreshed hold carries its TTL still, and expires when
// no longer refreshed.
func TestRefreshKeepsTTL(t *testing.T) {
	srv := server(t)
	d := newDriver(t, srv.Addr, nil)
	js := jsOf(t, srv.URL)
	key := uniqueKey(t)
	l := mustAcquire(t, d, req(key, owner(), ttl))
	for range 2 {
		time.Sleep(ttl / 2)
		if _, err := d.Refresh(ctxT(t), l); err != nil {
			t.Fatal(err)
		}
	}
	m := lastMsg(t, js, natsdriver.DefaultBucket, key)
	if m == nil || m.Header.Get(jetstream.MsgTTLHeader) != ttl.String() {
		t.Fatalf("refreshed hold's message %+v; want a TTL header of %v", m, ttl)
	}
	time.Sleep(ttl + 1500*time.Millisecond)
	if _, err := d.Refresh(ctxT(t), l); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Refresh after the TTL = %v; want ErrNotHeld", err)
	}
}

// TestNothingLeft checks that a released key and an expired one leave
// nothing in the bucket once their markers expire (MarkerTTL, and the
// bucket's LimitMarkerTTL).
func TestNothingLeft(t *testing.T) {
	srv := server(t)
	d := newDriver(t, srv.Addr, nil)
	js := jsOf(t, srv.URL)
	released, expired := uniqueKey(t), uniqueKey(t)
	l := mustAcquire(t, d, req(released, owner(), ttl))
	mustAcquire(t, d, req(expired, owner(), ttl))
	if err := d.Release(ctxT(t), l); err != nil {
		t.Fatal(err)
	}
	if m := lastMsg(t, js, natsdriver.DefaultBucket, released); m == nil || m.Header.Get("KV-Operation") != "PURGE" {
		t.Fatalf("released key's message: %+v; want a purge marker", m)
	}
	deadline := time.Now().Add(ttl + natsdriver.MarkerTTL + 5*time.Second)
	for _, key := range []string{released, expired} {
		for lastMsg(t, js, natsdriver.DefaultBucket, key) != nil {
			if time.Now().After(deadline) {
				t.Fatalf("key %q: %+v still in the bucket", key, lastMsg(t, js, natsdriver.DefaultBucket, key))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}

// TestWakeOnExpiry checks that a subscriber is woken by the marker the
// server writes when a hold's TTL fires, with no release and no polling.
func TestWakeOnExpiry(t *testing.T) {
	srv := server(t)
	d := newDriver(t, srv.Addr, nil)
	key := uniqueKey(t)
	mustAcquire(t, d, req(key, owner(), ttl))
	sub, err := d.Subscribe(ctxT(t), key)
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	start := time.Now()
	select {
	case <-sub.C():
		t.Logf("woken %v after the grant of a %v lease", time.Since(start), ttl)
	case <-time.After(ttl + 5*time.Second):
		t.Fatal("no wake-up when the hold expired")
	}
	if _, err := d.TryAcquire(ctxT(t), req(key, owner(), ttl)); err != nil {
		t.Fatalf("TryAcquire after the wake-up: %v", err)
	}
}

// TestKeys checks that keys of any bytes are encoded injectively into one
// subject token of the key alphabet, and decode back.
func TestKeys(t *testing.T) {
	srv := server(t)
	d := newDriver(t, srv.Addr, nil)
	keys := []string{"a", "a.b", "a..b", ".", "a b", "a=2E", "a%2E", "a/b", "a*", "a>", "ключ", "\x01\x7f", "=", "%"}
	seen := map[string]string{}
	var leases []driver.Lease
	for _, k := range keys {
		name := natsdriver.EncodeKey(k)
		if prev, dup := seen[name]; dup {
			t.Errorf("keys %q and %q both encode to %q", prev, k, name)
		}
		seen[name] = k
		if back, err := natsdriver.DecodeKey(name); err != nil || back != k {
			t.Errorf("DecodeKey(%q) = %q, %v; want %q", name, back, err, k)
		}
		leases = append(leases, mustAcquire(t, d, req(uniqueKey(t)+k, owner(), ttl)))
	}
	for _, l := range leases {
		if err := d.Release(ctxT(t), l); err != nil {
			t.Errorf("Release %q: %v", l.Key, err)
		}
	}
}

// TestTokensAcrossRestart kills (SIGKILL) and restarts a server that
// syncs every write, and one with the default sync interval: holds and
// revisions survive a crash of the process either way (what a server
// with the default interval can lose is what a crash of the machine
// takes from the page cache, which no test here does), so tokens keep
// increasing and a hold granted before the kill is still held after it.
func TestTokensAcrossRestart(t *testing.T) {
	for _, o := range []natstest.Options{{SyncAlways: true}, {}} {
		t.Run(fmt.Sprintf("SyncAlways=%v", o.SyncAlways), func(t *testing.T) { tokensAcrossRestart(t, o) })
	}
}

func tokensAcrossRestart(t *testing.T, o natstest.Options) {
	srv := natstest.ForTest(t, o)
	d := newDriver(t, srv.Addr, nil)
	key := uniqueKey(t)
	var last uint64
	for i := range 3 {
		l := mustAcquire(t, d, req(key, owner(), 10*time.Second))
		if l.Token <= last {
			t.Fatalf("round %d: token %d; want more than %d", i, l.Token, last)
		}
		last = l.Token
		if err := srv.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := srv.Restart(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(ctxT(t), 10*time.Second)
		_, err := d.Refresh(ctx, l)
		cancel()
		if err != nil {
			t.Fatalf("round %d: Refresh after a restart: %v; want the hold kept", i, err)
		}
		if err := d.Release(ctxT(t), l); err != nil {
			t.Fatal(err)
		}
	}
}

// TestStaleRevisions checks that a driver whose remembered revision of a
// key is stale (another driver wrote since) falls back to reading it: a
// grant over another's release, the refresh and release of a hold that
// was revoked or expired and granted again.
func TestStaleRevisions(t *testing.T) {
	srv := server(t)
	d1, d2 := newDriver(t, srv.Addr, nil), newDriver(t, srv.Addr, nil)
	key := uniqueKey(t)
	release := func(d *natsdriver.Driver, l driver.Lease) {
		t.Helper()
		if err := d.Release(ctxT(t), l); err != nil {
			t.Fatal(err)
		}
	}
	l1 := mustAcquire(t, d1, req(key, owner(), ttl))
	release(d1, l1) // d1 remembers its marker
	l2 := mustAcquire(t, d2, req(key, owner(), ttl))
	release(d2, l2) // a newer marker
	l3 := mustAcquire(t, d1, req(key, owner(), ttl))
	if l3.Token <= l2.Token {
		t.Fatalf("token %d after %d", l3.Token, l2.Token)
	}
	if n, err := d2.ForceRelease(ctxT(t), key); n != 1 || err != nil {
		t.Fatalf("ForceRelease = %d, %v", n, err)
	}
	if _, err := d1.Refresh(ctxT(t), l3); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Refresh of a revoked hold = %v; want ErrNotHeld", err)
	}
	l4 := mustAcquire(t, d2, req(key, owner(), ttl))
	if err := d1.Release(ctxT(t), l3); !errors.Is(err, driver.ErrNotHeld) {
		t.Fatalf("Release of a revoked hold = %v; want ErrNotHeld", err)
	}
	if _, err := d2.Refresh(ctxT(t), l4); err != nil {
		t.Fatalf("the new holder's Refresh: %v", err)
	}
	release(d2, l4)
}

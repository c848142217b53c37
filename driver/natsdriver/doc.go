// Package natsdriver is a locker driver for NATS JetStream, over a
// key-value bucket: fenced locks on the messaging system a Go service
// already runs, with the bucket's revision as the fencing token.
//
//	nc, err := nats.Connect(url)
//	if err != nil {
//		return err
//	}
//	defer nc.Close()
//	d, err := natsdriver.NewConn(ctx, nc, nil) // or natsdriver.New(ctx, js, opts)
//	if err != nil {
//		return err
//	}
//	defer d.Close()
//
//	c := locker.New(d) // one Client per process, shared by every handle
//	defer c.Close(ctx)
//	h, err := c.Mutex("orders/42").Acquire(ctx)
//
// It needs nats-server 2.11 or later (per-message TTLs) and nats.go
// v1.47.0 or later; the tests run against nats-server v2.15.2 with
// nats.go v1.47.0.
//
// # How a lock is kept
//
// A lock key is one key of the bucket. Every write is a publish to the
// key's subject conditional on the subject's last revision, which
// JetStream checks atomically with the write (on a replicated stream,
// through its Raft log). TryAcquire publishes the owner with a per-key TTL
// of the lease, and the revision of that message is the grant's fencing
// token; Refresh publishes the hold again with its TTL (not kv.Update,
// which would drop the TTL, and the hold would never expire); Release
// purges the key, leaving a marker that expires after [MarkerTTL]; a hold
// that is not renewed expires on the server, which writes a marker in its
// place. A released or expired key leaves nothing in the bucket after a
// second. A key whose value the driver did not write is refused, never
// overwritten. docs/natsdriver.md has the messages, the round trips of
// each call and what is sent again after a broken connection.
//
// Holds are exclusive. Shared holds (RWMutex's read side, semaphores)
// would need one expiry per holder under one key, and JetStream has one
// TTL per message: either one message listing the holders, whose
// expiries only the clients' clocks could judge, or one message per
// holder, with exclusion checked across several subjects at once, which
// JetStream's conditional publish does not do in one step. A grant keeps
// the value it was asked for (Capabilities.Values), so locker's Election
// and leader latch run on the driver.
//
// # Waiting
//
// Waiters are woken by the bucket, not by polling: the driver's
// Subscribe starts a key-value watcher of the key (an ordered consumer of
// its new messages), shared by the subscriptions of that key in the
// driver and stopped when the last one closes; every marker, of a release
// or of an expiry, wakes them. The bucket keeps no queue: waiters in
// different processes are not served in order (the front-end's line
// serves those of one process in order).
//
// # The bucket
//
// [New] opens the bucket [Options].Bucket names ([DefaultBucket] by
// default) and creates it when it does not exist, with file storage, one
// revision per key, per-key TTLs with markers that live [MarkerTTL], and
// [Options].Replicas replicas (use 3 in a cluster). It refuses, with an
// error wrapping [ErrBucket], a bucket that cannot keep the guarantees:
// memory storage (a restart empties it and revisions start again at 1),
// no per-key TTLs (LimitMarkerTTL not set: holds would never expire), a
// mirror (read-only), a sealed bucket, one that denies rollups, or one
// whose limits discard old messages (live holds would be dropped). A
// bucket with a TTL of its own (MaxAge) is accepted, and caps the TTL of
// the leases (Capabilities.MaxTTL). Give the locks a bucket of their own:
// keys of the driver's alphabet written by another program are refused,
// and the watchers of a key see every write to it.
//
// TTLs are whole seconds, from [MinTTL] (one second), never rounded:
// JetStream's per-message TTLs are seconds.
//
// # Tokens, restarts and fsync
//
// Tokens are revisions, the sequence numbers of the bucket's stream:
// global across keys, strictly increasing, never reused by a delete, a
// purge or a re-grant, and kept by a restart on file storage. They go
// back only if the stream loses acknowledged writes, or is deleted and
// created again (its sequence then starts at 1: never delete the bucket
// of live locks).
//
// Whether a server that crashes loses acknowledged writes depends on
// JetStream's sync_interval. With sync_interval: always, every write is
// on disk before it is acknowledged, and tokens keep increasing across
// any crash (the tests check it across kill and restart). With the
// default (a sync every 2 minutes), a write is acknowledged once it is in
// the operating system's page cache: a crash of the nats-server process
// loses nothing, but a crash of the machine (power, kernel) loses up to
// the last 2 minutes of writes on that server. On a single server that
// means grants whose revisions are handed out again after the crash: a
// token that goes backwards, and a hold the holder still believes in
// while the key is free. In a replicated bucket (R3), a write is lost
// only when a majority of its replicas lose it at once (a power loss of
// the whole rack; Jepsen's 2025 analysis of NATS 2.12.1 lost acknowledged
// writes this way under the default interval). Where the fencing token
// guards data that must not be corrupted, run JetStream with
// sync_interval: always, or on replicas that cannot fail together.
//
// # Clusters
//
// In a cluster, a replicated bucket keeps every hold across the loss of a
// minority of its servers. While the stream elects a new leader (a few
// seconds; NATS's Raft waits 4 to 9 seconds for a leader that stopped
// answering) no write is taken: the driver sends a publish that finds no
// leader again every 50 ms, so renewals and releases go through as soon
// as there is one. Use a TTL well above the election time, 15 seconds or
// more, so that holds survive it. Expiry is measured by each replica's
// clock against the time the leader stamped on the message: keep the
// servers' clocks synchronized.
//
// # Contexts, retries and Close
//
// Every call returns by its context's deadline; a request whose reply a
// broken connection lost is sent again within the call (at most 10
// seconds when the context has no deadline), which conditional writes
// make safe. The driver never closes the connection; Close
// stops the driver's watchers, and a closed driver, or one whose
// connection is closed, returns errors wrapping [ErrClosed], marked
// permanent.
//
// # Keys
//
// Keys are written in the bucket's key alphabet: letters, digits, '-',
// '_' and '/' stand for themselves; every other byte, the dot included,
// is written as '=' and two hex digits. The encoding is injective, and
// each key is one subject token, so no key's subject is a prefix or a
// wildcard match of another's.
package natsdriver

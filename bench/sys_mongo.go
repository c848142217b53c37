package main

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-locker/locker/driver/mongodriver"
	"github.com/go-locker/locker/internal/ferrettest"
	"github.com/go-locker/locker/internal/proc"
	"go.mongodb.org/mongo-driver/v2/bson"
	mevent "go.mongodb.org/mongo-driver/v2/event"
	"go.mongodb.org/mongo-driver/v2/mongo"
	"go.mongodb.org/mongo-driver/v2/mongo/options"
)

// mongoSystems are the MongoDB systems, run against FerretDB (MongoDB's
// wire protocol over SQLite): locker over mongodriver, whose every change
// is an insert of a new version, and the classic conditional
// findOneAndUpdate lock, which FerretDB does not perform atomically.
func mongoSystems() []*system {
	return []*system{
		{
			name: "locker", server: "mongo", kind: kindLocker, clients: 4,
			desc: "locker.Mutex over mongodriver, TTL 10s; a change = read, insert of the next version, read; contended cells: 4 drivers (one mongo.Client each), goroutine i on driver i%4",
			open: openLockerMongo,
		},
		{
			name: "naive findOneAndUpdate 10ms", server: "mongo", kind: kindPeer, clients: 4,
			desc: "the ShedLock / square/mongo-lock design: Lock = findOneAndUpdate({_id, exp < now or absent}, $set owner and exp, $inc token, upsert), retried every 10ms; Unlock = deleteOne({_id, owner}); NOT exclusive on FerretDB (its conditional writes are a query and a separate write)",
			open: openNaiveMongo,
		},
	}
}

// startMongo starts FerretDB (built from servers/ferretdb) on a free port.
func startMongo() (*server, error) {
	f, err := ferrettest.StartPrivate()
	if errors.Is(err, proc.ErrNoGoServer) {
		return nil, fmt.Errorf("%w: %v", errNotInstalled, err)
	}
	if err != nil {
		return nil, err
	}
	return &server{name: "mongo", addr: f.Addr, extPID: f.PID(), closer: f}, nil
}

// mongoClients connects n clients to the bench's FerretDB, each command
// they send counted as a round trip (heartbeats are not commands).
func mongoClients(e *env, n int) ([]*mongo.Client, error) {
	trips := e.trips["mongo"]
	mon := &mevent.CommandMonitor{Started: func(context.Context, *mevent.CommandStartedEvent) { trips.Add(1) }}
	cs := make([]*mongo.Client, n)
	for i := range cs {
		c, err := mongo.Connect(options.Client().ApplyURI("mongodb://" + e.mongo.addr + "/").SetDirect(true).SetMonitor(mon))
		if err != nil {
			closeMongo(cs[:i])
			return nil, err
		}
		cs[i] = c
	}
	return cs, nil
}

func closeMongo(cs []*mongo.Client) {
	for _, c := range cs {
		_ = c.Disconnect(context.Background())
	}
}

func openLockerMongo(e *env, n int) (*instance, error) {
	cs, err := mongoClients(e, n)
	if err != nil {
		return nil, err
	}
	ds := make([]*mongodriver.Driver, n)
	for i, c := range cs {
		if ds[i], err = mongodriver.New(c, &mongodriver.Options{Database: "bench"}); err != nil {
			closeMongo(cs)
			return nil, err
		}
	}
	return lockerInstance(ds, false, func() {
		for _, d := range ds {
			_ = d.Close()
		}
		closeMongo(cs)
	}), nil
}

var naiveSeq atomic.Uint64

// naiveMongoHandle is the conditional findOneAndUpdate lock.
type naiveMongoHandle struct {
	coll  *mongo.Collection
	key   string
	owner string
}

func (h *naiveMongoHandle) Lock(ctx context.Context) error {
	h.owner = strconv.FormatUint(naiveSeq.Add(1), 36)
	for {
		now := time.Now()
		filter := bson.D{{Key: "_id", Value: h.key}, {Key: "$or", Value: bson.A{
			bson.D{{Key: "exp", Value: bson.D{{Key: "$lt", Value: now}}}},
			bson.D{{Key: "exp", Value: bson.D{{Key: "$exists", Value: false}}}},
		}}}
		update := bson.D{
			{Key: "$set", Value: bson.D{{Key: "owner", Value: h.owner}, {Key: "exp", Value: now.Add(peerTTL)}}},
			{Key: "$inc", Value: bson.D{{Key: "token", Value: int64(1)}}},
		}
		err := h.coll.FindOneAndUpdate(ctx, filter, update, options.FindOneAndUpdate().SetUpsert(true)).Err()
		if err == nil || errors.Is(err, mongo.ErrNoDocuments) {
			return nil // granted (ErrNoDocuments: upserted, no document before)
		}
		if !mongo.IsDuplicateKeyError(err) {
			return err
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func (h *naiveMongoHandle) Unlock(ctx context.Context) error {
	_, err := h.coll.DeleteOne(ctx, bson.D{{Key: "_id", Value: h.key}, {Key: "owner", Value: h.owner}})
	return err
}

func openNaiveMongo(e *env, n int) (*instance, error) {
	cs, err := mongoClients(e, n)
	if err != nil {
		return nil, err
	}
	return &instance{
		newLock: func(i int, key string) (lockHandle, error) {
			return &naiveMongoHandle{coll: cs[i].Database("bench").Collection("naive"), key: key}, nil
		},
		close: func() { closeMongo(cs) },
	}, nil
}

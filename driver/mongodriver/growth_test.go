package mongodriver_test

import (
	"testing"
	"time"

	"github.com/go-locker/locker/driver/mongodriver"
	"go.mongodb.org/mongo-driver/v2/bson"
)

// TestReleasedKeyKeepsOneDocument checks that a key used many times keeps
// one document: each change deletes the versions below its own.
func TestReleasedKeyKeepsOneDocument(t *testing.T) {
	srv := server(t)
	db := database(t)
	ds := []*mongodriver.Driver{newDriverOn(t, srv, db), newDriverOn(t, srv, db)}
	ctx := ctxT(t)
	key := "growth/" + owner()
	for i := range 40 {
		d := ds[i%2]
		l, err := d.TryAcquire(ctx, req(key, owner(), time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := d.Refresh(ctx, l); err != nil {
			t.Fatal(err)
		}
		if err := d.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range ds {
		d.WaitCollected()
	}
	n, err := locks(t, srv, db).
		CountDocuments(ctx, bson.D{{Key: "k", Value: key}})
	if err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("after 120 changes the key has %d documents; want 1", n)
	}
}

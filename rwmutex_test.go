//go:build go1.25

package locker_test

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver/memdriver"
)

func TestRWMutex_ReadersShareWritersExclude(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		r1 := locker.NewRWMutex(b.Driver(), "cfg")
		r2 := locker.NewRWMutex(b.Driver(), "cfg")
		w := locker.NewRWMutex(b.Driver(), "cfg")
		r1.RLock()
		r2.RLock()
		if r1.Token() == r2.Token() || r1.Token() == 0 {
			t.Fatalf("reader tokens %d and %d, want distinct and non-zero", r1.Token(), r2.Token())
		}
		if w.TryLock() {
			t.Fatal("writer got the lock while readers hold it")
		}
		r1.RUnlock()
		if w.TryLock() {
			t.Fatal("writer got the lock while a reader holds it")
		}
		r2.RUnlock()
		if !w.TryLock() {
			t.Fatal("writer blocked with no readers")
		}
		if w.Token() <= r2.Token() {
			t.Fatalf("write token %d not above read tokens", w.Token())
		}
		if r1.TryRLock() {
			t.Fatal("reader got in while the writer holds the lock")
		}
		w.Unlock()
		if !r1.TryRLock() {
			t.Fatal("reader blocked after the writer left")
		}
		r1.RUnlock()
	})
}

func TestRWMutex_SameHandleManyReaders(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		rw := locker.NewRWMutex(b.Driver(), "cfg")
		var readers, maxReaders atomic.Int32
		var wg sync.WaitGroup
		for range 5 {
			wg.Go(func() {
				rw.RLock()
				n := readers.Add(1)
				for {
					m := maxReaders.Load()
					if n <= m || maxReaders.CompareAndSwap(m, n) {
						break
					}
				}
				time.Sleep(10 * time.Millisecond)
				readers.Add(-1)
				rw.RUnlock()
			})
		}
		wg.Wait()
		if maxReaders.Load() != 5 {
			t.Fatalf("at most %d readers at once through one handle, want 5", maxReaders.Load())
		}
		if hs := b.Holders("cfg"); len(hs) != 0 {
			t.Fatalf("holders left: %+v", hs)
		}
	})
}

// TestRWMutex_WriterNotStarved keeps readers streaming in two processes and
// checks that a writer in a third gets in within a bound.
func TestRWMutex_WriterNotStarved(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for p := range 2 {
			d := b.Driver()
			for range 3 {
				wg.Go(func() {
					rw := locker.NewRWMutex(d, "cfg")
					for i := 0; ; i++ {
						select {
						case <-stop:
							return
						default:
						}
						rw.RLock()
						time.Sleep(time.Duration(1+(i+p)%3) * time.Millisecond)
						rw.RUnlock()
					}
				})
			}
		}
		time.Sleep(5 * time.Millisecond)
		w := locker.NewRWMutex(b.Driver(), "cfg")
		start := time.Now()
		w.Lock()
		waited := time.Since(start)
		w.Unlock()
		close(stop)
		wg.Wait()
		if waited > 20*time.Millisecond {
			t.Fatalf("writer waited %v behind a stream of 3ms readers", waited)
		}
	})
}

func TestRWMutex_RLocker(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		b := memdriver.NewBackend()
		rw := locker.NewRWMutex(b.Driver(), "cfg")
		var l sync.Locker = rw.RLocker()
		l.Lock()
		if hs := b.Holders("cfg"); len(hs) != 1 || hs[0].Mode.String() != "shared" {
			t.Fatalf("holders = %+v, want one shared", hs)
		}
		l.Unlock()
		var _ sync.Locker = rw
	})
}

func TestRWMutex_Misuse(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rw := locker.NewRWMutex(memdriver.New(), "cfg")
		for _, f := range []func(){rw.Unlock, rw.RUnlock} {
			func() {
				defer func() {
					if r, _ := recover().(string); !strings.Contains(r, "nlock of unlocked RWMutex") {
						t.Errorf("recover() = %q", r)
					}
				}()
				f()
			}()
		}
		checkErr(t, rw.RUnlockContext(context.Background()), "runlock", "cfg", locker.ErrNotHeld)
		rw.RLock()
		// A read hold is not a write hold.
		checkErr(t, rw.UnlockContext(context.Background()), "unlock", "cfg", locker.ErrNotHeld)
		rw.RUnlock()
	})
}

package lockerotel_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver/memdriver"
	"github.com/go-locker/locker/internal/goleak"
	lockerotel "github.com/go-locker/locker/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type fixture struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
	obs    *locker.Observer
}

func newFixture(t *testing.T, opts ...lockerotel.Option) *fixture {
	t.Helper()
	f := &fixture{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(f.reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(f.spans))
	t.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	})
	obs, err := lockerotel.NewObserver(append([]lockerotel.Option{
		lockerotel.WithMeterProvider(mp), lockerotel.WithTracerProvider(tp), lockerotel.WithBackend("mem"),
	}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	f.obs = obs
	return f
}

// metrics collects the metrics, by name.
func (f *fixture) metrics(t *testing.T) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := f.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != lockerotel.ScopeName {
			t.Errorf("scope %q, want %q", sm.Scope.Name, lockerotel.ScopeName)
		}
		for _, m := range sm.Metrics {
			out[m.Name] = m
		}
	}
	return out
}

func attrsOf(kv ...attribute.KeyValue) attribute.Set { return attribute.NewSet(kv...) }

// histCount returns the count of the histogram point of m with attributes
// set, and whether there is one.
func histCount(t *testing.T, m metricdata.Metrics, set attribute.Set) (uint64, float64, bool) {
	t.Helper()
	h, ok := m.Data.(metricdata.Histogram[float64])
	if !ok {
		t.Fatalf("%s is %T, want a float64 histogram", m.Name, m.Data)
	}
	for _, p := range h.DataPoints {
		if p.Attributes.Equals(&set) {
			return p.Count, p.Sum, true
		}
	}
	return 0, 0, false
}

// sumValue returns the value of the sum point of m with attributes set.
func sumValue(t *testing.T, m metricdata.Metrics, set attribute.Set) (int64, bool) {
	t.Helper()
	if m.Data == nil {
		return 0, false // not recorded yet
	}
	s, ok := m.Data.(metricdata.Sum[int64])
	if !ok {
		t.Fatalf("%s is %T, want an int64 sum", m.Name, m.Data)
	}
	for _, p := range s.DataPoints {
		if p.Attributes.Equals(&set) {
			return p.Value, true
		}
	}
	return 0, false
}

var (
	backend   = lockerotel.AttrBackend.String("mem")
	exclusive = lockerotel.AttrMode.String("exclusive")
)

// TestMetrics checks the names, units, kinds and attributes of every
// metric after a grant and release, a busy try, a wait that times out, a
// failed renewal and a loss.
func TestMetrics(t *testing.T) {
	f := newFixture(t)
	b := memdriver.NewBackend()
	d := b.Driver()
	c := locker.New(d, locker.WithObserver(f.obs), locker.WithTTL(300*time.Millisecond), locker.WithErrorHandler(func(error) {}))
	defer c.Close(context.Background())
	ctx := context.Background()

	h, err := c.Mutex("a").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := f.metrics(t)
	if v, _ := sumValue(t, m["locker.holds.active"], attrsOf(backend, exclusive)); v != 1 {
		t.Errorf("locker.holds.active while held = %d, want 1", v)
	}
	if err := h.Release(ctx); err != nil {
		t.Fatal(err)
	}

	other := locker.NewMutex(b.Driver(), "busy") // another process
	other.Lock()
	defer other.Unlock()
	if _, err := c.Mutex("busy").TryAcquire(ctx); !errors.Is(err, locker.ErrLocked) {
		t.Fatalf("TryAcquire of a held key: %v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, err = c.Mutex("busy").Acquire(wctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Acquire of a held key with a deadline: %v", err)
	}

	// A failed renewal, then a loss, on a client of its own (the
	// background cleanup of the cancelled call above would take the
	// failure).
	d = b.Driver()
	c2 := locker.New(d, locker.WithObserver(f.obs), locker.WithTTL(300*time.Millisecond), locker.WithErrorHandler(func(error) {}))
	defer c2.Close(context.Background())
	h, err = c2.Mutex("lost").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	d.FailNext(1, errors.New("boom"))
	deadline := time.Now().Add(5 * time.Second)
	for {
		if v, _ := sumValue(t, f.metrics(t)["locker.renewal.failures"], attrsOf(backend, exclusive)); v >= 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no renewal failure recorded")
		}
		time.Sleep(10 * time.Millisecond)
	}
	b.Expire("lost")
	select {
	case <-h.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("hold not lost after Expire")
	}

	checkMetrics(t, f.metrics(t))
}

// checkMetrics is TestMetrics's check of the metrics m recorded by then:
// every instrument with its unit and description, the counts by outcome
// and end, the gauges back to 0, and no key attribute.
func checkMetrics(t *testing.T, m map[string]metricdata.Metrics) {
	t.Helper()
	want := map[string]string{
		"locker.acquire.duration": "s",
		"locker.hold.duration":    "s",
		"locker.holds.active":     "{hold}",
		"locker.waiters.active":   "{call}",
		"locker.losses":           "{hold}",
		"locker.renewal.failures": "{renewal}",
		"locker.errors":           "{error}",
	}
	for name, unit := range want {
		got, ok := m[name]
		if !ok {
			t.Errorf("metric %s missing", name)
			continue
		}
		if got.Unit != unit || got.Description == "" {
			t.Errorf("metric %s: unit %q, description %q; want unit %q and a description", name, got.Unit, got.Description, unit)
		}
	}
	if t.Failed() {
		return
	}
	acq := m["locker.acquire.duration"]
	for outcome, n := range map[string]uint64{"granted": 2, "busy": 1, "canceled": 1} {
		if count, _, _ := histCount(t, acq, attrsOf(backend, exclusive, lockerotel.AttrOutcome.String(outcome))); count != n {
			t.Errorf("locker.acquire.duration{outcome=%s} count = %d, want %d", outcome, count, n)
		}
	}
	if _, sum, _ := histCount(t, acq, attrsOf(backend, exclusive, lockerotel.AttrOutcome.String("canceled"))); sum < 0.05 || sum > 5 {
		t.Errorf("cancelled wait recorded as %vs, want about 0.05s", sum)
	}
	held := m["locker.hold.duration"]
	for end, n := range map[string]uint64{"released": 1, "lost": 1} {
		if count, _, _ := histCount(t, held, attrsOf(backend, exclusive, lockerotel.AttrEnd.String(end))); count != n {
			t.Errorf("locker.hold.duration{end=%s} count = %d, want %d", end, count, n)
		}
	}
	for name, v := range map[string]int64{"locker.holds.active": 0, "locker.waiters.active": 0, "locker.losses": 1, "locker.renewal.failures": 1} {
		if got, ok := sumValue(t, m[name], attrsOf(backend, exclusive)); !ok || got != v {
			t.Errorf("%s = %d (present %v), want %d", name, got, ok, v)
		}
	}
	if got, ok := sumValue(t, m["locker.errors"], attrsOf(backend, lockerotel.AttrOp.String("renew"))); !ok || got != 1 {
		t.Errorf("locker.errors{op=renew} = %d (present %v), want 1, the failed renewal", got, ok)
	}
	// Keys are not attributes unless asked for.
	for name, mt := range m {
		if h, ok := mt.Data.(metricdata.Histogram[float64]); ok {
			for _, p := range h.DataPoints {
				if p.Attributes.HasValue(lockerotel.AttrKey) {
					t.Errorf("%s has locker.key without WithKeyAttribute", name)
				}
			}
		}
	}
}

// TestSpans checks the span of a lock call: its name, parent, attributes
// and status.
func TestSpans(t *testing.T) {
	f := newFixture(t, lockerotel.WithKeyAttribute())
	b := memdriver.NewBackend()
	c := locker.New(b.Driver(), locker.WithObserver(f.obs))
	defer c.Close(context.Background())

	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(f.spans))
	defer tp.Shutdown(context.Background())
	ctx, parent := tp.Tracer("test").Start(context.Background(), "job")
	h, err := c.Mutex("orders/42").Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	parent.End()
	if err := h.Release(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c.Mutex("").LockContext(context.Background()); err == nil {
		t.Fatal("lock of an empty key succeeded")
	}

	spans := f.spans.Ended()
	var lock, bad sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == "locker.lock" {
			if lock == nil {
				lock = s
			} else {
				bad = s
			}
		}
	}
	if lock == nil || bad == nil {
		t.Fatalf("spans %v; want two locker.lock spans", spans)
	}
	if lock.Parent().SpanID() != parent.SpanContext().SpanID() {
		t.Errorf("lock span's parent is %v, want the caller's span", lock.Parent().SpanID())
	}
	got := attribute.NewSet(lock.Attributes()...)
	for _, kv := range []attribute.KeyValue{backend, exclusive, lockerotel.AttrKey.String("orders/42"),
		lockerotel.AttrTry.Bool(false), lockerotel.AttrOutcome.String("granted"), lockerotel.AttrAttempts.Int(1),
		lockerotel.AttrToken.Int64(int64(h.Token()))} {
		if v, ok := got.Value(kv.Key); !ok || v != kv.Value {
			t.Errorf("lock span attribute %s = %v (present %v), want %v", kv.Key, v.Emit(), ok, kv.Value.Emit())
		}
	}
	if lock.Status().Code == codes.Error {
		t.Errorf("granted lock span has status %v", lock.Status())
	}
	if bad.Status().Code != codes.Error || len(bad.Events()) == 0 {
		t.Errorf("failed lock span: status %v, %d events; want Error with the error recorded", bad.Status(), len(bad.Events()))
	}
}

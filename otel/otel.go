// Package lockerotel reports the locks of a locker.Client to OpenTelemetry:
// metrics of waits, holds, losses, failed renewals and errors, and a span for every
// lock call. It is a module of its own, so that package locker depends on
// no OpenTelemetry package.
//
//	obs, err := lockerotel.NewObserver(lockerotel.WithBackend("redis"))
//	if err != nil {
//		return err
//	}
//	c := locker.New(drv, locker.WithObserver(obs))
//
// Without WithMeterProvider and WithTracerProvider it uses the global
// providers (otel.GetMeterProvider, otel.GetTracerProvider).
//
// # Metrics
//
//	locker.acquire.duration   histogram, s       how long lock calls took, by outcome
//	locker.hold.duration      histogram, s       how long holds lasted, by how they ended
//	locker.holds.active       updowncounter      holds in progress
//	locker.waiters.active     updowncounter      lock calls waiting for their key (tries excluded)
//	locker.losses             counter            holds lost
//	locker.renewal.failures   counter            renewals that failed without ending the hold
//	locker.errors             counter            errors given to the error handler, by operation
//
// Every metric has the attributes locker.backend (WithBackend) and
// locker.mode ("exclusive" or "shared"); locker.acquire.duration also has
// locker.outcome ("granted", "busy", "canceled", "closed", "error") and
// locker.hold.duration locker.end ("released", "lost", "closed").
// locker.errors has locker.backend and locker.op (the Op of the
// *locker.Error: "lock" for a retried lock call, "renew", "unlock",
// "cleanup"…) only: it counts every error, including those the default
// error handler does not log one by one during an outage. Keys are
// left out, as they may be many and may carry data: WithKeyAttribute adds
// locker.key to every metric and span.
//
// # Spans
//
// Each lock call is a span named "locker.<op>" ("locker.lock",
// "locker.trylock", "locker.rlock"…), a child of the span in the call's
// context, with the attributes above, locker.try, locker.attempts and,
// when granted, locker.token. A call that ends with an error other than a
// busy try has status Error.
package lockerotel

import (
	"context"
	"errors"

	"github.com/go-locker/locker"
	"github.com/go-locker/locker/driver"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// ScopeName is the instrumentation scope of the meter and tracer.
const ScopeName = "github.com/go-locker/locker/otel"

// Attribute keys.
const (
	AttrBackend  = attribute.Key("locker.backend")
	AttrMode     = attribute.Key("locker.mode")
	AttrOutcome  = attribute.Key("locker.outcome")
	AttrEnd      = attribute.Key("locker.end")
	AttrKey      = attribute.Key("locker.key")
	AttrTry      = attribute.Key("locker.try")
	AttrAttempts = attribute.Key("locker.attempts")
	AttrToken    = attribute.Key("locker.token")
	AttrOp       = attribute.Key("locker.op")
)

// An Option configures NewObserver.
type Option func(*config)

type config struct {
	mp      metric.MeterProvider
	tp      trace.TracerProvider
	backend string
	keys    bool
}

// WithMeterProvider sets the meter provider; the default is the global
// one.
func WithMeterProvider(mp metric.MeterProvider) Option { return func(c *config) { c.mp = mp } }

// WithTracerProvider sets the tracer provider; the default is the global
// one.
func WithTracerProvider(tp trace.TracerProvider) Option { return func(c *config) { c.tp = tp } }

// WithBackend sets the locker.backend attribute ("redis", "etcd"…); the
// default is "unknown".
func WithBackend(name string) Option { return func(c *config) { c.backend = name } }

// WithKeyAttribute adds the lock's key as attribute locker.key to every
// metric and span. Each key then makes time series of its own: use it
// only with few keys, and keys that carry no private data.
func WithKeyAttribute() Option { return func(c *config) { c.keys = true } }

type instruments struct {
	cfg      config
	tracer   trace.Tracer
	acquire  metric.Float64Histogram
	held     metric.Float64Histogram
	holds    metric.Int64UpDownCounter
	waiters  metric.Int64UpDownCounter
	losses   metric.Int64Counter
	renewals metric.Int64Counter
	errs     metric.Int64Counter
}

// NewObserver returns a locker.Observer that records metrics and spans;
// give it to locker.New with locker.WithObserver.
func NewObserver(opts ...Option) (*locker.Observer, error) {
	cfg := config{backend: "unknown"}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if cfg.mp == nil {
		cfg.mp = otel.GetMeterProvider()
	}
	if cfg.tp == nil {
		cfg.tp = otel.GetTracerProvider()
	}
	m := cfg.mp.Meter(ScopeName)
	in := &instruments{cfg: cfg, tracer: cfg.tp.Tracer(ScopeName)}
	var err, e error
	in.acquire, e = m.Float64Histogram("locker.acquire.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of lock calls, from their start to the grant or failure."))
	err = errors.Join(err, e)
	in.held, e = m.Float64Histogram("locker.hold.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of holds, from the grant to their release, loss or close."))
	err = errors.Join(err, e)
	in.holds, e = m.Int64UpDownCounter("locker.holds.active", metric.WithUnit("{hold}"),
		metric.WithDescription("Holds in progress."))
	err = errors.Join(err, e)
	in.waiters, e = m.Int64UpDownCounter("locker.waiters.active", metric.WithUnit("{call}"),
		metric.WithDescription("Lock calls waiting for their key."))
	err = errors.Join(err, e)
	in.losses, e = m.Int64Counter("locker.losses", metric.WithUnit("{hold}"),
		metric.WithDescription("Holds lost: the backend reported the lease gone, or no renewal was confirmed in time."))
	err = errors.Join(err, e)
	in.renewals, e = m.Int64Counter("locker.renewal.failures", metric.WithUnit("{renewal}"),
		metric.WithDescription("Renewals that failed without ending their hold."))
	err = errors.Join(err, e)
	in.errs, e = m.Int64Counter("locker.errors", metric.WithUnit("{error}"),
		metric.WithDescription("Errors given to the error handler: retries of lock calls, failed renewals, releases and cleanups."))
	err = errors.Join(err, e)
	if err != nil {
		return nil, err
	}
	return &locker.Observer{
		AcquireStart:  in.acquireStart,
		RenewalFailed: in.renewalFailed,
		HoldEnd:       in.holdEnd,
		Error:         in.error,
	}, nil
}

// attrs returns the common attributes of an event on key in mode m.
func (in *instruments) attrs(key string, m driver.Mode, extra ...attribute.KeyValue) []attribute.KeyValue {
	a := make([]attribute.KeyValue, 0, 3+len(extra))
	a = append(a, AttrBackend.String(in.cfg.backend), AttrMode.String(m.String()))
	if in.cfg.keys {
		a = append(a, AttrKey.String(key))
	}
	return append(a, extra...)
}

func (in *instruments) acquireStart(ctx context.Context, ev locker.AcquireStart) func(locker.AcquireEnd) {
	base := in.attrs(ev.Key, ev.Mode)
	_, span := in.tracer.Start(ctx, "locker."+ev.Op, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(append(base, AttrTry.Bool(ev.Try))...))
	set := metric.WithAttributes(base...)
	if !ev.Try {
		in.waiters.Add(ctx, 1, set)
	}
	return func(e locker.AcquireEnd) {
		if !ev.Try {
			in.waiters.Add(ctx, -1, set)
		}
		outcome := AttrOutcome.String(e.Outcome.String())
		in.acquire.Record(ctx, e.Wait.Seconds(), metric.WithAttributes(append(base, outcome)...))
		span.SetAttributes(outcome, AttrAttempts.Int(e.Attempts))
		switch e.Outcome {
		case locker.OutcomeGranted:
			in.holds.Add(ctx, 1, set)
			span.SetAttributes(AttrToken.Int64(int64(e.Token)))
		case locker.OutcomeBusy:
		default:
			if e.Err != nil {
				span.RecordError(e.Err)
				span.SetStatus(codes.Error, e.Err.Error())
			}
		}
		span.End()
	}
}

func (in *instruments) renewalFailed(e locker.RenewalFailed) {
	in.renewals.Add(context.Background(), 1, metric.WithAttributes(in.attrs(e.Key, e.Mode)...))
}

func (in *instruments) holdEnd(e locker.HoldEnd) {
	ctx := context.Background()
	base := in.attrs(e.Key, e.Mode)
	end := "released"
	switch {
	case e.Lost():
		end = "lost"
		in.losses.Add(ctx, 1, metric.WithAttributes(base...))
	case e.Err != nil:
		end = "closed"
	}
	in.holds.Add(ctx, -1, metric.WithAttributes(base...))
	in.held.Record(ctx, e.Held.Seconds(), metric.WithAttributes(append(base, AttrEnd.String(end))...))
}

func (in *instruments) error(err error) {
	a := []attribute.KeyValue{AttrBackend.String(in.cfg.backend), AttrOp.String("unknown")}
	var le *locker.Error
	if errors.As(err, &le) {
		a[1] = AttrOp.String(le.Op)
		if in.cfg.keys {
			a = append(a, AttrKey.String(le.Key))
		}
	}
	in.errs.Add(context.Background(), 1, metric.WithAttributes(a...))
}

package main

import (
	"context"
	"fmt"
	"io"
	"log"
	"log/slog"

	"github.com/go-sql-driver/mysql"
	"github.com/redis/go-redis/v9"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"google.golang.org/grpc/grpclog"
)

// libraryLogs points the client libraries' own loggers (go-redis,
// go-sql-driver/mysql, gRPC under etcd's client, the standard log
// package) at w when verbose, and silences them otherwise: a dead
// backend is reported once, by locker, not by twenty lines of dial
// errors. It sets process-wide state and is called once, before any
// client is made. The loggers that are per client (etcd's zap logger,
// ZooKeeper's) are made by zapLogger and zkLogger.
func libraryLogs(w io.Writer, verbose bool) {
	if !verbose {
		w = io.Discard
	}
	redis.SetLogger(redisLogger{log.New(w, "go-redis: ", log.LstdFlags)})
	_ = mysql.SetLogger(log.New(w, "mysql: ", log.LstdFlags))
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(io.Discard, w, w))
	log.SetOutput(w)
}

// redisLogger is go-redis's logger over a *log.Logger.
type redisLogger struct{ l *log.Logger }

// Printf logs one line of go-redis.
func (r redisLogger) Printf(_ context.Context, format string, v ...any) {
	r.l.Printf(format, v...)
}

// zapLogger is the logger of an etcd client: w at level Warn when
// verbose, none otherwise.
func zapLogger(w io.Writer, verbose bool) *zap.Logger {
	if !verbose {
		return zap.NewNop()
	}
	enc := zapcore.NewConsoleEncoder(zap.NewDevelopmentEncoderConfig())
	return zap.New(zapcore.NewCore(enc, zapcore.AddSync(w), zapcore.WarnLevel)).Named("etcd-client")
}

// zkLogger is go-zookeeper's logger: w when verbose, none otherwise.
type zkLogger struct {
	w       io.Writer
	verbose bool
}

// Printf logs one line of go-zookeeper, when verbose.
func (z zkLogger) Printf(format string, args ...any) {
	if z.verbose {
		fmt.Fprintf(z.w, "zk: "+format+"\n", args...)
	}
}

// newLogger returns the logger of the front-end: quiet unless verbose.
func newLogger(stderr io.Writer, verbose bool) *slog.Logger {
	level := slog.LevelError + 1
	if verbose {
		level = slog.LevelDebug
	}
	return slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: level}))
}

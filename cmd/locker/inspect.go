package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/go-locker/locker/driver"
)

// inspectConfig is what `locker status` or `locker release` was asked to
// do.
type inspectConfig struct {
	common
	key    string
	force  bool // release
	asJSON bool // status
}

// parseInspect parses the flags of status (name "status") and release.
func parseInspect(name string, args []string, stderr io.Writer) (inspectConfig, int) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg inspectConfig
	cfg.register(fs)
	usage := "usage: locker status [-url URL] [-connect-timeout d] [-json] [-v] KEY"
	if name == "release" {
		fs.BoolVar(&cfg.force, "force", false, "required: end every hold of KEY, whoever owns it")
		usage = "usage: locker release [-url URL] [-connect-timeout d] [-v] --force KEY"
	} else {
		fs.BoolVar(&cfg.asJSON, "json", false, "print the state as JSON")
	}
	fs.Usage = func() {
		fmt.Fprintln(stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, exitHelp
		}
		return cfg, exitUsage
	}
	switch {
	case fs.NArg() == 0:
		fmt.Fprintf(stderr, "locker %s: no KEY\n%s\n", name, usage)
		return cfg, exitUsage
	case fs.NArg() > 1:
		fmt.Fprintf(stderr, "locker %s: %q after KEY: flags go before KEY, and there is one KEY\n%s\n", name, fs.Arg(1), usage)
		return cfg, exitUsage
	}
	cfg.key = fs.Arg(0)
	if code := cfg.check(name, stderr); code != 0 {
		return cfg, code
	}
	return cfg, checkKey(name, cfg.key, stderr)
}

// statusJSON is the form of `locker status -json`.
type statusJSON struct {
	Key     string       `json:"key"`
	Held    bool         `json:"held"`
	Mode    string       `json:"mode,omitempty"`
	Holders []holderJSON `json:"holders"`
	Fence   uint64       `json:"fence"`
	Waiting int          `json:"waiting"`
}

type holderJSON struct {
	Owner       string  `json:"owner"`
	Token       uint64  `json:"token"`
	RemainingMs float64 `json:"remaining_ms"`
}

// statusCmd is `locker status KEY`: it prints who holds KEY and exits 0
// when someone does, 1 when nobody does.
func statusCmd(args []string, stdout, stderr io.Writer) int {
	cfg, code := parseInspect("status", args, stderr)
	if code != 0 {
		return max(code, 0)
	}
	be, _, st, err := cfg.dialer(stderr).reach(context.Background(), cfg.url, cfg.key)
	if err != nil {
		fmt.Fprintln(stderr, "locker status:", err)
		return backendExit(err)
	}
	defer be.close()
	if cfg.asJSON {
		printStatusJSON(stdout, cfg.key, st)
	} else {
		printStatus(stdout, cfg.key, st)
	}
	if len(st.Holders) == 0 {
		return exitFree
	}
	return 0
}

func printStatusJSON(stdout io.Writer, key string, st driver.KeyState) {
	out := statusJSON{Key: key, Held: len(st.Holders) > 0, Holders: []holderJSON{}, Fence: st.Fence, Waiting: st.Waiting}
	if out.Held {
		out.Mode = st.Mode.String()
	}
	for _, h := range st.Holders {
		out.Holders = append(out.Holders, holderJSON{h.Owner, h.Token, float64(h.Remaining) / float64(time.Millisecond)})
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	_ = enc.Encode(out)
}

func printStatus(stdout io.Writer, key string, st driver.KeyState) {
	if len(st.Holders) == 0 {
		fmt.Fprintf(stdout, "%q: free\n", key)
	} else {
		fmt.Fprintf(stdout, "%q: held (%v)\n", key, st.Mode)
	}
	for _, h := range st.Holders {
		fmt.Fprintf(stdout, "  owner %s  token %d  remaining %v\n", h.Owner, h.Token, h.Remaining.Round(time.Millisecond))
	}
	fence := "unknown"
	if st.Fence > 0 {
		fence = fmt.Sprint(st.Fence)
	}
	fmt.Fprintf(stdout, "  highest token granted %s  waiting %d\n", fence, st.Waiting)
}

// releaseCmd is `locker release --force KEY`.
func releaseCmd(args []string, stdout, stderr io.Writer) int {
	cfg, code := parseInspect("release", args, stderr)
	if code != 0 {
		return max(code, 0)
	}
	if !cfg.force {
		fmt.Fprintln(stderr, "locker release: only a forced release is possible from the shell (--force): it ends every hold of the key, whoever owns it")
		return exitUsage
	}
	d := cfg.dialer(stderr)
	be, in, _, err := d.reach(context.Background(), cfg.url, cfg.key)
	if err != nil {
		fmt.Fprintln(stderr, "locker release:", err)
		return backendExit(err)
	}
	defer be.close()
	ctx, cancel := context.WithTimeout(context.Background(), cfg.timeout)
	defer cancel()
	n, err := in.ForceRelease(ctx, cfg.key)
	if err != nil {
		fmt.Fprintln(stderr, "locker release:", unreachable(cfg.url, cfg.timeout, err))
		return exitBackend
	}
	fmt.Fprintf(stdout, "%q: ended %d hold(s)\n", cfg.key, n)
	return 0
}

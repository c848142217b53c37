package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/go-locker/locker/driver"
)

// inspectFlags parses the flags of status and release: -url, and -force
// for release.
func inspectFlags(name string, args []string, stderr io.Writer, force, asJSON *bool) (url, key string, code int) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&url, "url", os.Getenv("LOCKER_URL"), "backend URL (default $LOCKER_URL)")
	usage := "usage: locker status [-url URL] [-json] KEY"
	if force != nil {
		fs.BoolVar(force, "force", false, "required: end every hold of KEY, whoever owns it")
		usage = "usage: locker release [-url URL] --force KEY"
	} else {
		fs.BoolVar(asJSON, "json", false, "print the state as JSON")
	}
	fs.Usage = func() {
		fmt.Fprintln(stderr, usage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return "", "", exitHelp
		}
		return "", "", exitUsage
	}
	if fs.NArg() != 1 {
		fs.Usage()
		return "", "", exitUsage
	}
	if url == "" {
		fmt.Fprintf(stderr, "locker %s: %v\n", name, errNoURL)
		return "", "", exitUsage
	}
	return url, fs.Arg(0), 0
}

// inspector opens the backend of url and returns its driver.Inspector,
// when its Capabilities report Inspect.
func inspector(ctx context.Context, url string) (driver.Inspector, *backend, error) {
	be, err := openBackend(ctx, url)
	if err != nil {
		return nil, nil, err
	}
	in, ok := be.drv.(driver.Inspector)
	if !ok || !driver.CapabilitiesOf(be.drv).Inspect {
		_ = be.close()
		return nil, nil, fmt.Errorf("driver %T cannot inspect keys", be.drv)
	}
	return in, be, nil
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
	var asJSON bool
	url, key, code := inspectFlags("status", args, stderr, nil, &asJSON)
	if code != 0 {
		return max(code, 0)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in, be, err := inspector(ctx, url)
	if err != nil {
		fmt.Fprintln(stderr, "locker status:", err)
		return backendExit(err)
	}
	defer be.close()
	st, err := in.Inspect(ctx, key)
	if err != nil {
		fmt.Fprintln(stderr, "locker status:", err)
		return exitBackend
	}
	if asJSON {
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
	} else {
		if len(st.Holders) == 0 {
			fmt.Fprintf(stdout, "%q: free\n", key)
		} else {
			fmt.Fprintf(stdout, "%q: held (%v)\n", key, st.Mode)
		}
		for _, h := range st.Holders {
			fmt.Fprintf(stdout, "  owner %s  token %d  remaining %v\n", h.Owner, h.Token, h.Remaining.Round(time.Millisecond))
		}
		fmt.Fprintf(stdout, "  fence %d  waiting %d\n", st.Fence, st.Waiting)
	}
	if len(st.Holders) == 0 {
		return exitFree
	}
	return 0
}

// releaseCmd is `locker release --force KEY`.
func releaseCmd(args []string, stdout, stderr io.Writer) int {
	var force bool
	url, key, code := inspectFlags("release", args, stderr, &force, nil)
	if code != 0 {
		return max(code, 0)
	}
	if !force {
		fmt.Fprintln(stderr, "locker release: only a forced release is possible from the shell (--force): it ends every hold of the key, whoever owns it")
		return exitUsage
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	in, be, err := inspector(ctx, url)
	if err != nil {
		fmt.Fprintln(stderr, "locker release:", err)
		return backendExit(err)
	}
	defer be.close()
	n, err := in.ForceRelease(ctx, key)
	if err != nil {
		fmt.Fprintln(stderr, "locker release:", err)
		return exitBackend
	}
	fmt.Fprintf(stdout, "%q: ended %d hold(s)\n", key, n)
	return 0
}

package main

import (
	"io"
	"net/url"
	"strings"
	"sync"
)

// redacted is what a secret is replaced with in locker's output.
const redacted = "xxxxx"

// secretsOf returns the secrets of a backend URL as they may appear in
// output: the password of its user information and the values of its
// query parameters that name a password, a secret or a token, each as
// written in the URL and decoded. A URL that does not parse still has
// its user information looked for by hand, since error messages may
// quote it.
func secretsOf(raw string) []string {
	var out []string
	add := func(s string) {
		if len(s) >= 3 {
			out = append(out, s)
		}
		if d, err := url.PathUnescape(s); err == nil && d != s && len(d) >= 3 {
			out = append(out, d)
		}
	}
	if u, err := url.Parse(raw); err == nil {
		if pw, ok := u.User.Password(); ok {
			add(pw)
			add(url.UserPassword("", pw).String()[1:]) // as written back
			// and as typed: the authority's user information
			rest := raw[strings.Index(raw, "://")+3:]
			rest = rest[:strings.IndexAny(rest+"/", "/?#")]
			if at := strings.LastIndex(rest, "@"); at >= 0 {
				_, typed, _ := strings.Cut(rest[:at], ":")
				add(typed)
			}
		}
	} else {
		// The last '@' before the query: a password with a raw '/'
		// makes url.Parse fail, and its error may quote a piece of it.
		rest, _, _ := strings.Cut(raw, "?")
		if i := strings.Index(rest, "://"); i >= 0 {
			rest = rest[i+3:]
		}
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			if _, pw, ok := strings.Cut(rest[:at], ":"); ok {
				add(pw)
				for _, piece := range strings.Split(pw, "/") {
					add(piece)
				}
			}
		}
	}
	if _, query, ok := strings.Cut(raw, "?"); ok {
		for _, kv := range strings.Split(query, "&") {
			k, v, _ := strings.Cut(kv, "=")
			if k = strings.ToLower(k); strings.Contains(k, "pass") || strings.Contains(k, "secret") || strings.Contains(k, "token") {
				add(v)
			}
		}
	}
	return out
}

// urlArgs returns the backend URLs that args and the environment may
// name: $LOCKER_URL and every -url flag's value.
func urlArgs(args []string, env string) []string {
	urls := []string{env}
	for i, a := range args {
		if a == "--" {
			break
		}
		name, val, hasVal := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if name != "url" || !strings.HasPrefix(a, "-") {
			continue
		}
		if hasVal {
			urls = append(urls, val)
		} else if i+1 < len(args) {
			urls = append(urls, args[i+1])
		}
	}
	return urls
}

// A redactor is an io.Writer that replaces every secret in what it
// writes. Every line locker and the client libraries print goes through
// one, as a last line of defence: messages never quote a secret on
// purpose (URLs are printed redacted). A secret split across two writes
// would pass; every writer of locker writes whole lines.
type redactor struct {
	mu      sync.Mutex
	w       io.Writer
	secrets []string
}

// newRedactor returns w, redacting the secrets of urls.
func newRedactor(w io.Writer, urls []string) *redactor {
	r := &redactor{w: w}
	for _, u := range urls {
		r.secrets = append(r.secrets, secretsOf(u)...)
	}
	return r
}

// Write writes p with every secret replaced. It reports len(p) written
// when the redacted text was written whole.
func (r *redactor) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := string(p)
	for _, sec := range r.secrets {
		s = strings.ReplaceAll(s, sec, redacted)
	}
	if _, err := io.WriteString(r.w, s); err != nil {
		return 0, err
	}
	return len(p), nil
}

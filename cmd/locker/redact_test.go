package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

func TestSecretsOf(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want []string
	}{
		{"redis://app:s3cret@h:1/0", []string{"s3cret"}},
		{"redis://:s3cret@h:1", []string{"s3cret"}},
		{"redis://app@h:1", nil},
		{"redis://h:1", nil},
		{"mysql://app:p%40ss%2Fword@h:1/db", []string{"p%40ss%2Fword", "p@ss/word"}},
		{"redis://app:p%21ss@h:1", []string{"p%21ss", "p!ss"}},
		{"redis://app:pa/ssword@h:1", []string{"pa/ssword", "ssword"}},
		{"postgres://app@h:1/db?sslmode=disable&password=s3cret&api_token=t0ken", []string{"s3cret", "t0ken"}},
		{"zk://h:1/root@x", nil},
	} {
		got := secretsOf(tc.url)
		for _, w := range tc.want {
			if !slices.Contains(got, w) {
				t.Errorf("secretsOf(%q) = %q, lacks %q", tc.url, got, w)
			}
		}
		if len(tc.want) == 0 && len(got) != 0 {
			t.Errorf("secretsOf(%q) = %q, want none", tc.url, got)
		}
	}
}

func TestRedactor(t *testing.T) {
	var b bytes.Buffer
	args := []string{"status", "-url", "redis://a:one-secret@h:1", "--url=redis://a:two-secret@h:1", "k", "--", "-url", "redis://a:three@h:1"}
	r := newRedactor(&b, urlArgs(args, "etcd://u:env-secret@h:1"))
	line := "one-secret two-secret env-secret three\n"
	if n, err := r.Write([]byte(line)); n != len(line) || err != nil {
		t.Fatalf("Write: %d, %v", n, err)
	}
	if got, want := b.String(), "xxxxx xxxxx xxxxx three\n"; got != want {
		t.Errorf("redacted %q, want %q (after -- is the command's)", got, want)
	}
	if strings.Contains(b.String(), "secret") {
		t.Error("a secret passed")
	}
}

package zkdriver

import (
	"testing"

	"github.com/go-locker/locker/driver"
)

// TestParseNode checks that every layout's names, Curator's, and names of
// no known format are read, the last as foreign exclusive nodes: none is
// dropped from a queue.
func TestParseNode(t *testing.T) {
	const uuid = "0b9a3c2e-6f1d-4e8a-9c7b-2d5e8f1a3b4c"
	for _, tc := range []struct {
		name    string
		owner   string
		mode    driver.Mode
		seq     int64
		foreign bool
	}{
		{"_c_abc123-w-0000000007", "abc123", driver.Exclusive, 7, false},
		{"_c_abc123-r-0000000008", "abc123", driver.Shared, 8, false},
		{"_c_abc123-lock-0000000009", "abc123", driver.Exclusive, 9, false},
		{"_c_abc123-__WRIT__0000000010", "abc123", driver.Exclusive, 10, false},
		{"_c_abc123-__READ__0000000011", "abc123", driver.Shared, 11, false},
		{"_c_" + uuid + "-lock-0000000012", uuid, driver.Exclusive, 12, true},
		{"_c_" + uuid + "-__WRIT__0000000013", uuid, driver.Exclusive, 13, true},
		{"_c_" + uuid + "-__READ__0000000014", uuid, driver.Shared, 14, true},
		{"lock-0000000015", "", driver.Exclusive, 15, true}, // unprotected Curator node: no owner
		{"_c_" + uuid + "-latch-0000000016", "", driver.Exclusive, 16, true},
		{"member-0000000017", "", driver.Exclusive, 17, true},
		{"config", "", driver.Exclusive, -1, true},
		{"_c_abc123-x-0000000018", "", driver.Exclusive, 18, true},
	} {
		c := parseNode(tc.name)
		if c.name != tc.name || c.owner != tc.owner || c.mode != tc.mode || c.seq != tc.seq || c.foreign != tc.foreign {
			t.Errorf("parseNode(%q) = %+v, want owner %q mode %v seq %d foreign %v", tc.name, c, tc.owner, tc.mode, tc.seq, tc.foreign)
		}
	}
}

// TestQueueForeignBlocks checks the queue a waiter sees with foreign
// nodes: ordered by sequence number, exclusive, blocking readers and
// writers behind them.
func TestQueueForeignBlocks(t *testing.T) {
	q := parseQueue([]string{
		"_c_abc-r-0000000003",
		"member-0000000002",
		"_c_def-r-0000000001",
	})
	if q[0].owner != "def" || q[1].name != "member-0000000002" || q[2].owner != "abc" {
		t.Fatalf("order: %+v", q)
	}
	if got := q.held(); got != 1 {
		t.Errorf("held() = %d, want 1: the foreign node blocks the reader behind it", got)
	}
	if ok, _ := q.judge(2, driver.Shared, 0, 0); ok {
		t.Errorf("a reader behind a foreign node is granted")
	}
	if q := parseQueue([]string{"_c_abc-w-0000000001", "config"}); q[0].name != "config" || q.held() != 1 {
		t.Errorf("a name without a sequence number must come first and block: %+v", q)
	}
	if _, ok := leaseTTL("/locker/k/_c_0b9a3c2e-6f1d-4e8a-9c7b-2d5e8f1a3b4c-lock-0000000001", []byte("5000")); ok {
		t.Errorf("leaseTTL judged a Curator node by its data")
	}
	if ttl, ok := leaseTTL("/locker/k/_c_abc-lock-0000000001", []byte("5000")); !ok || ttl.Milliseconds() != 5000 {
		t.Errorf("leaseTTL of a locker node in a Curator layout = %v, %v", ttl, ok)
	}
}

package zkdriver

import (
	"math"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/go-locker/locker/driver"
	"github.com/go-locker/locker/driver/driverkit"
)

// encodeKey returns the znode name of key (see writeKey).
func encodeKey(key string) string {
	var b strings.Builder
	writeKey(&b, key)
	return b.String()
}

// validName reports why name is not a valid, safe znode name (one path
// segment that ZooKeeper's PathUtils.validatePath and go-zookeeper's
// validatePath accept, outside the reserved /zookeeper tree), or "".
func validName(name string) string {
	switch name {
	case "":
		return "empty"
	case ".", "..":
		return "relative"
	case "zookeeper":
		return "reserved"
	}
	if !utf8.ValidString(name) {
		return "not UTF-8"
	}
	for _, r := range name {
		switch {
		case r == '/':
			return "slash"
		case r == 0:
			return "NUL"
		case r <= 0x1f, r >= 0x7f && r <= 0x9f:
			return "control character"
		case r >= 0xd800 && r <= 0xf8ff, r >= 0xfff0:
			return "reserved character"
		}
	}
	return ""
}

// validKey reports whether the front-end accepts key.
func validKey(key string) bool {
	return key != "" && len(key) <= 512 && utf8.ValidString(key) && !strings.Contains(key, "\x00")
}

func TestEncodeKey(t *testing.T) {
	for _, tc := range []struct{ key, want string }{
		{"orders-42", "orders-42"},
		{"orders/42", "orders%2F42"},
		{"a b", "a%20b"},
		{"%", "%25"},
		{"%25", "%2525"},
		{".", "%2E"},
		{"..", "%2E."},
		{".hidden", "%2Ehidden"},
		{"a.b", "a.b"},
		{"zookeeper", "%7Aookeeper"},
		{"zookeeper2", "zookeeper2"},
		{"/", "%2F"},
		{"a\x01", "a%01"},
		{"é", "%C3%A9"},
		{"\u2028", "%E2%80%A8"},
		{"\uffff", "%EF%BF%BF"},
		{"a:b@c=d", "a:b@c=d"},
		{"", "%"},
	} {
		got := encodeKey(tc.key)
		if got != tc.want {
			t.Errorf("encodeKey(%q) = %q; want %q", tc.key, got, tc.want)
		}
		if why := validName(got); why != "" {
			t.Errorf("encodeKey(%q) = %q: %s", tc.key, got, why)
		}
		if back, ok := decodeKey(got); !ok || back != tc.key {
			t.Errorf("decodeKey(%q) = %q, %v; want %q", got, back, ok, tc.key)
		}
	}
	for _, name := range []string{"%2f", "%7A", "%41", "%", "%%", "%2", "a/b", ".x", "", "%2E%2E", "zookeeper"} {
		if k, ok := decodeKey(name); ok && encodeKey(k) != name {
			t.Errorf("decodeKey(%q) = %q, which encodes to %q", name, k, encodeKey(k))
		}
	}
}

// FuzzKeyEncode checks that every key the front-end accepts maps to one
// valid, safe znode name, and that the mapping is injective: decodeKey
// recovers the key from its name alone.
func FuzzKeyEncode(f *testing.F) {
	for _, k := range []string{"a", "a/b", ".", "..", "zookeeper", "%", "%2F", "/", "é", "\u2028", "\uffff", "a\x1fb", "🔒", strings.Repeat("x", 512)} {
		f.Add(k, k+"/")
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		for _, k := range []string{a, b} {
			if !validKey(k) {
				continue
			}
			name := encodeKey(k)
			if why := validName(name); why != "" {
				t.Fatalf("encodeKey(%q) = %q: %s", k, name, why)
			}
			back, ok := decodeKey(name)
			if !ok || back != k {
				t.Fatalf("decodeKey(encodeKey(%q)) = %q, %v", k, back, ok)
			}
			checkPaths(t, k, name)
		}
		if validKey(a) && validKey(b) && a != b && encodeKey(a) == encodeKey(b) {
			t.Fatalf("keys %q and %q share the name %q", a, b, encodeKey(a))
		}
		// Any name: decoding never accepts a name that is not the
		// encoding of what it decodes to.
		if k, ok := decodeKey(a); ok && encodeKey(k) != a {
			t.Fatalf("decodeKey(%q) = %q, whose name is %q", a, k, encodeKey(k))
		}
	})
}

// TestParseLockerNodes checks parseNode on LayoutLocker's names: the
// driver's own nodes, counted ones, and malformed ones, which are foreign
// exclusive nodes (they block and are never deleted).
func TestParseLockerNodes(t *testing.T) {
	owner := strings.Repeat("ab", 16)
	for _, m := range []driver.Mode{driver.Exclusive, driver.Shared} {
		for _, seq := range []string{"0000000000", "0000000042", "2147483647", "-2147483648"} {
			name := nodePrefix(owner, m, 0, 0) + seq
			c := parseNode(name)
			if c.foreign || c.owner != owner || c.mode != m || c.name != name {
				t.Errorf("parseNode(%q) = %+v", name, c)
			}
			if why := validName(name); why != "" {
				t.Errorf("node name %q: %s", name, why)
			}
		}
	}
	for _, lw := range [][2]int64{{1, 1}, {4, 3}, {math.MaxInt64, math.MaxInt64}} {
		name := nodePrefix(owner, driver.Shared, lw[0], lw[1]) + "0000000042"
		c := parseNode(name)
		if c.foreign || c.owner != owner || c.mode != driver.Shared || c.limit != lw[0] || c.weight != lw[1] || c.seq != 42 {
			t.Errorf("parseNode(%q) = %+v", name, c)
		}
		if why := validName(name); why != "" {
			t.Errorf("node name %q: %s", name, why)
		}
	}
	for _, bad := range []string{"", "x", "_c_", "_c_abc", "_c_abc-x-0000000001", "_c_abc-w0000000001", "_c_-w-0000000001", "_c_abc-w-", "_c_abc-w-12x", "lock-0000000001",
		"_c_abc.4.3-w-0000000001", "_c_abc.4-r-0000000001", "_c_abc.4.5-r-0000000001", "_c_abc.0.0-r-0000000001", "_c_abc.04.3-r-0000000001",
		"_c_abc.4.+3-r-0000000001", "_c_.4.3-r-0000000001", "_c_abc.4.3.2-r-0000000001", "_c_abc.99999999999999999999.1-r-0000000001"} {
		if c := parseNode(bad); !c.foreign || c.mode != driver.Exclusive || c.limit != 0 {
			t.Errorf("parseNode(%q) = %+v; want a foreign exclusive node", bad, c)
		}
	}
}

func TestQueueOrder(t *testing.T) {
	o := strings.Repeat("1", 32)
	names := []string{
		nodePrefix(o, driver.Shared, 0, 0) + "0000000010",
		nodePrefix(o, driver.Exclusive, 0, 0) + "0000000002",
		"foreign-node",
		nodePrefix(o, driver.Shared, 0, 0) + "0000000007",
	}
	// A name of no known format is kept, as an exclusive node before all
	// others (it has no sequence number): it blocks, never dropped.
	q := parseQueue(names)
	if len(q) != 4 || q[0].name != "foreign-node" || !q[0].foreign || q[1].seq != 2 || q[2].seq != 7 || q[3].seq != 10 {
		t.Fatalf("parseQueue = %+v", q)
	}
	if b := q[1:].blockers(2, driver.Shared); len(b) != 1 || b[0].seq != 2 {
		t.Errorf("a reader at the end is blocked by %+v; want the writer only", b)
	}
	if b := q[1:].blockers(2, driver.Exclusive); len(b) != 2 {
		t.Errorf("a writer at the end is blocked by %+v; want both", b)
	}
	if b := q.blockers(3, driver.Shared); len(b) != 2 || b[0].name != "foreign-node" {
		t.Errorf("a reader at the end is blocked by %+v; want the foreign node and the writer", b)
	}
}

// TestJudge checks the grant rule on queues of exclusive, shared and
// counted nodes.
func TestJudge(t *testing.T) {
	o := strings.Repeat("2", 32)
	pad := func(seq string) string { return strings.Repeat("0", 10-len(seq)) + seq } // as ZooKeeper writes it
	x := func(seq string) string { return nodePrefix(o, driver.Exclusive, 0, 0) + pad(seq) }
	r := func(seq string) string { return nodePrefix(o, driver.Shared, 0, 0) + pad(seq) }
	c := func(limit, weight int64, seq string) string {
		return nodePrefix(o, driver.Shared, limit, weight) + pad(seq)
	}
	type verdict struct {
		granted bool
		limit   int64 // of the LimitError, or -1 for none
	}
	for _, tc := range []struct {
		names         []string
		mode          driver.Mode
		limit, weight int64
		want          verdict
		held          int
	}{
		{nil, driver.Shared, 4, 4, verdict{true, -1}, 0},
		{[]string{c(4, 2, "1"), c(4, 1, "2")}, driver.Shared, 4, 1, verdict{true, -1}, 2},
		{[]string{c(4, 2, "1"), c(4, 1, "2")}, driver.Shared, 4, 2, verdict{false, -1}, 2},
		// A waiter of weight 3 is not overtaken by one of weight 1.
		{[]string{c(4, 2, "1"), c(4, 3, "2")}, driver.Shared, 4, 1, verdict{false, -1}, 1},
		{[]string{c(4, 1, "1"), x("2")}, driver.Shared, 4, 1, verdict{false, -1}, 1},
		{[]string{x("1")}, driver.Shared, 4, 1, verdict{false, -1}, 1},
		{[]string{c(4, 1, "1")}, driver.Exclusive, 0, 0, verdict{false, -1}, 1},
		{[]string{c(4, 1, "1")}, driver.Shared, 5, 1, verdict{false, 4}, 1},
		{[]string{c(4, 1, "1")}, driver.Shared, 0, 0, verdict{false, 4}, 1},
		{[]string{r("1")}, driver.Shared, 4, 1, verdict{false, 0}, 1},
		{[]string{x("1"), r("2")}, driver.Shared, 4, 1, verdict{false, 0}, 1},
		{[]string{c(4, 1, "1"), c(5, 1, "2")}, driver.Shared, 4, 1, verdict{false, 5}, 1},
		{[]string{r("1"), r("2")}, driver.Shared, 0, 0, verdict{true, -1}, 2},
		{[]string{c(math.MaxInt64, math.MaxInt64-1, "1"), c(math.MaxInt64, math.MaxInt64-1, "2")}, driver.Shared, math.MaxInt64, 1, verdict{false, -1}, 1},
	} {
		q := parseQueue(tc.names)
		ok, lerr := q.judge(len(q), tc.mode, tc.limit, tc.weight)
		got := verdict{ok, -1}
		if lerr != nil {
			got.limit = lerr.Limit
		}
		if got != tc.want {
			t.Errorf("%v: judge(%v, limit %d, weight %d) = %+v; want %+v", tc.names, tc.mode, tc.limit, tc.weight, got, tc.want)
		}
		if h := q.held(); h != tc.held {
			t.Errorf("%v: held() = %d; want %d", tc.names, h, tc.held)
		}
	}
}

func TestCheckOwnerRoot(t *testing.T) {
	for _, o := range []string{"", "a-b", "a/b", strings.Repeat("a", 65), "é"} {
		if checkOwner(o) == nil {
			t.Errorf("checkOwner(%q) = nil", o)
		}
	}
	if err := checkOwner(strings.Repeat("0f", 16)); err != nil {
		t.Error(err)
	}
	for _, r := range []string{"/", "/locker", "/a/b", "/a.b", "/a b"} {
		if err := checkRoot(r); err != nil {
			t.Errorf("checkRoot(%q): %v", r, err)
		}
	}
	for _, r := range []string{"", "locker", "/locker/", "//", "/a//b", "/a/./b", "/a/..", "/zookeeper", "/zookeeper/x", "/a\x01"} {
		if checkRoot(r) == nil {
			t.Errorf("checkRoot(%q) = nil; want an error", r)
		}
	}
}

func TestTTLData(t *testing.T) {
	for _, tc := range []struct {
		ttl  time.Duration
		want string
	}{
		{time.Millisecond, "1"},
		{1500 * time.Microsecond, "2"},
		{15 * time.Second, "15000"},
	} {
		got := encodeTTL(tc.ttl)
		if string(got) != tc.want {
			t.Errorf("encodeTTL(%v) = %q; want %q", tc.ttl, got, tc.want)
		}
		back, ok := decodeTTL(got)
		if !ok || back < tc.ttl {
			t.Errorf("decodeTTL(%q) = %v, %v; want at least %v", got, back, ok, tc.ttl)
		}
	}
	for _, v := range []string{"", "leader\n\x00\xff", strings.Repeat("v", driver.MaxValueLen)} {
		data := encodeData(1500*time.Millisecond, v)
		if ttl, ok := decodeTTL(data); !ok || ttl != 1500*time.Millisecond {
			t.Errorf("decodeTTL(%q) = %v, %v; want 1.5s", data, ttl, ok)
		}
		if got := decodeValue(data); got != v {
			t.Errorf("decodeValue(%q) = %q; want %q", data, got, v)
		}
	}
	for _, bad := range []string{"", "x", "-1", "0", "1e3", "\nvalue"} {
		if _, ok := decodeTTL([]byte(bad)); ok {
			t.Errorf("decodeTTL(%q) accepted", bad)
		}
	}
}

// checkPaths checks that the paths a driver builds in one allocation are
// those of the key's name.
func checkPaths(t *testing.T, key, name string) {
	t.Helper()
	if got := encodeKey(key); got != name || len(got) > 3*len(key)+2 {
		t.Fatalf("encodeKey(%q) = %q; want %q, within writeKey's bound %d", key, got, name, 3*len(key)+2)
	}
	for _, root := range []string{"/", "/locker", "/a/b"} {
		d := &Driver{root: root}
		want := root + "/" + name
		if root == "/" {
			want = "/" + name
		}
		if got, _ := d.paths(key); got != want {
			t.Fatalf("root %q: paths(%q) = %q; want %q", root, key, got, want)
		}
		parent, child := d.paths(key, "_c_", "o", "-w-")
		if parent != want || child != want+"/_c_o-w-" {
			t.Fatalf("root %q: paths(%q) = %q, %q; want %q, %q", root, key, parent, child, want, want+"/_c_o-w-")
		}
	}
}

func TestLockPaths(t *testing.T) {
	d := &Driver{root: "/locker"}
	for _, tc := range []struct {
		req          driver.Request
		parent, node string
	}{
		{driver.Request{Key: "a/b", Owner: "o1", Mode: driver.Exclusive}, "/locker/a%2Fb", "/locker/a%2Fb/_c_o1-w-"},
		{driver.Request{Key: "zookeeper", Owner: "o2", Mode: driver.Shared}, "/locker/%7Aookeeper", "/locker/%7Aookeeper/_c_o2-r-"},
		{driver.Request{Key: ".k", Owner: "o3", Mode: driver.Shared, Limit: 4, Weight: 3}, "/locker/%2Ek", "/locker/%2Ek/_c_o3.4.3-r-"},
	} {
		parent, node := d.lockPaths(tc.req)
		if parent != tc.parent || node != tc.node {
			t.Errorf("lockPaths(%+v) = %q, %q; want %q, %q", tc.req, parent, node, tc.parent, tc.node)
		}
	}
	checkPaths(t, "", "%")
	checkPaths(t, "zookeeper", "%7Aookeeper")
}

// decodeKey inverts encodeKey. It reports false for a name that encodeKey
// never returns.
func decodeKey(name string) (string, bool) {
	if name == emptyName {
		return "", true
	}
	key, err := driverkit.Unhex(name)
	if err != nil || key == "" || encodeKey(key) != name {
		return "", false
	}
	return key, true
}

// encodeTTL returns a node's data without a value: its lease length in
// whole milliseconds, rounded up so that others never think it shorter
// than it is.
func encodeTTL(ttl time.Duration) []byte { return encodeData(ttl, "") }

package etcdtest

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/go-locker/locker/internal/testflag"
)

// kvPut writes key=value through m's HTTP gateway.
func kvPut(t *testing.T, m *Member, key, value string) error {
	t.Helper()
	body := `{"key":"` + base64.StdEncoding.EncodeToString([]byte(key)) +
		`","value":"` + base64.StdEncoding.EncodeToString([]byte(value)) + `"}`
	r, err := httpClient.Post(m.ClientURL+"/v3/kv/put", "application/json", strings.NewReader(body))
	if err != nil {
		return err
	}
	r.Body.Close()
	if r.StatusCode != http.StatusOK {
		t.Fatalf("put: %s", r.Status)
	}
	return nil
}

// kvGet reads key through m's HTTP gateway.
func kvGet(t *testing.T, m *Member, key string) string {
	t.Helper()
	body := `{"key":"` + base64.StdEncoding.EncodeToString([]byte(key)) + `"}`
	r, err := httpClient.Post(m.ClientURL+"/v3/kv/range", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Body.Close()
	var res struct{ Kvs []struct{ Value string } }
	if err := json.NewDecoder(r.Body).Decode(&res); err != nil || len(res.Kvs) != 1 {
		t.Fatalf("range %q: %+v, %v", key, res, err)
	}
	v, _ := base64.StdEncoding.DecodeString(res.Kvs[0].Value)
	return string(v)
}

func TestStart(t *testing.T) {
	m := Start(t)
	if err := kvPut(t, m, "k", "v"); err != nil {
		t.Fatal(err)
	}
	if got := kvGet(t, m, "k"); got != "v" {
		t.Fatalf("k = %q, want v", got)
	}
	// A crash keeps what was written (fsync on); the member comes back
	// on the same URL.
	if err := m.Kill(); err != nil {
		t.Fatal(err)
	}
	if err := m.Restart(); err != nil {
		t.Fatal(err)
	}
	if got := kvGet(t, m, "k"); got != "v" {
		t.Fatalf("after a crash: k = %q, want v", got)
	}
	if !m.IsLeader() {
		t.Error("a one-member server is not its own leader")
	}
}

func TestClusterLeaderKill(t *testing.T) {
	if !testflag.Long() {
		t.Skip("quick run (LOCKER_LONG=1 for the long one): etcddriver's TestCluster kills a leader in the quick run too (LeaderKill)")
	}
	c := StartCluster(t, 3)
	l, err := c.Leader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := kvPut(t, c.Members[l], "k", "1"); err != nil {
		t.Fatal(err)
	}
	if err := c.Members[l].Kill(); err != nil {
		t.Fatal(err)
	}
	if err := kvPut(t, c.Members[l], "k", "2"); err == nil {
		t.Fatal("a put through the killed member succeeded")
	}
	l2, err := c.Leader(10 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if l2 == l {
		t.Fatalf("the killed member %d is still the leader", l)
	}
	if err := c.Members[l].Restart(); err != nil {
		t.Fatal(err)
	}
	if got := kvGet(t, c.Members[l], "k"); got != "1" {
		t.Fatalf("k = %q on the restarted member, want 1", got)
	}
	if _, err := c.Leader(10 * time.Second); err != nil {
		t.Fatal(err)
	}
}

package proc

import (
	"errors"
	"os"
	"testing"
)

// TestGoBinaries builds every server program under servers/ (or finds it
// built): a server module that no longer builds fails here, by name, not
// in the middle of a driver's suite. CI runs this test alone first, while
// the Debian packages install, so the driver suites find the programs
// built.
func TestGoBinaries(t *testing.T) {
	entries, err := os.ReadDir(serversDir())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		if e.IsDir() {
			names = append(names, e.Name())
		}
	}
	if len(names) == 0 {
		t.Fatalf("no server programs in %s", serversDir())
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			bin, err := GoBinary(name)
			if errors.Is(err, ErrNoGoServer) && !Required() {
				t.Skipf("%v (set %s=1 to fail instead)", err, EnvRequireServers)
			}
			if err != nil {
				t.Fatal(err)
			}
			if fi, err := os.Stat(bin); err != nil || fi.Mode()&0o111 == 0 {
				t.Fatalf("GoBinary(%q) = %s, not an executable (%v)", name, bin, err)
			}
		})
	}
}

package inventory

import (
	"bufio"
	"encoding/hex"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// buildFixture writes the tree described by testdata/NAME.fixture (format in
// the file's header) into a temporary directory and returns its path.
func buildFixture(t *testing.T, name string) string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name+".fixture"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	root := t.TempDir()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64*1024), 1024*1024)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.TrimSpace(line) == "" || strings.HasPrefix(line, "#") {
			continue
		}
		op, rest, _ := strings.Cut(line, " ")
		path, arg, _ := strings.Cut(rest, " ")
		full := filepath.Join(root, path)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		var data []byte
		switch op {
		case "d":
			err = os.MkdirAll(full, 0o755)
		case "l":
			err = os.Symlink(arg, full)
		case "f":
			data = []byte(arg + "\n")
		case "q":
			var s string
			s, err = strconv.Unquote(arg)
			data = []byte(s)
		case "x":
			data, err = hex.DecodeString(arg)
		default:
			t.Fatalf("%s.fixture:%d: unknown op %q", name, n, op)
		}
		if err == nil && data != nil {
			err = os.WriteFile(full, data, 0o644)
		}
		if err != nil {
			t.Fatalf("%s.fixture:%d: %v", name, n, err)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return root
}

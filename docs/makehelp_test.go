package docs

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/internal/testtool"
)

// targetRE finds rule targets at the start of a line: "name:" or
// "name: deps", not variable assignments (":=") or pattern rules.
var targetRE = regexp.MustCompile(`(?m)^([a-z0-9][a-z0-9-]*):([^=]|$)`)

// TestMakeHelpListsEveryTarget: every target of the Makefile and of the
// */*.mk files it includes appears in `make help`, which is where the docs
// send newcomers.
func TestMakeHelpListsEveryTarget(t *testing.T) {
	testtool.Need(t, "make")
	files := []string{"../Makefile"}
	for _, g := range []string{"../*/*.mk", "../*/*/*.mk"} {
		m, err := filepath.Glob(g)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	var targets []string
	for _, f := range files {
		if strings.HasPrefix(f, "../initramfs/tools/") {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range targetRE.FindAllStringSubmatch(string(b), -1) {
			targets = append(targets, m[1])
		}
	}
	if len(targets) < 10 {
		t.Fatalf("found only %d targets (%v): the parser is wrong", len(targets), targets)
	}
	out, err := exec.Command("make", "-s", "-C", "..", "help").CombinedOutput()
	if err != nil {
		t.Fatalf("make help: %v\n%s", err, out)
	}
	listed := map[string]bool{}
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			listed[f[0]] = true
		}
	}
	for _, tg := range targets {
		if !listed[tg] {
			t.Errorf("make help does not list %q (give its rule a \"## what it does\" comment)", tg)
		}
	}
}

// Package docs holds the operator documentation; its test keeps it true.
//
// TestTranscripts runs every transcript in README.md and docs/*.md against
// a fresh `kiln serve` and compares the output; TestLinks checks that every
// relative link resolves to a file inside the repository.
//
// A transcript is a fenced block whose info string is "console transcript":
//
//	```console transcript
//	$ kiln node create --driver fake-hardware --name n1 -o yaml | grep ^uuid
//	uuid: 82199930-6fd7-4cfe-9c68-904f725ce760
//	```
//
// Lines starting with "$ " are commands, run in order with sh in one
// directory per document, the built kiln first on PATH and KILN_URL set to
// that document's controller (http://127.0.0.1:6385 in a command is
// replaced by its address; its conductor is named "vm"). The lines after a
// command are its expected output (stdout and stderr). Before comparing,
// both sides have every UUID replaced by <UUID>, every timestamp by <TIME>,
// trailing blanks removed and runs of blanks made one, so examples keep
// real-looking values and table alignment. In the expected output, <ANY>
// matches any text within a line and a line "..." any number of lines
// (for output that varies between runs, such as --wait's progress lines).
// Plain ```console or ```sh blocks are examples and are not run.
package docs

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/kilnhq/kiln/test/kilnproc"
)

var kilnBin string

func TestMain(m *testing.M) { kilnproc.RunTests(m, &kilnBin) }

// transcript is one marked block: its commands and their expected output.
type transcript struct {
	line  int // of the opening fence
	steps []step
}

type step struct {
	line int
	cmd  string
	want []string
}

const (
	transcriptFence = "```console transcript"
	defaultEndpoint = "http://127.0.0.1:6385"
)

// parseTranscripts finds the transcripts in a Markdown document.
func parseTranscripts(doc string) []transcript {
	var out []transcript
	var cur *transcript
	for i, l := range strings.Split(doc, "\n") {
		trimmed := strings.TrimSpace(l)
		switch {
		case cur == nil && trimmed == transcriptFence:
			cur = &transcript{line: i + 1}
		case cur != nil && trimmed == "```":
			out = append(out, *cur)
			cur = nil
		case cur != nil && strings.HasPrefix(l, "$ "):
			cur.steps = append(cur.steps, step{line: i + 1, cmd: strings.TrimPrefix(l, "$ ")})
		case cur != nil && len(cur.steps) > 0:
			s := &cur.steps[len(cur.steps)-1]
			s.want = append(s.want, l)
		}
	}
	return out
}

var (
	uuidRE  = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}`)
	timeRE  = regexp.MustCompile(`\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:?\d{2})?`)
	blankRE = regexp.MustCompile(`[ \t]+`)
)

// normalize puts placeholders in place of what differs between runs.
func normalize(l string) string {
	l = uuidRE.ReplaceAllString(l, "<UUID>")
	l = timeRE.ReplaceAllString(l, "<TIME>")
	return blankRE.ReplaceAllString(strings.TrimRight(l, " \t\r"), " ")
}

// lineMatches compares one normalized expected line (with <ANY>) to one
// normalized actual line.
func lineMatches(want, got string) bool {
	if !strings.Contains(want, "<ANY>") {
		return want == got
	}
	parts := strings.Split(want, "<ANY>")
	for i, p := range parts {
		parts[i] = regexp.QuoteMeta(p)
	}
	return regexp.MustCompile("^" + strings.Join(parts, ".*") + "$").MatchString(got)
}

// matches reports whether got fits want, a line "..." in want standing for
// any number of lines.
func matches(want, got []string) bool {
	if len(want) == 0 {
		return len(got) == 0
	}
	if want[0] == "..." {
		for i := 0; i <= len(got); i++ {
			if matches(want[1:], got[i:]) {
				return true
			}
		}
		return false
	}
	return len(got) > 0 && lineMatches(want[0], got[0]) && matches(want[1:], got[1:])
}

func normalizeAll(lines []string) []string {
	var out []string
	for _, l := range lines {
		out = append(out, normalize(l))
	}
	for len(out) > 0 && out[len(out)-1] == "" {
		out = out[:len(out)-1]
	}
	return out
}

// documents are the Markdown files the checks cover.
func documents(t *testing.T) []string {
	t.Helper()
	docs, err := filepath.Glob("*.md")
	if err != nil {
		t.Fatal(err)
	}
	return append([]string{"../README.md"}, docs...)
}

func TestTranscripts(t *testing.T) {
	total := 0
	for _, doc := range documents(t) {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		ts := parseTranscripts(string(b))
		if len(ts) == 0 {
			continue
		}
		total += len(ts)
		t.Run(filepath.Base(doc), func(t *testing.T) {
			t.Parallel()
			runTranscripts(t, doc, ts)
		})
	}
	if total == 0 {
		t.Fatalf("no %q blocks found: the check would prove nothing", transcriptFence)
	}
}

func runTranscripts(t *testing.T, doc string, ts []transcript) {
	dir := t.TempDir()
	p := kilnproc.Start(t, kilnBin, filepath.Join(dir, "kiln.db"), "--conductor", "vm")
	env := append(os.Environ(), "KILN_URL="+p.URL, "PATH="+filepath.Dir(kilnBin)+string(os.PathListSeparator)+os.Getenv("PATH"))
	for _, tr := range ts {
		for _, s := range tr.steps {
			cmd := exec.Command("sh", "-c", strings.ReplaceAll(s.cmd, defaultEndpoint, p.URL))
			cmd.Dir = dir
			cmd.Env = env
			out, _ := cmd.CombinedOutput() // the exit status is part of the transcript when it matters
			got := normalizeAll(strings.Split(string(out), "\n"))
			want := normalizeAll(s.want)
			if !matches(want, got) {
				t.Errorf("%s:%d: $ %s\n--- want (normalized)\n%s\n--- got (normalized)\n%s\n--- got\n%s",
					doc, s.line, s.cmd, strings.Join(want, "\n"), strings.Join(got, "\n"), out)
			}
		}
	}
}

// linkRE finds Markdown links and images: [text](target) and ![alt](target).
var linkRE = regexp.MustCompile(`\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)

// TestLinks: every relative link in the repository's Markdown resolves to a
// file or directory inside the repository (a link out of it is dead in a
// clone).
func TestLinks(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("git", "-C", root, "ls-files", "*.md", "**/*.md").Output()
	var files []string
	if err == nil {
		files = strings.Fields(string(out))
	} else {
		t.Logf("git ls-files: %v; checking README.md and docs/ only", err)
		for _, d := range documents(t) {
			rel, _ := filepath.Rel(root, filepath.Join(root, "docs", d))
			files = append(files, rel)
		}
	}
	checked := 0
	for _, f := range files {
		if strings.HasPrefix(f, "initramfs/tools/") {
			continue // u-root's module: not ours
		}
		path := filepath.Join(root, f)
		fh, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		inFence := false
		for n := 1; sc.Scan(); n++ {
			l := sc.Text()
			if strings.HasPrefix(strings.TrimSpace(l), "```") {
				inFence = !inFence
			}
			if inFence {
				continue
			}
			for _, m := range linkRE.FindAllStringSubmatch(l, -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") || strings.HasPrefix(target, "#") {
					continue
				}
				target, _, _ = strings.Cut(target, "#")
				abs := filepath.Join(filepath.Dir(path), target)
				checked++
				if r, err := filepath.Rel(root, abs); err != nil || r == ".." || strings.HasPrefix(r, "../") {
					t.Errorf("%s:%d: link %q leaves the repository", f, n, m[1])
					continue
				}
				if _, err := os.Stat(abs); err != nil {
					t.Errorf("%s:%d: link %q: %v", f, n, m[1], err)
				}
			}
			for _, dead := range []string{"../shared/", "shared/spec/", "shared/notes/"} {
				if strings.Contains(l, dead) {
					t.Errorf("%s:%d: names %q, outside the repository", f, n, dead)
				}
			}
		}
		fh.Close()
	}
	if checked == 0 {
		t.Fatal("no relative links found: the check would prove nothing")
	}
}

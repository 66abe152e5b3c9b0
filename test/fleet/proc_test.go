package fleet

import (
	"os"
	"strconv"
	"testing"
	"time"
)

func TestStatCPU(t *testing.T) {
	for _, tc := range []struct {
		name, stat string
		want       time.Duration
	}{
		{"kiln", "4242 (kiln) S 1 4242 4242 0 -1 4194560 9000 0 3 0 1234 566 0 0 20 0 40 0 100 2000000 5000", 18 * time.Second},
		{"a name with spaces and parentheses", "7 (a (b) c) R 1 7 7 0 -1 0 0 0 0 0 5 7 0 0 20 0 1 0 1 1 1", 120 * time.Millisecond},
		{"truncated", "7 (x) R 1 7", 0},
		{"no name", "garbage", 0},
	} {
		if got := statCPU(tc.stat); got != tc.want {
			t.Errorf("%s: statCPU = %v, want %v", tc.name, got, tc.want)
		}
	}
	// This process's own line parses, and has used some CPU by now.
	b, err := os.ReadFile("/proc/" + strconv.Itoa(os.Getpid()) + "/stat")
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for i := 0; statCPU(string(b)) == 0 && i < 1e9; i++ {
		if i%1e6 == 0 {
			b, _ = os.ReadFile("/proc/" + strconv.Itoa(os.Getpid()) + "/stat")
		}
	}
	if statCPU(string(b)) <= 0 {
		t.Errorf("own /proc stat %q: no CPU time", b)
	}
}

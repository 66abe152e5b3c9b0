package conductor

import (
	"fmt"
	"testing"
)

func keys(n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("00000000-0000-4000-8000-%012d", i)
	}
	return out
}

func TestRingOwnerIsMemberAndStable(t *testing.T) {
	for _, tc := range []struct {
		name    string
		members []string
	}{
		{"one", []string{"a"}},
		{"three", []string{"a", "b", "c"}},
		{"order and duplicates ignored", []string{"c", "a", "b", "a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRing(tc.members)
			again := NewRing([]string{"a", "b", "c"}[:len(r.Members())])
			for _, k := range keys(500) {
				o := r.Owner(k)
				found := false
				for _, m := range tc.members {
					found = found || m == o
				}
				if !found {
					t.Fatalf("owner %q of %s is not a member", o, k)
				}
				if o != again.Owner(k) {
					t.Fatalf("owner of %s differs between equal rings", k)
				}
			}
		})
	}
	if NewRing(nil).Owner("x") != "" {
		t.Error("empty ring has an owner")
	}
}

func TestRingBalanceAndMinimalMovement(t *testing.T) {
	ks := keys(3000)
	r3 := NewRing([]string{"a", "b", "c"})
	count := map[string]int{}
	for _, k := range ks {
		count[r3.Owner(k)]++
	}
	for m, n := range count {
		if n < 700 || n > 1300 {
			t.Errorf("member %s owns %d of 3000 nodes; want about 1000", m, n)
		}
	}
	// b dies: only b's nodes move, and they spread over a and c.
	r2 := NewRing([]string{"a", "c"})
	for _, k := range ks {
		before, after := r3.Owner(k), r2.Owner(k)
		if before != "b" && before != after {
			t.Fatalf("node %s moved from live %s to %s", k, before, after)
		}
		if after == "b" {
			t.Fatalf("node %s still on the dead member", k)
		}
	}
}

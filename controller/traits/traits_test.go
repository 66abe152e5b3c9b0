package traits

import (
	"slices"
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		trait string
		err   string // "" valid
	}{
		{"CUSTOM_GPU", ""},
		{"CUSTOM_A_1", ""},
		{"HW_CPU_X86_AVX2", ""},
		{"COMPUTE_ARCH_AARCH64", ""},
		{"CUSTOM_", "'CUSTOM_' is not valid under any of the given schemas"},
		{"CUSTOM_lower", "'CUSTOM_lower' is not valid under any of the given schemas"},
		{"HW_CPU_X86_NOPE", "'HW_CPU_X86_NOPE' is not valid under any of the given schemas"},
		{"custom_gpu", "'custom_gpu' is not valid under any of the given schemas"},
		{"CUSTOM_A-B", "'CUSTOM_A-B' is not valid under any of the given schemas"},
		{"", "'' is too short"},
		{"CUSTOM_" + strings.Repeat("A", 248), ""},
		{"CUSTOM_" + strings.Repeat("A", 249), "'CUSTOM_" + strings.Repeat("A", 249) + "' is too long"},
		{"it's", `"it's" is not valid under any of the given schemas`},
	} {
		err := Check(tc.trait)
		got := ""
		if err != nil {
			got = err.Error()
		}
		if got != tc.err {
			t.Errorf("Check(%q) = %q, want %q", tc.trait, got, tc.err)
		}
	}
}

func TestStandardList(t *testing.T) {
	if len(standard) < 100 {
		t.Fatalf("only %d standard traits: the generated list is truncated", len(standard))
	}
	if !slices.IsSorted(standard) {
		t.Fatal("the standard list is not sorted: IsStandard's binary search needs it")
	}
	for _, s := range standard {
		if strings.HasPrefix(s, "CUSTOM_") || Check(s) != nil {
			t.Errorf("standard trait %q does not validate", s)
		}
	}
}

func TestNormalizeAndHasAll(t *testing.T) {
	got := Normalize([]string{"CUSTOM_B", "CUSTOM_A", "CUSTOM_B"})
	if !slices.Equal(got, []string{"CUSTOM_A", "CUSTOM_B"}) {
		t.Errorf("Normalize = %v", got)
	}
	if got := Normalize(nil); got == nil || len(got) != 0 {
		t.Errorf("Normalize(nil) = %#v, want an empty list", got)
	}
	for _, tc := range []struct {
		have, want []string
		ok         bool
	}{
		{nil, nil, true},
		{[]string{"CUSTOM_A"}, nil, true},
		{[]string{"CUSTOM_A", "CUSTOM_B"}, []string{"CUSTOM_B"}, true},
		{[]string{"CUSTOM_A"}, []string{"CUSTOM_A", "CUSTOM_B"}, false},
		{nil, []string{"CUSTOM_A"}, false},
	} {
		if got := HasAll(tc.have, tc.want); got != tc.ok {
			t.Errorf("HasAll(%v, %v) = %v", tc.have, tc.want, got)
		}
	}
}

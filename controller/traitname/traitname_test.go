package traitname

import (
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	for _, tc := range []struct {
		name string
		want bool
	}{
		{"CUSTOM_HYPERTHREADING_ON", true},
		{"CUSTOM_A1_", true},
		{"HW_CPU_X86_AVX2", true},
		{"COMPUTE_ACCELERATORS", true},
		{"CUSTOM_", false},                // nothing after the prefix
		{"CUSTOM_lower", false},           // lower case
		{"CUSTOM_A-B", false},             // hyphen
		{"custom_A", false},               // prefix in lower case
		{"HW_CPU_X86_NOT_A_TRAIT", false}, // not in os-traits
		{"", false},
		{"CUSTOM_" + strings.Repeat("A", 248), true},  // 255
		{"CUSTOM_" + strings.Repeat("A", 249), false}, // 256
		{" CUSTOM_A", false},
	} {
		if got := Valid(tc.name); got != tc.want {
			t.Errorf("Valid(%q) = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestStandardList guards the embedded list against a bad regeneration.
func TestStandardList(t *testing.T) {
	names := strings.Fields(standard)
	if len(names) < 300 {
		t.Fatalf("%d standard traits, os-traits has about 377", len(names))
	}
	for _, n := range names {
		if strings.HasPrefix(n, "CUSTOM_") || strings.ToUpper(n) != n {
			t.Errorf("standard trait %q is not an upper-case, non-custom name", n)
		}
	}
	if !IsStandard("HW_CPU_X86_AVX2") || IsStandard("CUSTOM_X") {
		t.Error("IsStandard")
	}
}

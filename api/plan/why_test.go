package plan

import (
	"slices"
	"testing"
)

// TestWhysListsEveryCode: every constant of type Why is in Whys, once, and is named Why and
// its value, so that the code recorded in status is the one the source names.
func TestWhysListsEveryCode(t *testing.T) {
	var declared []Why
	for _, c := range constants(t, "why.go", "Why") {
		declared = append(declared, Why(c.value))
		if c.name != "Why"+c.value {
			t.Errorf("%s is %q: name it Why%s", c.name, c.value, c.value)
		}
	}
	if !slices.Equal(declared, Whys) {
		t.Errorf("Whys is %v, the constants are %v", Whys, declared)
	}
}

package mounts

import "testing"

func TestUnescape(t *testing.T) {
	if got := unescape(`/a\040b/c`); got != "/a b/c" {
		t.Fatalf("got %q", got)
	}
	if got := unescape(`/plain`); got != "/plain" {
		t.Fatalf("got %q", got)
	}
}

// The root of the file system is always mounted.
func TestPointsHasRoot(t *testing.T) {
	points, err := Points()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range points {
		if p == "/" {
			return
		}
	}
	t.Fatalf("no / among %d mount points", len(points))
}

func TestUnder(t *testing.T) {
	for p, want := range map[string]bool{"/s": true, "/s/a": true, "/sa": false, "/": false} {
		if Under(p, "/s") != want {
			t.Errorf("Under(%q, /s) = %v", p, !want)
		}
	}
}

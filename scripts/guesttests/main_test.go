package main

import (
	"strings"
	"testing"
)

// TestScan: marked tests of every package under the root, none of a
// dot directory or another module, in KERNEL_TESTS's form.
func TestScan(t *testing.T) {
	sel, err := scan("testdata/good")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := format(sel), "a:^(TestOne|TestTwo)$ b/c:^(TestC)$"; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}

// TestMarkerThatSelectsNothing: a marker where it selects no test, or
// with no reason, is an error naming it, not a test silently left out.
func TestMarkerThatSelectsNothing(t *testing.T) {
	for dir, want := range map[string]string{
		"misplaced": "m_test.go:6:2",
		"noreason":  "says no reason",
		"helper":    "not in a test function's doc comment",
	} {
		if _, err := scan("testdata/" + dir); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want an error with %q", dir, err, want)
		}
	}
}

package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The Makefile's selection before the markers (GUEST_DATAPATH, GUEST_AGENT,
// GUEST_CMD): the markers must select exactly what these did.
var makefileRegexes = map[string]string{
	"internal/datapath": `^(TestArrivalCountsEveryPacket|TestAttachDetach.*|TestCleanup.*|TestCloseAfterNamespaceGone|TestAttachBadInputChangesNothing|TestConfigValidate|TestSupported|TestCountersPerCPU|TestFast.*|TestGuard.*|TestTwinAgrees|TestSplitTwinAgrees|TestBPFQdisc.*|TestDisabledHookPasses|TestFallbackSpellings|TestSplitAttachDetach|TestSplitBadInputChangesNothing|TestSplitCleanup|TestCheckSplitVethPeer|TestSplitHostNIC|TestSplitOnTestbed|TestStandDown|TestSteeringOnTestbed)$`,
	"internal/agent":    `^(TestEnableStatusDisable|TestKilledAgent|TestDisableStopsAgent|TestStandDownAndBack|TestComebackSteersRunningFlows|TestSplitEnableStatusDisable|TestMflowLayouts|TestFastPathLayouts|TestFastPathBadInput|TestStaticModes)$`,
	"cmd/falcon":        `^(TestBadInputChangesNothing|TestDoctorJSON|TestEnableStatusDisableCLI)$`,
}

func TestSameAsMakefileRegexes(t *testing.T) {
	sel, err := scan("../..")
	if err != nil {
		t.Fatal(err)
	}
	for dir, re := range makefileRegexes {
		want := []string{}
		files, _ := filepath.Glob(filepath.Join("../..", dir, "*_test.go"))
		for _, path := range files {
			f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range f.Decls {
				if fn, ok := d.(*ast.FuncDecl); ok && isTest(fn) && regexp.MustCompile(re).MatchString(fn.Name.Name) {
					want = append(want, fn.Name.Name)
				}
			}
		}
		slices.Sort(want)
		got := slices.Sorted(slices.Values(sel[dir]))
		if !slices.Equal(got, want) {
			t.Errorf("%s: marked %v\nthe Makefile's %v", dir, got, want)
			os.WriteFile("/tmp/guest-want-"+strings.ReplaceAll(dir, "/", "-"), []byte(strings.Join(want, "\n")+"\n"), 0o644)
		}
	}
	for dir := range sel {
		if makefileRegexes[dir] == "" {
			t.Errorf("%s: marked, but not in the Makefile", dir)
		}
	}
}

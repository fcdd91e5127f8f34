package schema

import (
	"reflect"
	"testing"

	"github.com/falconnet/falcon/internal/agent"
)

func TestSplitModes(t *testing.T) {
	for list, want := range map[string][]string{
		"vanilla,falcon:threshold=100,falcon+split,rps+": {"vanilla", "falcon:threshold=100", "falcon+split", "rps+"},
		"falcon:cpus=0-1,4,threshold=90,rfs":             {"falcon:cpus=0-1,4,threshold=90", "rfs"},
		"vanilla, falcon ,":                              {"vanilla", "falcon"},
		"warp,falcon":                                    {"warp", "falcon"},
		"falcon:threshold=90@b,vanilla@aa":               {"falcon:threshold=90@b", "vanilla@aa"},
	} {
		if got := SplitModes(list); !reflect.DeepEqual(got, want) {
			t.Errorf("SplitModes(%q) = %q, want %q", list, got, want)
		}
	}
}

// TestParseMode: vanilla and labels are the lab's; the rest is the
// catalogue's, read by the agent's own parser.
func TestParseMode(t *testing.T) {
	m, err := ParseMode("vanilla@aa")
	if err != nil || !m.Vanilla || m.Label != "aa" || m.Opts.Mode != "" || m.Spec != "vanilla@aa" {
		t.Errorf("vanilla@aa: %+v, %v", m, err)
	}
	m, err = ParseMode("falcon:threshold=90@b")
	if err != nil || m.Vanilla || m.Label != "b" || m.Opts.Mode != agent.ModeFalcon || m.Opts.Threshold != 90 {
		t.Errorf("falcon:threshold=90@b: %+v, %v", m, err)
	}
	for _, bad := range []string{"vanilla@", "falcon@A", "falcon@abcdefghijklmnopq", "warp", "falcon:threshold=101"} {
		if _, err := ParseMode(bad); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	if _, err := ParseMode("warp"); err == nil || err.Error() != `unknown mode "warp": want one of auto, falcon, falcon+fastpath, falcon+split, falcon+split+fastpath, fastpath, mflow, rfs, rfs+, rps, rps+` {
		t.Errorf("warp: %v", err)
	}
}

package agent

import (
	"errors"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// configMapDir writes keys as a ConfigMap volume shows them: a file per
// key, behind a symlink into a timestamped directory, as the kubelet
// writes it so that an update is atomic.
func configMapDir(t *testing.T, keys map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	data := filepath.Join(dir, "..2026_01_01_00_00_00.1")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Base(data), filepath.Join(dir, "..data")); err != nil {
		t.Fatal(err)
	}
	for k, v := range keys {
		if err := os.WriteFile(filepath.Join(data, k), []byte(v), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(filepath.Join("..data", k), filepath.Join(dir, k)); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func agentOptions(t *testing.T, args ...string) (Options, error) {
	t.Helper()
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	f := AddAgentFlags(fs)
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	return f.Options()
}

func TestNodeModeSelection(t *testing.T) {
	dir := configMapDir(t, map[string]string{
		"mode": "rps", "mode.worker-2": "rfs+\n", "mode.worker-3": "",
		"mode.worker-4": "falcon:threshold=70", "mode.worker-5": " falcon+split ", "threshold": "85",
	})
	for _, c := range []struct {
		node, mode string
		split      bool
		threshold  int
	}{
		{"worker-1", ModeRPS, false, 85}, // no key of its own: the default key
		{"worker-2", ModeRFS, false, 85}, // its own key, newline and all
		{"worker-3", ModeFalcon, false, 85},
		{"worker-4", ModeFalcon, false, 70},
		{"worker-5", ModeFalcon, true, 85},
		{"worker", ModeRPS, false, 85}, // a prefix of a node's name is another node
	} {
		o, err := agentOptions(t, "--mode-config", dir, "--node-name", c.node)
		if err != nil {
			t.Errorf("node %s: %v", c.node, err)
			continue
		}
		if o.Mode != c.mode || o.Split != c.split || o.Threshold != c.threshold {
			t.Errorf("node %s: mode %s split %v threshold %d, want %s %v %d", c.node, o.Mode, o.Split, o.Threshold, c.mode, c.split, c.threshold)
		}
	}
	// A flag still wins over the mode's settings, as with --mode.
	o, err := agentOptions(t, "--mode-config", dir, "--node-name", "worker-4", "--threshold=90")
	if err != nil || o.Threshold != 90 {
		t.Errorf("--threshold=90 after mode.worker-4: threshold %d, %v", o.Threshold, err)
	}
}

func TestNodeModeErrors(t *testing.T) {
	dir := configMapDir(t, map[string]string{"mode": "falcon", "mode.worker-2": "turbo"})
	empty := configMapDir(t, map[string]string{"threshold": "85"})
	for _, c := range []struct {
		args []string
		want []string
	}{
		// An unknown mode names the node, the key and every valid mode.
		{[]string{"--mode-config", dir, "--node-name", "worker-2"},
			[]string{"node worker-2", "ConfigMap key mode.worker-2", "unknown mode", strings.Join(ModeNames(), ", ")}},
		{[]string{"--mode-config", dir, "--node-name", ""}, []string{"--node-name", "spec.nodeName"}},
		{[]string{"--mode-config", dir, "--node-name", "../etc"}, []string{"--node-name"}},
		{[]string{"--mode-config", dir, "--node-name", "w1", "--mode", "rps"}, []string{"--mode and --mode-config"}},
		{[]string{"--mode-config", empty, "--node-name", "w1"}, []string{"neither key mode.w1 nor mode"}},
	} {
		_, err := agentOptions(t, c.args...)
		var se *SettingError
		if !errors.As(err, &se) {
			t.Errorf("%q: %v, want a usage error", c.args, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("%q: %q lacks %q", c.args, err, w)
			}
		}
	}
}

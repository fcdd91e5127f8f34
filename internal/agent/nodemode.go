package agent

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// The Kubernetes DaemonSet runs one agent per node from one pod template,
// yet nodes may need different modes (a study compares them node by node).
// The mode therefore comes from the agent's ConfigMap mounted as a volume:
// key "mode" for every node, "mode.<node name>" for one node, with the node
// name from the downward API. That needs no access to the API server, which
// the agent does not have (no token, no client), and a ConfigMap edit
// reaches every node the same way as the other settings: at the agent's
// next start.

// ModeKey is the ConfigMap key of every node's mode.
const ModeKey = "mode"

// NodeModeKey is the ConfigMap key of node's own mode, which wins over
// ModeKey. Node names are DNS subdomains, so the key is a valid ConfigMap
// key.
func NodeModeKey(node string) string { return ModeKey + "." + node }

// addNodeModeFlags defines agent's --mode-config and --node-name.
func (f *Flags) addNodeModeFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.modeDir, "mode-config", "", "take the mode from this directory (a ConfigMap volume): file "+
		NodeModeKey("NODE")+" for node --node-name, else file "+ModeKey+"; instead of --mode")
	fs.StringVar(&f.node, "node-name", "", "this node's name, for --mode-config (the DaemonSet passes spec.nodeName)")
}

// AddAgentFlags defines agent's flags: enable's, and where a node's mode
// comes from.
func AddAgentFlags(fs *flag.FlagSet) *Flags {
	f := AddFlags(fs)
	f.addNodeModeFlags(fs)
	return f
}

// NodeMode reads node's mode spec from dir: the file of NodeModeKey(node)
// when there is one, else that of ModeKey. It returns the key it read.
func NodeMode(dir, node string) (spec, key string, err error) {
	if node == "" || strings.ContainsAny(node, "/\x00") || node == "." || node == ".." {
		return "", "", settingErrorf("--node-name %q: want this node's name (the DaemonSet passes spec.nodeName)", node)
	}
	for _, key := range []string{NodeModeKey(node), ModeKey} {
		b, err := os.ReadFile(filepath.Join(dir, key))
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return "", key, fmt.Errorf("node %s: ConfigMap key %s: %w", node, key, err)
		}
		return strings.TrimSpace(string(b)), key, nil
	}
	return "", "", settingErrorf("node %s: --mode-config %s has neither key %s nor %s", node, dir, NodeModeKey(node), ModeKey)
}

// nodeMode sets o's mode from --mode-config, through ParseMode as any
// mode; an empty value is the default mode. The error names the node and
// the key, so that the pod's termination message says which to fix.
func (f *Flags) nodeMode(o *Options) error {
	if f.mode != "" {
		return settingErrorf("--mode and --mode-config both given: the mode comes from one of them")
	}
	spec, key, err := NodeMode(f.modeDir, f.node)
	if err != nil {
		return err
	}
	if spec == "" {
		return ParseMode(DefaultMode, o)
	}
	if err := ParseMode(spec, o); err != nil {
		return settingErrorf("node %s: ConfigMap key %s: %v", f.node, key, err)
	}
	return nil
}

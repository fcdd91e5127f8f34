package hostpaths

import (
	"strings"
	"testing"
)

// TestShimFlags: the shims of a testbed's containerd are found by their
// command line, and their sockets named as containerd 1.6 names them.
func TestShimFlags(t *testing.T) {
	args := []string{"/usr/bin/containerd-shim-runc-v2", "-namespace", "moby", "-id", "abc", "-address", "/x/containerd.sock", ""}
	f := shimFlags(args)
	if f["-namespace"] != "moby" || f["-id"] != "abc" || f["-address"] != "/x/containerd.sock" {
		t.Errorf("shimFlags = %v", f)
	}
	if f := shimFlags([]string{"/usr/bin/dockerd", "-address", "/x/containerd.sock"}); f["-address"] != "" {
		t.Errorf("another command read as a shim: %v", f)
	}
	// containerd 1.6: sha256 of address/namespace/id, in /run/containerd/s.
	if got, want := ShimSocket("/x/containerd.sock", "moby", "abc"), "/run/containerd/s/"; !strings.HasPrefix(got, want) || len(got) != len(want)+64 {
		t.Errorf("ShimSocket = %s", got)
	}
}

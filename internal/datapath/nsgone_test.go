package datapath

import (
	"os/exec"
	"testing"
)

// remakeNetns deletes namespace ns and makes it again, with the veth pair
// of testNetns, so that the name and the device's ifindex are what they
// were but the namespace is another.
func remakeNetns(t *testing.T, ns string, ifindexA int) {
	t.Helper()
	if out, err := exec.Command("ip", "netns", "del", ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns del: %v: %s", err, out)
	}
	ip(t, "netns", "add", ns)
	ip(t, "-n", ns, "link", "add", "fva", "type", "veth", "peer", "name", "fvb")
	if got := ifindex(t, ns, "fva"); got != ifindexA {
		t.Skipf("the re-made namespace's fva has ifindex %d, not %d: nothing to confuse", got, ifindexA)
	}
}

// A detach after the hook's namespace was deleted and its name made again
// (a testbed torn down and brought up while an old agent stops) must
// leave the new namespace alone, though its device has the same name,
// ifindex, and a filter of falcon's at the same handle: that filter is
// the new agent's. tcx links need no namespace to detach; clsact filters
// are deleted from inside it, so they are what could go wrong.
func TestDetachLeavesRemadeNamespace(t *testing.T) {
	ns, a, _ := testNetns(t)
	old := loadOnCPU0(t, "")
	old.forceClsact = true
	hook := Hook{Netns: ns, Ifindex: a, Name: "fva", Role: HookOnNIC}
	if err := old.Attach(hook); err != nil {
		t.Fatal(err)
	}
	oldFast := fastHarness(t)
	oldFast.forceClsact = true
	fastHook := Hook{Netns: ns, Ifindex: a, Name: "fva", Role: HookFastNIC}
	if err := oldFast.Attach(fastHook); err != nil {
		t.Fatal(err)
	}
	remakeNetns(t, ns, a)

	now := loadOnCPU0(t, "")
	now.forceClsact = true
	t.Cleanup(func() { now.Close() })
	if err := now.Attach(hook); err != nil {
		t.Fatal(err)
	}
	before := inspect(t, ns, a, false)
	if before.filters != 1 || !before.clsact {
		t.Fatalf("the new datapath's attachment: %+v, want one filter on a clsact qdisc", before)
	}
	if err := oldFast.Detach(fastHook); err != nil {
		t.Errorf("the old fast path's detach: %v", err)
	}
	if err := old.Close(); err != nil {
		t.Errorf("the old datapath's close: %v", err)
	}
	if after := inspect(t, ns, a, false); after != before {
		t.Fatalf("the old datapath's detach changed the re-made namespace: %+v, was %+v", after, before)
	}
}

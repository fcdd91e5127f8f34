package datapath

import (
	"bytes"
	"os"
	"strings"
	"testing"

	"github.com/cilium/ebpf/btf"
)

// TestBPFQdiscSupportedHere runs the probe on this machine's kernel. It
// passes on a kernel with or without a BPF qdisc and logs which; without
// one the error must name CONFIG_NET_SCH_BPF and say what mflow loses.
//
// guest: the BPF qdisc probe on a kernel without one (6.1)
func TestBPFQdiscSupportedHere(t *testing.T) {
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		t.Skipf("no kernel BTF here (%v)", err)
	}
	err := BPFQdiscSupported()
	if err == nil {
		t.Logf("kernel %s can host a BPF qdisc (CONFIG_NET_SCH_BPF)", kernelReleaseString())
		return
	}
	t.Logf("kernel %s: %v", kernelReleaseString(), err)
	for _, want := range []string{"CONFIG_NET_SCH_BPF", kernelReleaseString(), "TCP's out-of-order queue"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("probe error lacks %q: %v", want, err)
		}
	}
}

// TestBPFQdiscIn decides from hand-built BTF: both the struct_ops value
// type and the kfunc make a BPF qdisc, either alone does not.
//
// guest: the BPF qdisc probe's reading of BTF, beside its run on a kernel without one (TestBPFQdiscSupportedHere)
func TestBPFQdiscIn(t *testing.T) {
	u64 := &btf.Int{Name: "u64", Size: 8}
	structOps := &btf.Struct{Name: bpfQdiscStructOps, Size: 8, Members: []btf.Member{{Name: "common", Type: u64}}}
	kfunc := &btf.Func{Name: bpfQdiscDropKfunc, Type: &btf.FuncProto{Return: &btf.Void{}}, Linkage: btf.GlobalFunc}
	other := &btf.Struct{Name: "Qdisc_ops", Size: 8, Members: []btf.Member{{Name: "id", Type: u64}}}

	spec := func(types ...btf.Type) *btf.Spec {
		t.Helper()
		b, err := btf.NewBuilder(append([]btf.Type{other}, types...), nil)
		if err != nil {
			t.Fatal(err)
		}
		raw, err := b.Marshal(nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		s, err := btf.LoadSpecFromReader(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	for _, c := range []struct {
		name  string
		types []btf.Type
		want  string // "" for nil
	}{
		{"both", []btf.Type{structOps, kfunc}, ""},
		{"neither", nil, "has no BPF qdisc: CONFIG_NET_SCH_BPF (Linux 6.16+) is off or absent"},
		{"kfunc only", []btf.Type{kfunc}, "no struct bpf_struct_ops_Qdisc_ops"},
		{"struct_ops only", []btf.Type{structOps}, "lacks the kfunc bpf_qdisc_skb_drop"},
	} {
		err := bpfQdiscIn(spec(c.types...), "6.18.0-test")
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want nil", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), "6.18.0-test")):
			t.Errorf("%s: %v, want an error with %q and the release", c.name, err, c.want)
		}
	}
}

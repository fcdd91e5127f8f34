package benchprobe

import "testing"

// The machine's virtualization: systemd-detect-virt's word for the machine
// where it ran (also "none", which it prints with exit status 1) and the
// container it runs in, if any, else the CPU's hypervisor flag, as on the
// lent 16-vCPU machine (its flags line, cut).
func TestVirtualization(t *testing.T) {
	flags := "fpu vme de pse tsc msr pae mce cx8 apic sep mtrr pge mca cmov pat pse36 clflush mmx fxsr sse sse2 ss ht syscall nx rdtscp lm constant_tsc rep_good nopl xtopology nonstop_tsc cpuid tsc_known_freq pni pclmulqdq ssse3 fma cx16 pcid sse4_1 sse4_2 x2apic movbe popcnt tsc_deadline_timer aes xsave avx f16c rdrand hypervisor lahf_lm abm"
	for _, c := range []struct {
		vm, container string
		missing       bool
		flags         string
		want          string
	}{
		{"kvm\n", "none\n", false, flags, "kvm"},
		{"kvm\n", "docker\n", false, flags, "kvm, in a docker container"},
		{"none\n", "none\n", false, "fpu vme", "none"},
		{"none\n", "docker\n", false, "fpu vme", "none, in a docker container"},
		{"", "", true, flags, "vm (the CPU's hypervisor flag; no systemd-detect-virt)"},
		{"", "", true, "fpu vme hypervisorx", "none seen (no hypervisor flag; no systemd-detect-virt)"},
		{"", "", false, flags, ""},
	} {
		if got := virtualization(c.vm, c.container, c.missing, c.flags); got != c.want {
			t.Errorf("virtualization(%q, %q, %v, …) = %q, want %q", c.vm, c.container, c.missing, got, c.want)
		}
	}
}

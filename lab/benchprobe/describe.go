package benchprobe

import (
	"bufio"
	"bytes"
	"errors"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/falconnet/falcon/internal/cpuset"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/toolpath"
)

// DescribeMachine gathers what it can; missing facts stay empty rather
// than failing a benchmark that already ran.
func DescribeMachine(toolNames []string) schema.Machine {
	m := schema.Machine{Arch: runtime.GOARCH, GoVersion: runtime.Version(), Tools: map[string]string{}}
	if cpus, err := cpuset.Online(); err == nil {
		m.Cores, m.OnlineCPUs = len(cpus), cpuset.Format(cpus)
	} else {
		m.Cores = runtime.NumCPU()
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
		m.KernelBuild = unix.ByteSliceToString(u.Version[:])
	}
	m.Hostname, _ = os.Hostname()
	m.CPUModel = fileField("/proc/cpuinfo", "model name", ':')
	if m.CPUModel == "" { // arm64 and others
		m.CPUModel = fileField("/proc/cpuinfo", "Hardware", ':')
	}
	if kb := strings.TrimSuffix(fileField("/proc/meminfo", "MemTotal", ':'), " kB"); kb != "" {
		if n, err := strconv.ParseUint(strings.TrimSpace(kb), 10, 64); err == nil {
			m.MemoryBytes = n << 10
		}
	}
	m.OS = strings.Trim(fileField("/etc/os-release", "PRETTY_NAME", '='), `"`)
	vm, err := exec.Command("systemd-detect-virt", "--vm").Output()
	ct, _ := exec.Command("systemd-detect-virt", "--container").Output()
	m.Virt = virtualization(string(vm), string(ct), errors.Is(err, exec.ErrNotFound), fileField("/proc/cpuinfo", "flags", ':'))
	m.ToolsDir = toolpath.Dir()
	for _, t := range toolNames {
		// The version of the copy that ran: the bundle's when it has one.
		p, err := toolpath.Lookup(t)
		if err != nil {
			continue
		}
		if out, err := exec.Command(p, "--version").CombinedOutput(); err == nil {
			line, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
			m.Tools[t] = strings.TrimSpace(line)
		}
	}
	return m
}

// virtualization is systemd-detect-virt's answer for the machine ("kvm",
// "none": it exits 1 on bare metal but still says so), with the container
// it runs in, if any: asked without --vm it names the container only, and
// the 2-vCPU machine here, a KVM guest, read as "docker". Where it is
// missing (a minimal image: the 16-vCPU machine of results/scale-16cpu-kvm
// had none), what the CPU's hypervisor flag says.
func virtualization(vm, container string, missing bool, cpuFlags string) string {
	if v := strings.TrimSpace(vm); v != "" {
		if c := strings.TrimSpace(container); c != "" && c != "none" {
			return v + ", in a " + c + " container"
		}
		return v
	}
	if !missing {
		return ""
	}
	if slices.Contains(strings.Fields(cpuFlags), "hypervisor") {
		return "vm (the CPU's hypervisor flag; no systemd-detect-virt)"
	}
	return "none seen (no hypervisor flag; no systemd-detect-virt)"
}

// fileField returns the value of the first "key<sep>value" line of a file.
func fileField(path, key string, sep byte) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), string(sep))
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

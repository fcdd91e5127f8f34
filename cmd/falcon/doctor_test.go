package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/falconnet/falcon/internal/cli"
	"github.com/falconnet/falcon/lab/labtest"
	"github.com/falconnet/falcon/lab/testbed"
)

func runDoc(t *testing.T, args ...string) (string, error, int) {
	t.Helper()
	var out bytes.Buffer
	doctorOut = &out
	t.Cleanup(func() { doctorOut = os.Stdout })
	err := runDoctor(args)
	return out.String(), err, cli.ExitCode(err)
}

func TestDoctorBadInput(t *testing.T) {
	labtest.NeedRoot(t)
	empty := fmt.Sprintf("clidocempty%d", os.Getpid())
	if out, err := exec.Command("ip", "netns", "add", empty).CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("ip", "netns", "del", empty).Run() })
	for _, c := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"--netns", fmt.Sprintf("nosuch%d", os.Getpid()), "--fix"}, 1, "not found"},
		{[]string{"--netns", empty, "--fix"}, 1, "no VXLAN overlay"},
		{[]string{"--bogus"}, 2, "not defined"},
		{[]string{"extra"}, 2, "unexpected"},
	} {
		out, err, code := runDoc(t, c.args...)
		if code != c.code || err == nil || !strings.Contains(err.Error(), c.msg) || out != "" {
			t.Errorf("doctor %q: exit %d, %v, output %q; want exit %d mentioning %q and no report", c.args, code, err, out, c.code, c.msg)
		}
	}
}

// TestDoctorJSON checks the JSON that scripts read, and the exit status
// before and after --fix.
//
// guest: doctor's probes on the old kernel
func TestDoctorJSON(t *testing.T) {
	labtest.NeedTestbeds(t)
	tb := labtest.Testbed(t, testbed.Spec{Name: fmt.Sprintf("clidoc%d", os.Getpid()), Layout: "flannel"})
	h := tb.Hosts[1]
	if out, err := exec.Command("ip", "netns", "exec", h.Netns, "ethtool", "-K", h.Overlay, "gro", "off").CombinedOutput(); err != nil {
		t.Fatalf("%v: %s", err, out)
	}

	out, err, code := runDoc(t, "--netns", h.Netns, "--json")
	if code != 1 || err == nil {
		t.Errorf("with GRO off: exit %d (%v), want 1", code, err)
	}
	f := decodeDoctor(t, out, h.Netns).groOn(t, h.Overlay, h.Netns)
	if f.Severity != "warn" || !*f.Safe || *f.Fixed || !strings.Contains(f.Fix, "ethtool -K "+h.Overlay) {
		t.Errorf("before --fix: %+v", f)
	}

	out, err, code = runDoc(t, "--netns", h.Netns, "--json", "--fix")
	if code != 0 {
		t.Errorf("--fix: exit %d (%v), want 0", code, err)
	}
	if f := decodeDoctor(t, out, h.Netns).groOn(t, h.Overlay, h.Netns); !*f.Fixed {
		t.Errorf("--fix did not report the GRO fix: %+v", f)
	}

	out, err, code = runDoc(t, "--netns", h.Netns)
	if code != 0 || !strings.Contains(out, "overlay:") || !strings.Contains(out, h.Overlay) || !strings.Contains(out, "0 problem(s)") {
		t.Errorf("text after --fix: exit %d (%v)\n%s", code, err, out)
	}
}

// doctorFinding and doctorReport are what falcon doctor --json writes.
type doctorFinding struct {
	Check, Severity, Device, Netns, Message, Fix string
	Safe, Fixed                                  *bool
}

type doctorReport struct {
	Netns, Kernel string
	Overlay       struct {
		Netns   string
		Devices []struct {
			Name, Netns, Role, Kind string
			Ifindex, MTU            int
		}
	}
	Findings []doctorFinding
}

// decodeDoctor decodes a report on netns and checks its form: every role
// of the overlay found, every finding complete.
func decodeDoctor(t *testing.T, out, netns string) doctorReport {
	t.Helper()
	var r doctorReport
	dec := json.NewDecoder(strings.NewReader(out))
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, out)
	}
	if r.Netns != netns || r.Kernel == "" || r.Overlay.Netns != netns || len(r.Overlay.Devices) < 5 {
		t.Errorf("report header/overlay wrong: %+v", r)
	}
	roles := map[string]bool{}
	for _, d := range r.Overlay.Devices {
		if d.Name == "" || d.Ifindex == 0 || d.MTU == 0 || d.Kind == "" {
			t.Errorf("device without name, ifindex, MTU or kind: %+v", d)
		}
		roles[d.Role] = true
	}
	for _, role := range []string{"nic", "overlay", "bridge", "host-veth", "container"} {
		if !roles[role] {
			t.Errorf("no device with role %s", role)
		}
	}
	for _, f := range r.Findings {
		if f.Check == "" || f.Message == "" || f.Safe == nil || f.Fixed == nil ||
			!strings.Contains(" ok info warn error ", " "+f.Severity+" ") {
			t.Errorf("malformed finding %+v", f)
		}
	}
	return r
}

// groOn is the report's GRO finding on the overlay device.
func (r doctorReport) groOn(t *testing.T, overlay, netns string) *doctorFinding {
	t.Helper()
	for i, f := range r.Findings {
		if f.Check == "gro" && f.Device == overlay && f.Netns == netns {
			return &r.Findings[i]
		}
	}
	t.Fatalf("no gro finding on %s", overlay)
	return nil
}

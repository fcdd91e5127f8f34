package main

import (
	"bytes"
	"context"
	"encoding/xml"
	"image"
	"image/png"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/falconnet/falcon/internal/cli"
)

// reportHTMLFiles are the recorded results file, the Kubernetes study's
// replica sweep, memcached's latency, and falcon-lab sim's prediction.
var reportHTMLFiles = []string{
	"../../lab/render/testdata/results.json",
	"../../results/k8s-rps-rfs-2cpu-vm/k8s-rps-rfs-2cpu-vm.json",
	"../../results/workloads-2cpu-vm/memcached-2cpu-vm.json",
	"../../results/sim-2cpu-vm/sim-prediction-2cpu-vm.json",
}

// renderReportPage runs falcon-lab report --html on reportHTMLFiles and
// returns the page's path.
func renderReportPage(t *testing.T) string {
	t.Helper()
	var out bytes.Buffer
	reportOut = &out
	t.Cleanup(func() { reportOut = os.Stdout })
	dir := filepath.Join(t.TempDir(), "page")
	args := append([]string{"--html", dir}, reportHTMLFiles...)
	if err := runReport(args); err != nil {
		t.Fatal(err)
	}
	// The tables still go to standard output, each under its file's name.
	for _, f := range reportHTMLFiles {
		if !strings.Contains(out.String(), "## "+f+"\n") {
			t.Errorf("output lacks %s's heading", f)
		}
	}
	return filepath.Join(dir, "index.html")
}

// TestReportHTML: falcon-lab report FILE… --html DIR writes one well-formed
// page with a section per file, the prediction's labelled SIMULATED.
func TestReportHTML(t *testing.T) {
	path := renderReportPage(t)
	page, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d := xml.NewDecoder(bytes.NewReader(page))
	d.Strict = true
	sections, svgs := 0, 0
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well formed: %v", err)
		}
		if e, ok := tok.(xml.StartElement); ok {
			switch e.Name.Local {
			case "section":
				sections++
			case "svg":
				svgs++
			}
		}
	}
	if sections != len(reportHTMLFiles) || svgs < 2*len(reportHTMLFiles) {
		t.Errorf("%d sections and %d charts for %d files", sections, svgs, len(reportHTMLFiles))
	}
	for _, want := range []string{
		"<h2>SIMULATED: sim-prediction-2cpu-vm.json</h2>",
		`<p class="banner">SIMULATED: falcon-lab sim&#39;s model`,
		"<h2>preset k8s-rps-rfs: k8s-rps-rfs-2cpu-vm.json</h2>",
		"<h2>preset memcached: memcached-2cpu-vm.json</h2>",
		"memcached: latency percentiles (µs)",
	} {
		if !strings.Contains(string(page), want) {
			t.Errorf("page lacks %q", want)
		}
	}

	// Bad input is refused before anything is read or written.
	file := filepath.Join(t.TempDir(), "file")
	os.WriteFile(file, nil, 0o644)
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--html", file, reportHTMLFiles[0]}, "not a directory"},
		{[]string{reportHTMLFiles[0], reportHTMLFiles[1]}, "several with --html"},
		{[]string{"--html", t.TempDir(), "--svg", filepath.Join(t.TempDir(), "x.svg"), reportHTMLFiles[0], reportHTMLFiles[1]}, "--svg draws one"},
		{[]string{"--html", t.TempDir()}, "got 0"},
	} {
		err := runReport(c.args)
		if code := cli.ExitCode(err); code != 2 || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("report %q: exit %d, %v; want 2 mentioning %q", c.args, code, err, c.msg)
		}
	}
}

// TestReportHTMLChromium opens the page in a real browser, Debian's
// chromium (scripts/setup.sh --test installs it), headless, and checks its
// screenshot: a PNG of the window's size with the charts' colours on it.
// FALCON_REPORT_SCREENSHOT=PATH keeps the screenshot there.
func TestReportHTMLChromium(t *testing.T) {
	browser, err := exec.LookPath("chromium")
	if err != nil {
		t.Skip("chromium is not installed (scripts/setup.sh --test installs it): no browser to render the page in")
	}
	path := renderReportPage(t)
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	shot := filepath.Join(t.TempDir(), "page.png")
	const width, height = 1200, 3000
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync", "--hide-scrollbars",
		"--user-data-dir="+t.TempDir(), "--screenshot="+shot, "--window-size=1200,3000", "file://"+abs)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, out)
	}
	t.Logf("chromium rendered the page in %v", time.Since(start).Round(time.Millisecond))
	b, err := os.ReadFile(shot)
	if err != nil {
		t.Fatalf("no screenshot: %v\n%s", err, out)
	}
	if keep := os.Getenv("FALCON_REPORT_SCREENSHOT"); keep != "" {
		if err := os.WriteFile(keep, b, 0o644); err != nil {
			t.Error(err)
		}
	}
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if got := img.Bounds().Size(); got != image.Pt(width, height) {
		t.Errorf("screenshot is %v, want %dx%d", got, width, height)
	}
	// The charts' colours (Okabe–Ito): the second config's orange (bars,
	// legends, and sys time in the CPU charts) is nowhere else on the page.
	near := func(r, g, b uint32, want [3]uint32) bool {
		d := func(a, b uint32) uint32 {
			if a > b {
				return a - b
			}
			return b - a
		}
		return d(r>>8, want[0])+d(g>>8, want[1])+d(b>>8, want[2]) < 40
	}
	orange, blue, nonWhite := 0, 0, 0
	for y := img.Bounds().Min.Y; y < img.Bounds().Max.Y; y++ {
		for x := img.Bounds().Min.X; x < img.Bounds().Max.X; x++ {
			r, g, b, _ := img.At(x, y).RGBA()
			if r>>8 < 245 || g>>8 < 245 || b>>8 < 245 {
				nonWhite++
			}
			switch {
			case near(r, g, b, [3]uint32{0xE6, 0x9F, 0x00}):
				orange++
			case near(r, g, b, [3]uint32{0x00, 0x72, 0xB2}):
				blue++
			}
		}
	}
	t.Logf("%d non-white pixels, %d orange, %d blue", nonWhite, orange, blue)
	if orange < 500 || blue < 3000 {
		t.Errorf("the charts did not render: %d orange and %d blue pixels", orange, blue)
	}
}

package render

import (
	"bytes"
	"encoding/xml"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/falconnet/falcon/lab/report"
	"github.com/falconnet/falcon/lab/schema"
	"github.com/falconnet/falcon/lab/workload"
)

// pageCheck is what a parse of a page found.
type pageCheck struct {
	sections []string            // section ids, in order
	navLinks []string            // the contents' anchors
	titles   map[string]string   // section id → h2 text
	charts   map[string][]string // section id → kinds of its figures
	facts    map[string][]string // section id → its facts' names
	tables   map[string]int      // section id → tables in its body
	svgs     int
}

// checkPage parses an HTML page as XML (the page is written well formed:
// every element closed, every attribute quoted, only XML's entities), so
// any unclosed or misnested tag fails, and refuses anything that would
// load from outside the page: a script, a style sheet, an image or a
// frame, a link off the page, url() or @import in its style.
func checkPage(t *testing.T, page []byte) pageCheck {
	t.Helper()
	if !bytes.HasPrefix(page, []byte("<!DOCTYPE html>\n<html")) {
		t.Fatalf("page starts %.40q", page)
	}
	for _, bad := range []string{"<script", "<link", "<img", "<iframe", "<object", "<embed", "@import", "url(", "<use", "xlink:href"} {
		if bytes.Contains(bytes.ToLower(page), []byte(bad)) {
			t.Errorf("page contains %q", bad)
		}
	}
	d := xml.NewDecoder(bytes.NewReader(page))
	d.Strict = true
	p := pageParser{t: t, pageCheck: pageCheck{titles: map[string]string{}, charts: map[string][]string{}, facts: map[string][]string{}, tables: map[string]int{}}}
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("not well formed: %v (open: %v)", err, p.stack)
		}
		switch e := tok.(type) {
		case xml.StartElement:
			p.start(e)
		case xml.EndElement:
			p.end()
		case xml.CharData:
			p.text(string(e))
		}
	}
	if len(p.stack) != 0 {
		t.Errorf("unclosed at the end: %v", p.stack)
	}
	return p.pageCheck
}

// pageParser is checkPage's walk through the page's elements.
type pageParser struct {
	pageCheck
	t                *testing.T
	stack            []string // the open elements
	section          string   // the section id the walk is in
	inH2, inFactName bool
	inBody           int // the depth of the section's body div, 0 outside it
}

func (p *pageParser) start(e xml.StartElement) {
	p.stack = append(p.stack, e.Name.Local)
	attr := checkAttrs(p.t, e)
	switch e.Name.Local {
	case "section":
		p.section = attr["id"]
		p.sections = append(p.sections, p.section)
	case "a":
		p.navLinks = append(p.navLinks, strings.TrimPrefix(attr["href"], "#"))
	case "h2":
		p.inH2 = true
	case "figure":
		p.charts[p.section] = append(p.charts[p.section], strings.TrimPrefix(attr["class"], "chart "))
	case "svg":
		p.svgs++
		if len(p.stack) < 2 || p.stack[len(p.stack)-2] != "figure" {
			p.t.Errorf("an svg outside a figure: %v", p.stack)
		}
		if !strings.HasPrefix(attr["viewBox"], "0 0 ") {
			p.t.Errorf("an svg without a viewBox cannot scale: %v", e.Attr)
		}
	case "div":
		if attr["class"] == "body" {
			p.inBody = len(p.stack)
		}
	case "table":
		if p.inBody > 0 {
			p.tables[p.section]++
		}
	case "th":
		p.inFactName = len(p.stack) >= 3 && p.stack[len(p.stack)-3] == "table" && p.section != ""
	}
}

func (p *pageParser) end() {
	if p.stack[len(p.stack)-1] == "div" && len(p.stack) == p.inBody {
		p.inBody = 0
	}
	p.stack = p.stack[:len(p.stack)-1]
	p.inH2, p.inFactName = false, false
}

func (p *pageParser) text(s string) {
	if p.inH2 {
		p.titles[p.section] += s
	}
	if p.inFactName && p.inBody == 0 {
		p.facts[p.section] = append(p.facts[p.section], s)
	}
}

// checkAttrs refuses an element's attributes that reach outside the page,
// and returns them by name.
func checkAttrs(t *testing.T, e xml.StartElement) map[string]string {
	attr := map[string]string{}
	for _, a := range e.Attr {
		attr[a.Name.Local] = a.Value
		switch {
		case a.Name.Local == "href" && !strings.HasPrefix(a.Value, "#"):
			t.Errorf("<%s href=%q>: a link off the page", e.Name.Local, a.Value)
		case a.Name.Local == "src":
			t.Errorf("<%s src=%q>: loads from outside", e.Name.Local, a.Value)
		case a.Name.Local == "xmlns" && a.Value != "http://www.w3.org/2000/svg":
			t.Errorf("xmlns %q", a.Value)
		case a.Name.Local != "xmlns" && strings.Contains(a.Value, "://"):
			t.Errorf("<%s %s=%q>: a URL", e.Name.Local, a.Name.Local, a.Value)
		}
	}
	return attr
}

// TestHTMLPage renders the recorded results file and every results file
// in the repository's results/ folders into one page: well formed, a
// section per file with its title, machine and method, its table, and an
// inline chart of each kind its data call for. The papers' figures are left
// out: some hold no runs (a diagram), and their folder has its own page.
func TestHTMLPage(t *testing.T) {
	sections, files := resultsSections(t)
	var b bytes.Buffer
	if err := report.WriteHTML(&b, "falcon-lab report: test", sections); err != nil {
		t.Fatal(err)
	}
	c := checkPage(t, b.Bytes())
	if len(c.sections) != len(sections) {
		t.Fatalf("%d sections on the page, want %d", len(c.sections), len(sections))
	}
	if strings.Join(c.navLinks, " ") != strings.Join(c.sections, " ") {
		t.Errorf("contents %v, sections %v", c.navLinks, c.sections)
	}
	for i, id := range c.sections {
		checkSection(t, c, id, files[i])
	}
	if c.svgs < 2*len(sections) {
		t.Errorf("%d inline charts for %d sections", c.svgs, len(sections))
	}
	page := b.String()
	// The recorded file's numbers, table and paper claims.
	for _, want := range []string{
		`<td>docker</td><td>vanilla</td><td>tcp</td><td class="r">64 KiB</td>`,
		"<th>Virtualisation</th><td>docker</td>",
		"2 run(s) of 1s each after 500ms warm-up",
		"AMD EPYC",
		"FALCON Fig. 2 (a) (100 Gb/s, 64 KB, TCP): 0.53 × host", // marked on the chart and listed
		"<li>docker/vanilla tcp 64 KiB, 1 flow(s): measured 0.72 ± 1.57 × host/vanilla",
		"tcp: CPU time per core", "latency: latency percentiles (µs)",
		// The replica sweep of the Kubernetes study: lines over replicas.
		"multi-flow-tcp: Gbit/s relative to the baseline, over replicas (client/server container pairs)",
	} {
		if !strings.Contains(page, esc(want)) && !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	if testing.Verbose() {
		os.WriteFile(filepath.Join(t.TempDir(), "index.html"), b.Bytes(), 0o644)
	}
}

// resultsFile is a results file read from path.
type resultsFile struct {
	path string
	f    *schema.File
}

// resultsSections reads the recorded results file and every results file
// in the repository's results/ folders but the papers' figures, a
// section each.
func resultsSections(t *testing.T) ([]report.HTMLSection, []resultsFile) {
	t.Helper()
	paths := []string{recorded}
	more, _ := filepath.Glob("../../results/*/*.json")
	for _, path := range more {
		if filepath.Base(filepath.Dir(path)) != "paper-all-2cpu-vm" {
			paths = append(paths, path)
		}
	}
	var sections []report.HTMLSection
	var files []resultsFile
	for _, path := range paths {
		f, err := schema.ReadFile(path)
		if err != nil {
			// A prediction or validation of falcon-lab sim's, which cmd/falcon-lab's test renders.
			t.Logf("%s: not a results file: %v", path, err)
			continue
		}
		s, err := FileSection(path, f, "")
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		sections = append(sections, s)
		files = append(files, resultsFile{path, f})
	}
	if len(sections) < 2 {
		t.Fatalf("only %d results files", len(sections))
	}
	return sections, files
}

// checkSection checks a file's section: its title, machine and method,
// its table, and a chart of each kind its data call for.
func checkSection(t *testing.T, c pageCheck, id string, rf resultsFile) {
	t.Helper()
	path, f := rf.path, rf.f
	if !strings.Contains(c.titles[id], filepath.Base(path)) {
		t.Errorf("%s: title %q", path, c.titles[id])
	}
	if got := strings.Join(c.facts[id], ","); !strings.Contains(got, "Machine,Kernel,OS,Virtualisation") || !strings.Contains(got, "Runs,Statistics,Placement") {
		t.Errorf("%s: facts %s", path, got)
	}
	if c.tables[id] == 0 {
		t.Errorf("%s: no table", path)
	}
	kinds := strings.Join(c.charts[id], ",")
	want := []string{"cpu"}
	if len(sweepsOf(f)) > 0 {
		want = append(want, "sweep")
	}
	in := swept(f)
	for i, r := range f.Results {
		if r.Summary["lat_p99_us"].N > 0 && !in[i] {
			want = append(want, "latency")
			break
		}
	}
	for _, k := range want {
		if !strings.Contains(kinds, k) {
			t.Errorf("%s: charts %q lack %s", path, kinds, k)
		}
	}
}

// TestHTMLChartKinds: a batch sweep gets MFLOW Fig. 7's chart and its
// Gbit/s over the batch with vanilla as a line across; a size sweep lines
// over size with the papers' ratio marked at its size; the rest bars.
func TestHTMLChartKinds(t *testing.T) {
	var results []schema.Result
	for _, c := range []struct {
		mode string
		ofo  int64
	}{{"vanilla", 5}, {"mflow:batch=256,elephant=0", 40}, {"mflow:batch=16,elephant=0", 900}, {"mflow:batch=64,elephant=0", 300}} {
		r := schema.Result{Layout: "docker", Mode: c.mode, Workload: "tcp", Size: 64 << 10, Flows: 1,
			Runs: []schema.Run{reorderRun(c.ofo, 20000, 1), reorderRun(c.ofo+10, 20000, 1)}}
		r.Summarize()
		results = append(results, r)
	}
	schema.Normalize(results, "docker/vanilla")
	batch := &schema.File{Config: schema.Config{Duration: schema.Duration(2e9), Runs: 2}, Results: results}
	s, err := FileSection("batch.json", batch, "")
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, c := range s.Charts {
		kinds = append(kinds, c.Kind+": "+c.Title)
	}
	got := strings.Join(kinds, "\n")
	for _, want := range []string{"batch: Out-of-order segments against the batch size",
		"sweep: tcp: Gbit/s relative to the baseline, over batch size (packets per micro-flow)",
		"sweep: tcp: Gbit/s over batch size (packets per micro-flow)"} {
		if !strings.Contains(got, want) {
			t.Errorf("batch sweep's charts lack %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "bars:") {
		t.Errorf("a sweep's results drawn as bars too:\n%s", got)
	}

	// A size sweep of UDP on docker against host: FALCON Fig. 2 reports
	// the overlay's UDP rate at 64 KB as 0.47 × host.
	results = nil
	for _, layout := range []string{"host", "docker"} {
		for _, size := range []int{16, 1400, workload.MaxUDPSize} {
			pps := 1e5 * float64(len(layout))
			r := schema.Result{Layout: layout, Mode: "vanilla", Workload: "udp", Size: size, Flows: 1}
			for i := 0; i < 3; i++ {
				r.Runs = append(r.Runs, schema.Run{PPS: pps + float64(i)*1000, Gbps: (pps + float64(i)*1000) * float64(size) * 8 / 1e9, WindowS: 1})
			}
			r.Summarize()
			results = append(results, r)
		}
	}
	schema.Normalize(results, "auto")
	sizes := &schema.File{Config: schema.Config{Duration: schema.Duration(2e9), Runs: 3}, Results: results}
	s, err = FileSection("sizes.json", sizes, "")
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Charts) != 2 || s.Charts[0].Kind != "sweep" || !strings.Contains(s.Charts[0].Title, "over message size") {
		t.Fatalf("size sweep's charts: %+v", s.Charts)
	}
	if svg := s.Charts[0].SVG; !strings.Contains(svg, "FALCON Fig. 2 (a) (100 Gb/s, 64 KB, UDP): 0.47 × host") || !strings.Contains(svg, "a paper&#39;s ratio") {
		t.Errorf("the ratio chart does not mark FALCON Fig. 2's 0.47:\n%s", svg)
	}

	// Two sizes are no sweep: bars, marked alike.
	var two []schema.Result
	for _, r := range results {
		if r.Size != 16 {
			two = append(two, r)
		}
	}
	s, _ = FileSection("two.json", &schema.File{Config: sizes.Config, Results: two}, "")
	if len(s.Charts) != 1 || s.Charts[0].Kind != "bars" || !strings.Contains(s.Charts[0].SVG, "0.47 × host") {
		t.Errorf("two sizes' charts: %+v", s.Charts)
	}
}

// TestTableAsHTML: WriteTable's Markdown of the recorded file as the
// page shows it, every row kept.
func TestTableAsHTML(t *testing.T) {
	f, err := schema.ReadFile(recorded)
	if err != nil {
		t.Fatal(err)
	}
	var md, page bytes.Buffer
	if err := WriteTable(&md, f); err != nil {
		t.Fatal(err)
	}
	if err := report.WriteHTML(&page, "t", []report.HTMLSection{{Title: "t", Body: md.String()}}); err != nil {
		t.Fatal(err)
	}
	rows := 0
	for _, l := range strings.Split(md.String(), "\n") {
		if strings.HasPrefix(l, "|") && !strings.HasPrefix(l, "|---") {
			rows++
		}
	}
	if n := strings.Count(page.String(), "<tr>"); n != rows {
		t.Errorf("%d rows in HTML, %d in the Markdown", n, rows)
	}
}

// Package report renders what the lab measured into one HTML page: sections
// of facts, charts (SVG) and Markdown tables, whoever made them (a results
// file of bench, a prediction of sim).
package report

import (
	"fmt"
	"html"
	"io"
	"path/filepath"
	"regexp"
	"strings"
)

// HTMLSection is one part of the page.
type HTMLSection struct {
	Title    string
	Subtitle string // what the file is: its preset's description
	Source   string // the file it was read from
	// Banner heads the section in red: a prediction's SIMULATED label,
	// an interrupted bench.
	Banner string
	Facts  []Fact // the machine and the method
	Charts []Chart
	// Body is Markdown as WriteTable writes it (tables, "- " lists,
	// paragraphs), shown as HTML; Pre is shown as it is.
	Body, Pre string
}

// Fact is one line of a section's machine-and-method table.
type Fact struct{ Name, Value string }

// Chart is one figure of a section: an <svg> element and its caption.
type Chart struct {
	Kind  string // the ChartKind that drew it
	Title string
	SVG   string
}

// WriteHTML writes one page of the sections: a contents list, then each
// section with its facts, charts and tables.
func WriteHTML(w io.Writer, title string, sections []HTMLSection) error {
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\"/>\n")
	b.WriteString(`<meta name="viewport" content="width=device-width, initial-scale=1"/>` + "\n")
	fmt.Fprintf(&b, "<title>%s</title>\n<style>\n%s</style>\n</head>\n<body>\n", esc(title), pageStyle)
	fmt.Fprintf(&b, "<h1>%s</h1>\n", esc(title))
	b.WriteString("<p class=\"how\">Bars and points are means over the runs with their 95 % confidence intervals as whiskers " +
		"(Student t; for files whose modes took turns, geometric means of each run's ratio to the baseline's run of the same round). " +
		"Ratios are to the baseline each table names (= 1, dashed); for latency below 1 is faster. " +
		"Diamonds edged in red, filled in the colour of the case they stand beside, are the ratios the papers report for the same test, metric and baseline (lab/papers, quoted under each table): " +
		"absolute numbers from their 10–100 Gbit/s testbeds and these are not comparable, ratios are. Hover a bar or point for its numbers.</p>\n")
	ids := map[string]bool{}
	for i := range sections {
		sections[i].Title = strings.TrimSpace(sections[i].Title)
	}
	anchor := make([]string, len(sections))
	b.WriteString("<nav>\n<ol>\n")
	for i, s := range sections {
		id := sectionID(s, i)
		for ids[id] {
			id += "-"
		}
		ids[id] = true
		anchor[i] = id
		fmt.Fprintf(&b, "<li><a href=\"#%s\">%s</a></li>\n", id, esc(s.Title))
	}
	b.WriteString("</ol>\n</nav>\n")
	for i, s := range sections {
		class := "results"
		if s.Banner != "" {
			class += " flagged"
		}
		fmt.Fprintf(&b, "<section id=\"%s\" class=\"%s\">\n<h2>%s</h2>\n", anchor[i], class, esc(s.Title))
		if s.Banner != "" {
			fmt.Fprintf(&b, "<p class=\"banner\">%s</p>\n", esc(s.Banner))
		}
		if s.Subtitle != "" {
			fmt.Fprintf(&b, "<p class=\"subtitle\">%s</p>\n", esc(s.Subtitle))
		}
		if s.Source != "" {
			fmt.Fprintf(&b, "<p class=\"source\">from <code>%s</code></p>\n", esc(s.Source))
		}
		if len(s.Facts) > 0 {
			b.WriteString("<table class=\"facts\">\n")
			for _, f := range s.Facts {
				fmt.Fprintf(&b, "<tr><th>%s</th><td>%s</td></tr>\n", esc(f.Name), esc(f.Value))
			}
			b.WriteString("</table>\n")
		}
		if len(s.Charts) > 0 {
			b.WriteString("<div class=\"charts\">\n")
			for _, c := range s.Charts {
				fmt.Fprintf(&b, "<figure class=\"chart %s\">\n%s<figcaption>%s</figcaption>\n</figure>\n",
					esc(c.Kind), scalableSVG(strings.TrimSpace(c.SVG))+"\n", esc(c.Title))
			}
			b.WriteString("</div>\n")
		}
		if s.Body != "" {
			b.WriteString("<div class=\"body\">\n" + markdownHTML(s.Body) + "</div>\n")
		}
		if s.Pre != "" {
			fmt.Fprintf(&b, "<pre>%s</pre>\n", esc(s.Pre))
		}
		b.WriteString("</section>\n")
	}
	b.WriteString("</body>\n</html>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// pageStyle is the page's only styling: no fonts or sheets from anywhere.
const pageStyle = `body { font-family: sans-serif; margin: 1.5em; color: #222; max-width: 1400px; }
h1 { font-size: 1.5em; }
h2 { font-size: 1.25em; border-bottom: 2px solid #0072B2; padding-bottom: 0.2em; margin-top: 2em; }
.how, .subtitle, .source { color: #444; font-size: 0.9em; }
section.flagged h2 { border-color: #b00; }
.banner { color: #b00; font-weight: bold; border: 2px solid #b00; padding: 0.4em 0.6em; }
table { border-collapse: collapse; font-size: 0.8em; margin: 0.6em 0; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.45em; vertical-align: top; }
th { background: #f0f0f0; }
td.r { text-align: right; white-space: nowrap; }
table.facts th { text-align: left; white-space: nowrap; }
.body { overflow-x: auto; }
.body p, .body li { font-size: 0.85em; }
.body p.failed, .body p.note { color: #8a3b00; }
.charts { display: flex; flex-wrap: wrap; gap: 0.5em 1.5em; align-items: flex-start; }
figure { margin: 0.5em 0; overflow-x: auto; max-width: 100%; }
figure svg { max-width: 100%; height: auto; border: 1px solid #eee; }
figcaption { font-size: 0.85em; color: #444; }
pre { font-size: 0.75em; overflow-x: auto; background: #fafafa; padding: 0.5em; }
`

var svgSize = regexp.MustCompile(`^<svg [^>]*?width="([0-9.]+)" height="([0-9.]+)"`)

// scalableSVG gives an <svg> that has none a viewBox of its size, so the
// page can scale it to its width without cropping.
func scalableSVG(svg string) string {
	open, _, _ := strings.Cut(svg, ">")
	if strings.Contains(open, "viewBox=") {
		return svg
	}
	m := svgSize.FindStringSubmatch(svg)
	if m == nil {
		return svg
	}
	return strings.Replace(svg, "<svg ", fmt.Sprintf(`<svg viewBox="0 0 %s %s" `, m[1], m[2]), 1)
}

var nonID = regexp.MustCompile(`[^a-z0-9]+`)

func sectionID(s HTMLSection, i int) string {
	name := s.Source
	if name == "" {
		name = s.Title
	}
	name = strings.TrimSuffix(filepath.Base(name), filepath.Ext(name))
	id := strings.Trim(nonID.ReplaceAllString(strings.ToLower(name), "-"), "-")
	if id == "" {
		id = "section"
	}
	return fmt.Sprintf("s%d-%s", i+1, id)
}

// markdownHTML renders the Markdown WriteTable writes: pipe tables (the
// second row's colons align the columns), "- " lists and one paragraph a
// line, escaped.
func markdownHTML(md string) string {
	var b strings.Builder
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); {
		l := lines[i]
		switch {
		case strings.TrimSpace(l) == "":
			i++
		case strings.HasPrefix(l, "|"):
			j := i
			for j < len(lines) && strings.HasPrefix(lines[j], "|") {
				j++
			}
			tableHTML(&b, lines[i:j])
			i = j
		case strings.HasPrefix(l, "- "):
			b.WriteString("<ul>\n")
			for ; i < len(lines) && strings.HasPrefix(lines[i], "- "); i++ {
				fmt.Fprintf(&b, "<li>%s</li>\n", esc(lines[i][2:]))
			}
			b.WriteString("</ul>\n")
		default:
			class := ""
			for _, p := range []string{"Note", "Failed"} {
				if strings.HasPrefix(l, p+":") {
					class = ` class="` + strings.ToLower(p) + `"`
				}
			}
			fmt.Fprintf(&b, "<p%s>%s</p>\n", class, esc(l))
			i++
		}
	}
	return b.String()
}

var alignRow = regexp.MustCompile(`^:?-+:?$`)

func tableCells(row string) []string {
	row = strings.TrimSpace(row)
	row = strings.TrimSuffix(strings.TrimPrefix(row, "|"), "|")
	cells := strings.Split(row, "|")
	for i := range cells {
		cells[i] = strings.TrimSpace(cells[i])
	}
	return cells
}

func tableHTML(b *strings.Builder, rows []string) {
	head := tableCells(rows[0])
	body := rows[1:]
	right := make([]bool, len(head))
	if len(body) > 0 {
		cells := tableCells(body[0])
		isAlign := true
		for _, c := range cells {
			isAlign = isAlign && alignRow.MatchString(c)
		}
		if isAlign {
			for i, c := range cells {
				if i < len(right) {
					right[i] = strings.HasSuffix(c, ":")
				}
			}
			body = body[1:]
		}
	}
	b.WriteString("<table>\n<thead><tr>")
	for _, h := range head {
		fmt.Fprintf(b, "<th>%s</th>", esc(h))
	}
	b.WriteString("</tr></thead>\n<tbody>\n")
	for _, r := range body {
		b.WriteString("<tr>")
		for i, c := range tableCells(r) {
			if i < len(right) && right[i] {
				fmt.Fprintf(b, `<td class="r">%s</td>`, esc(c))
			} else {
				fmt.Fprintf(b, "<td>%s</td>", esc(c))
			}
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</tbody>\n</table>\n")
}

func esc(s string) string { return html.EscapeString(s) }

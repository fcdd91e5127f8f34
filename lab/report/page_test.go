package report

import (
	"testing"
)

// TestMarkdownHTML: WriteTable's Markdown as HTML, every row and cell
// kept, the columns aligned as the Markdown says.
func TestMarkdownHTML(t *testing.T) {
	got := markdownHTML("| a | b |\n|---|---:|\n| x < y | 1 |\n| z | 2 |\n\nIntro:\n\n- one & two\n- three\nNote: careful\n")
	want := "<table>\n<thead><tr><th>a</th><th>b</th></tr></thead>\n<tbody>\n" +
		"<tr><td>x &lt; y</td><td class=\"r\">1</td></tr>\n<tr><td>z</td><td class=\"r\">2</td></tr>\n</tbody>\n</table>\n" +
		"<p>Intro:</p>\n<ul>\n<li>one &amp; two</li>\n<li>three</li>\n</ul>\n<p class=\"note\">Note: careful</p>\n"
	if got != want {
		t.Errorf("got\n%s\nwant\n%s", got, want)
	}
}

// TestScalableSVG: an <svg> without a viewBox (falcon-lab sim's) gets one of
// its size; one with a viewBox is left alone.
func TestScalableSVG(t *testing.T) {
	if got := scalableSVG(`<svg xmlns="http://www.w3.org/2000/svg" width="880" height="940" font-size="11">`); got != `<svg viewBox="0 0 880 940" xmlns="http://www.w3.org/2000/svg" width="880" height="940" font-size="11">` {
		t.Errorf("got %s", got)
	}
	in := `<svg xmlns="http://www.w3.org/2000/svg" width="640" height="428" viewBox="0 0 640 428">`
	if got := scalableSVG(in); got != in {
		t.Errorf("got %s", got)
	}
}

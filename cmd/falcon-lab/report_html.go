package main

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/falconnet/falcon/internal/cli"
	"github.com/falconnet/falcon/internal/fileutil"
	"github.com/falconnet/falcon/lab/report"
)

// checkHTMLDir refuses a --html DIR that cannot become the page's
// directory before any file is read ("" is no page).
func checkHTMLDir(dir string) error {
	if dir == "" {
		return nil
	}
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		return cli.Usagef("--html %s: not a directory", dir)
	}
	return nil
}

// writeReportPage writes the sections as DIR/index.html, the whole page or
// nothing, and says where.
func writeReportPage(dir string, files []string, sections []report.HTMLSection) error {
	title := "falcon-lab report: " + strings.Join(baseNames(files), ", ")
	if len(files) > 3 {
		title = fmt.Sprintf("falcon-lab report: %d files", len(files))
	}
	var buf bytes.Buffer
	if err := report.WriteHTML(&buf, title, sections); err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	path := filepath.Join(dir, "index.html")
	if err := fileutil.WriteAtomic(path, buf.Bytes(), 0o644); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "falcon-lab report: page in %s\n", path)
	return nil
}

func baseNames(files []string) []string {
	var out []string
	for _, f := range files {
		out = append(out, filepath.Base(f))
	}
	return out
}

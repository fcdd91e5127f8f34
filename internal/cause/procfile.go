package cause

import (
	"errors"
	"io"
	"os"
)

// procFile reads a /proc file again and again through one descriptor:
// opening it each turn cost more than generating it. A file opened inside
// a network namespace (/proc/thread-self/net/...) keeps showing that
// namespace's counters, so the caller enters it only to open.
type procFile struct {
	f   *os.File
	buf []byte
}

func openProc(path string) (*procFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	return &procFile{f: f, buf: make([]byte, 16<<10)}, nil
}

// read returns the file's contents, valid until the next read.
func (p *procFile) read() ([]byte, error) {
	for {
		n, err := p.f.ReadAt(p.buf, 0)
		if err != nil && !errors.Is(err, io.EOF) {
			return nil, err
		}
		if n < len(p.buf) {
			return p.buf[:n], nil
		}
		p.buf = make([]byte, 2*len(p.buf)) // it may not have fit
	}
}

func (p *procFile) close() error { return p.f.Close() }

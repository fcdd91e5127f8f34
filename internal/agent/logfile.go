package agent

import (
	"io"
	"os"
	"path/filepath"
	"sync"

	"golang.org/x/sys/unix"
)

// LogLimit bounds the log of an agent that enable started, which lives in
// its state directory on /run, a tmpfs (memory): at this size agent.log
// moves to agent.log.1, replacing the one before, and a new one starts, so
// an agent that runs for months holds at most twice this much. An agent
// that logs elsewhere (a terminal, the journal, a pod's log) leaves
// bounding to whoever reads it.
var LogLimit int64 = 8 << 20

// LogWriter is where the agent of opts writes its log lines: stderr,
// rotated at LogLimit when stderr is the log in its state directory.
func LogWriter(opts Options) io.Writer { return logWriter(opts, os.Stderr) }

func logWriter(opts Options, out *os.File) io.Writer {
	dir, err := StateDir(opts)
	if err != nil {
		return out
	}
	path := filepath.Join(dir, LogFile)
	var open, named unix.Stat_t
	if unix.Fstat(int(out.Fd()), &open) != nil || unix.Stat(path, &named) != nil || open.Dev != named.Dev || open.Ino != named.Ino {
		return out
	}
	return &rotatingLog{out: out, path: path, size: open.Size}
}

type rotatingLog struct {
	mu   sync.Mutex
	out  *os.File
	path string
	size int64
}

func (w *rotatingLog) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.size > 0 && w.size+int64(len(b)) > LogLimit {
		w.rotate()
	}
	n, err := w.out.Write(b)
	w.size += int64(n)
	return n, err
}

// rotate moves the log aside and points the agent's descriptor at a new
// one (dup3), so that whatever else writes there follows: a panic's trace,
// the runtime's own messages.
func (w *rotatingLog) rotate() {
	w.size = 0 // whatever fails below, not again at the next line
	if os.Rename(w.path, w.path+".1") != nil {
		return
	}
	f, err := os.OpenFile(w.path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	unix.Dup3(int(f.Fd()), int(w.out.Fd()), 0)
}

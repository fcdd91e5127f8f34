package top

import (
	"errors"
	"fmt"
	"io"
	"time"

	tea "github.com/charmbracelet/bubbletea"
	"github.com/charmbracelet/lipgloss"

	"github.com/falconnet/falcon/internal/agent"
	"github.com/falconnet/falcon/internal/netns"
)

// Options of falcon top.
type Options struct {
	Agent    agent.Options // Netns (and the roots tests move) name the agent watched
	Interval time.Duration // between frames
}

// read takes one sample, and refuses a namespace with nothing live to
// watch: no agent, or a mode that only set values.
func read(o Options) (*Sample, error) {
	r, err := agent.Status(o.Agent)
	if err != nil {
		return nil, err
	}
	ns := netns.Label(o.Agent.Netns)
	switch {
	case !r.Enabled:
		return nil, fmt.Errorf("falcon is not enabled in network namespace %s: no agent to watch ('falcon enable%s' starts one)",
			ns, agent.NetnsFlag(o.Agent.Netns))
	case r.Static:
		return nil, fmt.Errorf("mode %s in network namespace %s only set values: no agent runs, nothing changes to watch ('falcon status' lists them)",
			r.Mode, ns)
	case !r.Running:
		return nil, errors.New(r.Problem)
	}
	return &Sample{Report: r, At: time.Now()}, nil
}

// Once writes one plain frame, with rates over one interval, for scripts.
func Once(w io.Writer, o Options, width int) error {
	a, err := read(o)
	if err != nil {
		return err
	}
	time.Sleep(o.Interval)
	b, err := read(o)
	if err != nil {
		return err
	}
	_, err = io.WriteString(w, Render(a, b, width, Style{}))
	return err
}

// Run shows a frame every interval until q, Esc or Ctrl-C. It refuses to
// start when there is nothing to watch.
func Run(o Options) error {
	s, err := read(o)
	if err != nil {
		return err
	}
	m := &model{o: o, cur: s, width: 100, style: colours()}
	_, err = tea.NewProgram(m, tea.WithAltScreen()).Run()
	return err
}

func colours() Style {
	fg := func(c string) func(string) string {
		st := lipgloss.NewStyle().Foreground(lipgloss.Color(c))
		return func(s string) string { return st.Render(s) }
	}
	bold := lipgloss.NewStyle().Bold(true)
	return Style{Title: func(s string) string { return bold.Render(s) }, Busy: fg("9"), Room: fg("10"), Warn: fg("11"), Dim: fg("8")}
}

type model struct {
	o         Options
	prev, cur *Sample
	err       error // the last read's, shown until one succeeds
	width     int
	style     Style
}

type tick struct{}

type sampled struct {
	s   *Sample
	err error
}

func (m *model) Init() tea.Cmd { return m.next() }

func (m *model) next() tea.Cmd {
	return tea.Tick(m.o.Interval, func(time.Time) tea.Msg { return tick{} })
}

func (m *model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.KeyMsg:
		switch msg.String() {
		case "q", "esc", "ctrl+c":
			return m, tea.Quit
		}
	case tea.WindowSizeMsg:
		m.width = msg.Width
	case tick:
		// Read off the UI's goroutine: a key press is never kept waiting
		// on the BPF maps.
		return m, func() tea.Msg {
			s, err := read(m.o)
			return sampled{s, err}
		}
	case sampled:
		m.err = msg.err
		if msg.err == nil {
			m.prev, m.cur = m.cur, msg.s
		}
		return m, m.next()
	}
	return m, nil
}

func (m *model) View() string {
	v := Render(m.prev, m.cur, m.width, m.style)
	if m.err != nil {
		v += m.style.Warn("\n" + m.err.Error() + " (showing the last frame)\n")
	}
	return v
}

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/falconnet/falcon/internal/cli"
	"github.com/falconnet/falcon/lab/stagetrace"
)

func init() {
	app.Register(cli.Command{Name: "trace", Summary: "show on which CPU each device stage of each flow runs", Run: runTrace})
}

const traceSynopsis = `[--duration 5s] [--netns NS,...] [--proto tcp|udp|all] [--ports LO[-HI]] [--vxlan-ports P,...] [--seq NS/DEV,... [--paths]] [--flows N] [--json]`

// traceOut is where the trace command prints; tests replace it.
var traceOut io.Writer = os.Stdout

type traceArgs struct {
	opts     stagetrace.Options
	duration time.Duration
	flows    int
	json     bool
}

func parseTraceArgs(args []string) (traceArgs, error) {
	var a traceArgs
	fs := app.FlagSet("trace", traceSynopsis)
	fs.DurationVar(&a.duration, "duration", 5*time.Second, "how long to count (Ctrl-C stops early)")
	nsList := fs.String("netns", "", "count only in these network namespaces (names in /run/netns or paths, comma-separated)")
	proto := fs.String("proto", "all", "count only tcp, udp, or all")
	ports := fs.String("ports", "", "count only flows with a source or destination port in LO-HI (or one port)")
	vxlan := fs.String("vxlan-ports", formatPorts(stagetrace.DefaultVXLANPorts), "UDP ports that carry VXLAN, whose inner flow is counted")
	seq := fs.String("seq", "", "NS/DEV,...: check each flow's order at these devices: sequenced UDP (lab/seqcheck senders) by its numbers, TCP over IPv4 (any sender) by the IP ID, which numbers segments in the order sent, retransmissions included")
	fs.BoolVar(&a.opts.SeqPaths, "paths", false, "with --seq, for TCP over IPv4: record each segment's way through the devices (CPU, time, skb hash, XDP metadata, outer UDP port and TOS), shown for each flow's first reordered segment and the one before it")
	tp := fs.String("tracepoint", "netif_receive_skb", "net: tracepoint to count at ("+strings.Join(stagetrace.Tracepoints, ", ")+")")
	fs.IntVar(&a.flows, "flows", 20, "list the N busiest flows (0: all)")
	fs.BoolVar(&a.json, "json", false, "print JSON")
	if err := cli.ParseFlags(fs, args); err != nil {
		return a, err
	}
	if a.duration <= 0 {
		return a, cli.Usagef("--duration must be positive, not %s", a.duration)
	}
	if a.flows < 0 {
		return a, cli.Usagef("--flows must be 0 or more, not %d", a.flows)
	}
	o := &a.opts
	o.Tracepoint = *tp
	if *nsList != "" {
		o.Netns = strings.Split(*nsList, ",")
	}
	var err error
	if o.Proto, err = stagetrace.ParseProto(*proto); err != nil {
		return a, cli.Usagef("--proto %v", err)
	}
	if *ports != "" {
		if o.PortMin, o.PortMax, err = stagetrace.ParsePortRange(*ports); err != nil {
			return a, cli.Usagef("--ports %v", err)
		}
	}
	if o.VXLANPorts, err = stagetrace.ParsePorts(*vxlan); err != nil {
		return a, cli.Usagef("--vxlan-ports: %v", err)
	}
	if *seq != "" {
		for _, s := range strings.Split(*seq, ",") {
			d, err := stagetrace.ParseDevice(s)
			if err != nil {
				return a, cli.Usagef("--seq %v", err)
			}
			o.Seq = append(o.Seq, d)
		}
	}
	if o.SeqPaths && len(o.Seq) == 0 {
		return a, cli.Usagef("--paths records the ways of the segments --seq checks: name the devices with --seq")
	}
	return a, nil
}

func runTrace(args []string) error {
	a, err := parseTraceArgs(args)
	if err != nil {
		return err
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("needs root to load BPF programs")
	}
	tr, err := stagetrace.Start(a.opts)
	if err != nil {
		return err
	}
	defer tr.Close()
	if !a.json {
		fmt.Fprintf(os.Stderr, "counting at %s for %s (Ctrl-C stops early)\n", tr.Hook(), a.duration)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	start := time.Now()
	select {
	case <-ctx.Done():
	case <-time.After(a.duration):
	}
	rep, err := tr.Report(time.Since(start), a.flows)
	if err != nil {
		return err
	}
	if a.json {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(traceOut, "%s\n", b)
		return err
	}
	rep.WriteText(traceOut)
	return nil
}

func formatPorts(ps []uint16) string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = strconv.Itoa(int(p))
	}
	return strings.Join(out, ",")
}

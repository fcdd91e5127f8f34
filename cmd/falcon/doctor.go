package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"

	"github.com/falconnet/falcon/internal/cli"
	"github.com/falconnet/falcon/internal/doctor"
)

// doctor exits 0 when nothing needs attention, 1 when warn or error
// findings are left (after --fix, the ones it could not fix), 1 with a
// message for failures (no such namespace, no overlay), 2 for bad flags.
func init() {
	app.Register(cli.Command{Name: "doctor", Summary: "check the overlay for known misconfigurations (--fix repairs the safe ones)", Run: runDoctor})
}

// doctorOut is where the report goes; tests capture it.
var doctorOut io.Writer = os.Stdout

func runDoctor(args []string) error {
	fs := app.FlagSet("doctor", "[--netns HOSTNS] [--json] [--fix]")
	ns := fs.String("netns", "", "host network namespace whose overlay to check (name under /run/netns or a path; default: the current one)")
	asJSON := fs.Bool("json", false, "print the report as JSON")
	fix := fs.Bool("fix", false, "apply the safe fixes and report what changed")
	fs.Usage = func() {
		fmt.Fprintf(fs.Output(), "usage: falcon doctor [--netns HOSTNS] [--json] [--fix]\n\n"+
			"Shows the overlay found in HOSTNS and checks it. Exit status: 0 no warn/error findings left,\n"+
			"1 warn/error findings left (or the check failed), 2 bad flags.\n\n")
		fs.PrintDefaults()
	}
	if err := cli.ParseFlags(fs, args); err != nil {
		return err
	}
	r, err := doctor.Run(doctor.Options{Netns: *ns, Fix: *fix})
	if err != nil {
		return err
	}
	if *asJSON {
		enc := json.NewEncoder(doctorOut)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return err
		}
	} else if err := r.WriteText(doctorOut); err != nil {
		return err
	}
	if n := r.Problems(); n > 0 {
		return fmt.Errorf("%d problem(s) need attention", n)
	}
	return nil
}

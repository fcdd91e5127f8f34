package main

import (
	"fmt"
	"runtime/debug"
)

// version is set at link time by the Makefile. A binary built without it
// (go build, go install) names the commit the go command stamped into it,
// so that a results file never records a bare "dev".
var version = "dev"

func init() {
	if version == "dev" {
		version = stampedVersion()
	}
	register(command{name: "version", summary: "print the version", run: func([]string) error {
		fmt.Println("falcon", version)
		return nil
	}})
}

// stampedVersion is the VCS revision in the binary's build information,
// short, with "-dirty" for a modified tree; "dev" when there is none (go
// run and go test do not stamp it).
func stampedVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	var rev, dirty string
	for _, s := range bi.Settings {
		switch {
		case s.Key == "vcs.revision":
			rev = s.Value
		case s.Key == "vcs.modified" && s.Value == "true":
			dirty = "-dirty"
		}
	}
	if len(rev) < 7 {
		return "dev"
	}
	return rev[:7] + dirty
}

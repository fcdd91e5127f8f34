package main

import "fmt"

// version is set at link time by the Makefile.
var version = "dev"

func init() {
	register(command{name: "version", summary: "print the version", run: func([]string) error {
		fmt.Println("falcon", version)
		return nil
	}})
}

//go:build ignore

// xdp-pass attaches an XDP program that passes every packet (native mode)
// to DEV in network namespace NETNS until it gets SIGINT or SIGTERM: the
// price of XDP alone on a NIC, the floor under any XDP decapsulation.
// usage: go run xdp-pass.go NETNS DEV   (as root, from the repository)
package main

import (
	"fmt"
	"net"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"
	"github.com/vishvananda/netns"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: xdp-pass NETNS DEV")
		os.Exit(2)
	}
	runtime.LockOSThread() // the namespace is the thread's
	ns, err := netns.GetFromName(os.Args[1])
	check(err)
	check(netns.Set(ns))
	ifc, err := net.InterfaceByName(os.Args[2])
	check(err)
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{Type: ebpf.XDP, License: "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 2 /* XDP_PASS */), asm.Return()}})
	check(err)
	l, err := link.AttachXDP(link.XDPOptions{Program: prog, Interface: ifc.Index, Flags: link.XDPDriverMode})
	check(err)
	fmt.Println("attached")
	c := make(chan os.Signal, 1)
	signal.Notify(c, os.Interrupt, syscall.SIGTERM)
	<-c
	l.Close()
}

func check(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "xdp-pass:", err)
		os.Exit(1)
	}
}

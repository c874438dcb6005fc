// Command pause is the sandbox ("pause") container of the local cluster's real node: it holds a
// pod's namespaces open, reaps the children it inherits, and exits 0 on SIGINT or SIGTERM. The
// public image (registry.k8s.io/pause) cannot be pulled here, so cluster/real-node builds this one.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	signals := make(chan os.Signal, 8)
	signal.Notify(signals, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for sig := range signals {
		if sig != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			var status syscall.WaitStatus
			pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}

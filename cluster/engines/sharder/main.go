// The Kubernetes controller sharder (github.com/timebertt/kubernetes-controller-sharding,
// cmd/sharder) with one flag added for the local cluster: --webhook-port.
//
// Upstream's SharderConfig has no field for the webhook server's port or host: cmd/sharder/app
// creates controller-runtime's webhook server with only its certificate settings, so it always
// listens on port 9443 of every interface (controller-runtime's webhook.DefaultPort). Two local
// clusters with a sharder each need two ports; the flag sets that package variable before the
// server is created, which is all it changes. Everything else is upstream's main.go as it is.
//
// cluster/build-sharder.sh places this file in a copy of the sharder's source
// (cmd/sharder-local/main.go) and builds it there, with upstream's go.mod and go.sum.
package main

import (
	"fmt"
	"os"

	"sigs.k8s.io/controller-runtime/pkg/manager/signals"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/timebertt/kubernetes-controller-sharding/cmd/sharder/app"
)

func main() {
	cmd := app.NewCommand()
	cmd.Flags().IntVar(&webhook.DefaultPort, "webhook-port", webhook.DefaultPort,
		"Port of the webhook server (it listens on every interface; upstream's config has no setting for it).")
	if err := cmd.ExecuteContext(signals.SetupSignalHandler()); err != nil {
		fmt.Println(err)
		os.Exit(1)
	}
}

// CoreDNS for the local cluster's real node (cluster/build-engine.sh coredns): upstream's coremain with
// only the plugins the cluster's Corefile (cluster/manifests/cluster-dns.yaml) uses, in upstream's
// order. Guarantees: no plugin that sends queries elsewhere (forward, grpc, etcd, cloud zones) is
// in the binary, so no Corefile can make it resolve a name off this machine; `-plugins` lists
// what is in.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
	_ "github.com/coredns/coredns/plugin/template"
)

// The order in which a query passes the plugins: a subsequence of upstream's
// core/dnsserver/zdirectives.go ("prometheus" is the metrics plugin's directive).
func init() {
	dnsserver.Directives = []string{
		"reload",
		"ready",
		"health",
		"prometheus",
		"errors",
		"loadbalance",
		"cache",
		"template",
		"kubernetes",
	}
}

func main() {
	coremain.Run()
}

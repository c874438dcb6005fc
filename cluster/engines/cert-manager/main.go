// The cert-manager controller for the local cluster (cluster/engines/build.sh cert-manager): upstream's
// controllers from github.com/cert-manager/cert-manager's pkg/, run against one API server the way
// upstream's controller binary runs them. Upstream's binary is a module of its own
// (github.com/cert-manager/cert-manager/controller-binary) that the module proxy this project builds
// from does not serve; its `app` package only wires the controllers below to a ContextFactory, which
// this file does, with the settings a one-process test cluster needs as flags.
//
// Guarantees:
//   - The controllers in the binary are those that issue Certificates from CA and SelfSigned
//     Issuers and ClusterIssuers: the Certificate controllers (trigger, key manager, request manager,
//     issuing, readiness, revision manager), the CertificateRequest approver and the CA and
//     SelfSigned CertificateRequest issuers, and the Issuer and ClusterIssuer controllers (with the
//     CA and SelfSigned issuer types). No ACME, Vault or Venafi issuer, no ingress or Gateway shim,
//     no CertificateSigningRequest controllers; every controller in the binary runs.
//   - One process per cluster: no leader election.
//   - Logs go to stderr (klog); -v sets the verbosity.
//   - --health-address serves /readyz: "ok" once every controller runs and the informer caches
//     have synced, 503 before. --version prints the version stamped at build time
//     (github.com/cert-manager/cert-manager/pkg/util.AppVersion) and exits.
//   - SIGINT/SIGTERM stop the controllers and the process exits 0; a controller that fails makes
//     it exit 1 with the error logged.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"k8s.io/klog/v2"

	"github.com/cert-manager/cert-manager/pkg/controller"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"

	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/approver"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/ca"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificaterequests/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/issuing"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/keymanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/readiness"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/requestmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/revisionmanager"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "the kubeconfig of the cluster")
	clusterResourceNamespace := flag.String("cluster-resource-namespace", "cert-manager",
		"the namespace of the Secrets that ClusterIssuers refer to (a ClusterIssuer's CA key pair)")
	healthAddress := flag.String("health-address", "127.0.0.1:9403", "where /readyz is served")
	workers := flag.Int("workers", 5, "concurrent workers per controller")
	version := flag.Bool("version", false, "print the version and exit")
	var klogFlags flag.FlagSet
	klog.InitFlags(&klogFlags)
	flag.Var(klogFlags.Lookup("v").Value, "v", "log verbosity: 2 what each controller does, 4 debugging (cert-manager's levels)")
	logf.InitLogs()
	flag.Parse()
	if *version {
		fmt.Printf("cert-manager controller %s\n", util.VersionInfo().GitVersion)
		return
	}
	defer logf.FlushLogs()

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, logf.Log, "controller")
	if err := run(ctx, *kubeconfig, *clusterResourceNamespace, *healthAddress, *workers); err != nil {
		logf.Log.Error(err, "cert-manager controller failed")
		logf.FlushLogs()
		os.Exit(1)
	}
}

func run(rootCtx context.Context, kubeconfig, clusterResourceNamespace, healthAddress string, workers int) error {
	log := logf.FromContext(rootCtx)
	log.Info("starting cert-manager controller", "version", util.VersionInfo().GitVersion)

	var ready atomic.Bool
	listener, err := (&net.ListenConfig{}).Listen(rootCtx, "tcp", healthAddress)
	if err != nil {
		return fmt.Errorf("listening on %s: %w", healthAddress, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if !ready.Load() {
			http.Error(w, "informer caches not synced yet", http.StatusServiceUnavailable)
			return
		}
		_, _ = w.Write([]byte("ok"))
	})
	health := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}

	factory, err := controller.NewContextFactory(rootCtx, controller.ContextOptions{
		Kubeconfig:    kubeconfig,
		IssuerOptions: controller.IssuerOptions{ClusterResourceNamespace: clusterResourceNamespace},
		// Upstream's defaults (internal/apis/config/controller/v1alpha1): back off 1h after a failed
		// request, doubling up to 32h.
		CertificateOptions: controller.CertificateOptions{
			CertificateRequestMinimumBackoffDuration: time.Hour,
			CertificateRequestMaximumBackoffDuration: 32 * time.Hour,
		},
	})
	if err != nil {
		return err
	}
	base, err := factory.Build()
	if err != nil {
		return err
	}

	g, ctx := errgroup.WithContext(rootCtx)
	g.Go(func() error {
		if err := health.Serve(listener); !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-ctx.Done()
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return health.Shutdown(shutdown) //nolint:contextcheck // the root context is done
	})

	names := make([]string, 0, len(controller.Known()))
	for name := range controller.Known() {
		names = append(names, name)
	}
	sort.Strings(names)
	log.Info("controllers", "names", names)
	for _, name := range names {
		c, err := controller.Known()[name](factory)
		if err != nil {
			return fmt.Errorf("controller %s: %w", name, err)
		}
		g.Go(func() error { return c.Run(workers, ctx) })
	}

	base.SharedInformerFactory.Start(ctx.Done())
	base.KubeSharedInformerFactory.Start(ctx.Done())
	base.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	g.Go(func() error {
		for informer, synced := range base.SharedInformerFactory.WaitForCacheSync(ctx.Done()) {
			if !synced {
				return fmt.Errorf("the cache of %v did not sync", informer)
			}
		}
		for informer, synced := range base.KubeSharedInformerFactory.WaitForCacheSync(ctx.Done()) {
			if !synced {
				return fmt.Errorf("the cache of %s did not sync", informer)
			}
		}
		ready.Store(true)
		log.Info("ready: informer caches synced")
		return nil
	})

	err = g.Wait()
	base.HTTP01ResourceMetadataInformersFactory.Shutdown()
	base.KubeSharedInformerFactory.Shutdown()
	base.SharedInformerFactory.Shutdown()
	if err != nil && rootCtx.Err() == nil {
		return err
	}
	log.Info("stopped")
	return nil
}

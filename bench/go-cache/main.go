// iot-cache-go: the IoT operator's watches, cache and work queue written as an operator-sdk Go
// user writes them (controller-runtime, typed objects), without its writes. It measures what a Go
// operator of the same design holds before it does any work of its own: the bench runs it beside
// the IoT operator (`npm run bench -- scale --companion-cmd "<binary> -lean-pods
// -health-probe-bind-address {healthAddress}"`, bench/README.md) and reports both processes'
// peak RSS and CPU over the same burst.
//
// Guarantees: it only reads (list, watch, and gets from its cache); /readyz answers 200 once every
// informer has synced; /metrics serves controller-runtime's metrics; it caches what the IoT
// operator caches — IoTServices of the landscape namespace; of the landscape's labelled children,
// Namespaces, NetworkPolicies, ResourceQuotas, LimitRanges, Services, StatefulSets, Deployments
// and Pods whole, ConfigMaps and Secrets as metadata only — with managedFields stripped
// (controller-runtime's TransformStripManagedFields), and with -lean-pods keeps of a pod only what
// the IoT operator's status reads (see leanPod). Each child event queues its instance, as in the
// IoT operator; a reconcile reads the instance and its workloads and pods from the cache.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net/http"
	"os"
	"sync/atomic"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"go.uber.org/zap/zapcore"
)

const (
	managedByLabel = "app.kubernetes.io/managed-by"
	managedByValue = "iot-operator"
	landscapeLabel = "cp.iotservices.io/landscape"
	instanceLabel  = "cp.iotservices.io/instance"
)

var iotServiceGVK = schema.GroupVersionKind{Group: "cp.iotservices.io", Version: "v1alpha1", Kind: "IoTService"}

func main() {
	landscape := flag.String("landscape", os.Getenv("OPERATOR_NAME"), "the landscape (namespace of its IoTServices)")
	healthAddress := flag.String("health-probe-bind-address", "0", "where /readyz is served: ready once every cache has synced")
	metricsAddress := flag.String("metrics-bind-address", "0", "where /metrics is served")
	workers := flag.Int("max-concurrent-reconciles", 4, "instances reconciled in parallel")
	leanPods := flag.Bool("lean-pods", false, "keep of a pod only what the IoT operator's status reads")
	flag.Parse()
	ctrl.SetLogger(zap.New(zap.Level(zapcore.ErrorLevel)))
	if *landscape == "" {
		fmt.Fprintln(os.Stderr, "the landscape is required (-landscape or OPERATOR_NAME)")
		os.Exit(2)
	}

	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		panic(err)
	}
	children := labels.SelectorFromSet(labels.Set{managedByLabel: managedByValue, landscapeLabel: *landscape})
	podOptions := cache.ByObject{}
	if *leanPods {
		podOptions.Transform = leanPod
	}
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{
		Scheme:                 scheme,
		Metrics:                metricsserver.Options{BindAddress: *metricsAddress},
		HealthProbeBindAddress: *healthAddress,
		Cache: cache.Options{
			DefaultLabelSelector: children,
			DefaultTransform:     cache.TransformStripManagedFields(),
			ByObject: map[client.Object]cache.ByObject{
				newIoTService(): {Namespaces: map[string]cache.Config{*landscape: {}}, Label: labels.Everything()},
				&corev1.Pod{}:   podOptions,
			},
		},
	})
	if err != nil {
		panic(err)
	}
	var synced atomic.Bool
	if err := mgr.AddReadyzCheck("caches", func(*http.Request) error {
		if !synced.Load() {
			return errors.New("caches not synced")
		}
		return nil
	}); err != nil {
		panic(err)
	}

	toInstance := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, obj client.Object) []reconcile.Request {
		id := obj.GetLabels()[instanceLabel]
		if id == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: *landscape, Name: id}}}
	})
	b := ctrl.NewControllerManagedBy(mgr).Named("iotservice").For(newIoTService()).
		WithOptions(controller.Options{MaxConcurrentReconciles: *workers})
	watched := []client.Object{&corev1.Namespace{}, &networkingv1.NetworkPolicy{}, &corev1.ResourceQuota{}, &corev1.LimitRange{},
		&corev1.Service{}, &appsv1.StatefulSet{}, &appsv1.Deployment{}, &corev1.Pod{}}
	for _, obj := range watched {
		b = b.Watches(obj, toInstance)
	}
	for _, obj := range []client.Object{&corev1.ConfigMap{}, &corev1.Secret{}} {
		b = b.Watches(obj, toInstance, builder.OnlyMetadata)
	}
	if err := b.Complete(&reader{cache: mgr.GetCache(), landscape: *landscape}); err != nil {
		panic(err)
	}
	// The informers are made now, so that the cache's sync below waits for every one of them.
	ctx := ctrl.SetupSignalHandler()
	for _, obj := range append(watched, newIoTService(), metadataOnly(corev1.SchemeGroupVersion.WithKind("ConfigMap")), metadataOnly(corev1.SchemeGroupVersion.WithKind("Secret"))) {
		if _, err := mgr.GetCache().GetInformer(ctx, obj); err != nil {
			panic(err)
		}
	}
	if err := mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		synced.Store(mgr.GetCache().WaitForCacheSync(ctx))
		<-ctx.Done()
		return nil
	})); err != nil {
		panic(err)
	}
	if err := mgr.Start(ctx); err != nil {
		panic(err)
	}
}

func metadataOnly(gvk schema.GroupVersionKind) *metav1.PartialObjectMetadata {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	return m
}

func newIoTService() *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(iotServiceGVK)
	return u
}

// reader reads what the IoT operator's reconcile reads to compute a status, and writes nothing.
type reader struct {
	cache     client.Reader
	landscape string
}

func (r *reader) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	iot := newIoTService()
	if err := r.cache.Get(ctx, req.NamespacedName, iot); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	in := []client.ListOption{client.InNamespace(r.landscape + "-" + req.Name), client.MatchingLabels{instanceLabel: req.Name}}
	if err := r.cache.List(ctx, &appsv1.DeploymentList{}, in...); err != nil {
		return reconcile.Result{}, err
	}
	if err := r.cache.List(ctx, &appsv1.StatefulSetList{}, in...); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, r.cache.List(ctx, &corev1.PodList{}, in...)
}

// leanPod keeps a pod's identity, its instance labels and its status's phase, conditions and
// container states: what the IoT operator's status computation reads of a pod.
func leanPod(obj interface{}) (interface{}, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil
	}
	kept := map[string]string{}
	for _, label := range []string{managedByLabel, landscapeLabel, instanceLabel} {
		if value, found := pod.Labels[label]; found {
			kept[label] = value
		}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID, ResourceVersion: pod.ResourceVersion,
			CreationTimestamp: pod.CreationTimestamp, DeletionTimestamp: pod.DeletionTimestamp, Labels: kept},
		Status: corev1.PodStatus{Phase: pod.Status.Phase, Conditions: pod.Status.Conditions, ContainerStatuses: pod.Status.ContainerStatuses,
			InitContainerStatuses: pod.Status.InitContainerStatuses},
	}, nil
}

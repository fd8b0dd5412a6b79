package kubetest

import (
	"fmt"
	"sync"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/dynamic"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/prequalbench/prequalbench/manifests/gatewayapi"
)

// gatewayAPI installs the CRDs once per control plane.
type gatewayAPI struct {
	once sync.Once
	err  error
}

// GatewayAPI installs the Gateway API's standard CRDs (the embedded copy
// `cluster up` applies) into the control plane, once, waits until the
// kube-apiserver serves them, and returns a dynamic client.
func (e *Env) GatewayAPI(t testing.TB) dynamic.Interface {
	t.Helper()
	e.gw.once.Do(func() { e.gw.err = installGatewayAPI(e) })
	if e.gw.err != nil {
		t.Fatal(e.gw.err)
	}
	dyn, err := dynamic.NewForConfig(e.Config)
	if err != nil {
		t.Fatal(err)
	}
	return dyn
}

func installGatewayAPI(e *Env) error {
	objs, err := gatewayapi.CRDs()
	if err != nil {
		return fmt.Errorf("kubetest: gateway api: %w", err)
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, o := range objs {
		var crd apiextensionsv1.CustomResourceDefinition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &crd); err != nil {
			return fmt.Errorf("kubetest: gateway api CRD %s: %w", o.GetName(), err)
		}
		crds = append(crds, &crd)
	}
	if _, err := envtest.InstallCRDs(e.Config, envtest.CRDInstallOptions{CRDs: crds}); err != nil {
		return fmt.Errorf("kubetest: install gateway api CRDs: %w", err)
	}
	return nil
}

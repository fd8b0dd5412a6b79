package kube

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prequalbench/prequalbench/artifacts"
	"github.com/prequalbench/prequalbench/internal/kubetest"
	authorizationv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"
	k8stesting "k8s.io/client-go/testing"
)

// withGenerators is an Env whose load would come from 3 generator Jobs,
// checking its access through k.
func withGenerators(k kubernetes.Interface, ns string) *WithGenerators {
	e := &Env{ns: ns, proxies: []string{"http://127.0.0.1:31080"}, via: "kind's proxy NodePort"}
	return &WithGenerators{Env: e, Gen: &Generators{Kube: k, Namespace: ns, Count: 3, ProxyURL: "http://prequal-ingress.prequalbench-system.svc:8080"}}
}

// Where the client may not create Jobs (or read the pods' logs) the load
// falls back to this machine: the runner's engine carries it
// (DrivesLoad false), and the facts say which path was used and why.
// Where it may, the facts name the generators and the Service URL.
func TestGenerators_FallBackWhenJobsForbidden(t *testing.T) {
	k := fake.NewClientset()
	forbid := map[string]bool{"create jobs": true}
	var asked []string
	k.PrependReactor("create", "selfsubjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authorizationv1.SelfSubjectAccessReview)
		ra := r.Spec.ResourceAttributes
		what := ra.Verb + " " + ra.Resource
		if ra.Subresource != "" {
			what += "/" + ra.Subresource
		}
		asked = append(asked, what+" in "+ra.Namespace)
		r.Status.Allowed = !forbid[what]
		return true, r, nil
	})
	w := withGenerators(k, "bench")
	w.chooseLoad(context.Background())
	want := []string{"create jobs in bench", "delete jobs in bench", "list pods in bench", "get pods/log in bench"}
	if !slices.Equal(asked, want) {
		t.Errorf("access reviews %v, want %v", asked, want)
	}
	if w.DrivesLoad() {
		t.Error("generators forbidden, yet the env still drives the load")
	}
	f := w.Facts()
	if f.Load == nil || f.Load.Path != artifacts.LoadFromCLI || !slices.Equal(f.Load.URLs, []string{"http://127.0.0.1:31080"}) ||
		len(f.Load.Warnings) != 1 || !strings.Contains(f.Load.Warnings[0], "RBAC denies create jobs") ||
		!strings.Contains(f.Load.Warnings[0], "the load came from the machine running the campaign") {
		t.Errorf("fallback facts: %+v", f.Load)
	}

	forbid = map[string]bool{}
	w.chooseLoad(context.Background())
	if !w.DrivesLoad() {
		t.Error("generators allowed, yet the env hands the load back")
	}
	f = w.Facts()
	if f.Load == nil || f.Load.Path != artifacts.LoadFromGenerators || f.Load.Generators != 3 ||
		!slices.Equal(f.Load.URLs, []string{"http://prequal-ingress.prequalbench-system.svc:8080"}) || len(f.Load.Warnings) != 0 {
		t.Errorf("generator facts: %+v", f.Load)
	}
	if got := f.Load.Describe(); !strings.Contains(got, "3 in-cluster generator Job(s)") {
		t.Errorf("describe: %s", got)
	}
}

// The access review itself forbidden is a denial (fall back, and say so);
// any other failure of the review (the API server unavailable) fails
// Setup instead of quietly moving the load to this machine.
func TestGenerators_AccessReviewErrors(t *testing.T) {
	for _, tt := range []struct {
		name     string
		err      error
		fallback bool
	}{
		{"review forbidden", apierrors.NewForbidden(schema.GroupResource{Group: "authorization.k8s.io", Resource: "selfsubjectaccessreviews"}, "", errors.New("no")), true},
		{"API server unavailable", apierrors.NewServiceUnavailable("etcd is down"), false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			k := fake.NewClientset()
			k.PrependReactor("create", "selfsubjectaccessreviews", func(k8stesting.Action) (bool, runtime.Object, error) {
				return true, nil, tt.err
			})
			w := withGenerators(k, "bench")
			err := w.chooseLoad(context.Background())
			if tt.fallback {
				if err != nil || w.DrivesLoad() || !strings.Contains(w.Facts().Load.Warnings[0], "may not ask the API server") {
					t.Errorf("err %v, drives %v, facts %+v; want a fallback that says why", err, w.DrivesLoad(), w.Facts().Load)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), "etcd is down") {
				t.Errorf("err %v, want Setup to fail with the review's error", err)
			}
		})
	}
}

// Against the real kube-apiserver's RBAC: the admin may run the
// generators; a user whose Role lets it read pods and logs but not
// create Jobs is denied, and the env falls back.
func TestGenerators_AccessOnRealAPIServer(t *testing.T) {
	kenv := kubetest.Start(t)
	ns := kenv.Namespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	admin := withGenerators(kenv.Client, ns)
	if denied, err := admin.Gen.CheckAccess(ctx); err != nil || len(denied) != 0 {
		t.Fatalf("admin: denied %v, %v", denied, err)
	}
	admin.chooseLoad(ctx)
	if !admin.DrivesLoad() {
		t.Error("admin: fell back")
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pods-only", Namespace: ns}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"pods", "pods/log"}, Verbs: []string{"get", "list"}},
	}}
	if _, err := kenv.Client.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "pods-only", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "pods-only"},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "no-jobs"}}}
	if _, err := kenv.Client.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	cfg := rest.CopyConfig(kenv.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "no-jobs", Groups: []string{"system:authenticated"}}
	limited, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	w := withGenerators(limited, ns)
	denied, err := w.Gen.CheckAccess(ctx)
	if err != nil || !slices.Equal(denied, []string{"create jobs", "delete jobs"}) {
		t.Errorf("limited user: denied %v, %v; want create and delete jobs", denied, err)
	}
	w.chooseLoad(ctx)
	if w.DrivesLoad() || w.Facts().Load.Path != artifacts.LoadFromCLI {
		t.Errorf("limited user: drives %v, facts %+v; want the fallback", w.DrivesLoad(), w.Facts().Load)
	}
}

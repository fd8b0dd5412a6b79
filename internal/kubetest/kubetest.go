// Package kubetest starts a real etcd and kube-apiserver for tests (through
// controller-runtime's envtest) and offers the helpers tests against it need:
// a fresh namespace per test and a dialer that maps the documentation
// addresses put in EndpointSlices to loopback listeners.
//
// One control plane serves a whole test binary when its TestMain calls Main;
// without Main every Start brings up (and tears down) its own.
package kubetest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Env is a running control plane.
type Env struct {
	// Config is an admin (system:masters) client configuration.
	Config *rest.Config
	// Client is a clientset built from Config.
	Client kubernetes.Interface
	// Kubeconfig is the path of a kubeconfig file for Config, for code that
	// takes --kubeconfig.
	Kubeconfig string

	env    *envtest.Environment
	tmpDir string
	assets string
	gw     gatewayAPI
}

var shared struct {
	sync.Mutex
	inMain bool
	env    *Env
	err    error
	done   bool
}

// Main runs the tests of a package with one shared control plane (started
// by the first Start) and stops it, checking that no etcd or kube-apiserver
// process is left, before exiting. Call it from TestMain:
//
//	func TestMain(m *testing.M) { kubetest.Main(m) }
func Main(m *testing.M) {
	shared.Lock()
	shared.inMain = true
	shared.Unlock()
	code := m.Run()
	shared.Lock()
	env := shared.env
	shared.env = nil
	shared.Unlock()
	if env != nil {
		if err := env.stop(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			code = 1
		}
	}
	os.Exit(code)
}

// Start returns the running control plane, starting it if needed. Under Main
// it is shared by the whole test binary; otherwise it belongs to t and stops
// when t ends. It fails t if the binaries cannot be found or built, or the
// control plane does not come up.
func Start(t testing.TB) *Env {
	t.Helper()
	shared.Lock()
	defer shared.Unlock()
	if !shared.inMain {
		env, err := start()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if err := env.stop(); err != nil {
				t.Error(err)
			}
		})
		return env
	}
	if !shared.done {
		shared.env, shared.err = start()
		shared.done = true
	}
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.env
}

func start() (*Env, error) {
	assets, err := Assets()
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "kubetest-")
	if err != nil {
		return nil, fmt.Errorf("kubetest: %w", err)
	}
	te := &envtest.Environment{BinaryAssetsDirectory: assets}
	// KUBEBUILDER_ASSETS would override the folder; we resolved it already.
	te.ControlPlane.GetAPIServer().Path = filepath.Join(assets, "kube-apiserver")
	cfg, err := te.Start()
	if err != nil {
		_ = te.Stop()
		_ = os.RemoveAll(tmp)
		return nil, fmt.Errorf("kubetest: start control plane from %s: %w", assets, err)
	}
	e := &Env{Config: cfg, env: te, tmpDir: tmp, assets: assets}
	e.Kubeconfig = filepath.Join(tmp, "kubeconfig")
	if err := os.WriteFile(e.Kubeconfig, te.KubeConfig, 0o600); err != nil {
		_ = e.stop()
		return nil, fmt.Errorf("kubetest: write kubeconfig: %w", err)
	}
	if e.Client, err = kubernetes.NewForConfig(cfg); err != nil {
		_ = e.stop()
		return nil, fmt.Errorf("kubetest: clientset: %w", err)
	}
	return e, nil
}

// stop stops the control plane and verifies no process started from the
// assets folder is still a child of this process.
func (e *Env) stop() error {
	err := e.env.Stop()
	if rmErr := os.RemoveAll(e.tmpDir); err == nil && rmErr != nil {
		err = rmErr
	}
	if err != nil {
		return fmt.Errorf("kubetest: stop control plane: %w", err)
	}
	if left := leftovers(e.assets); len(left) > 0 {
		return fmt.Errorf("kubetest: processes left behind after stop: %s", strings.Join(left, ", "))
	}
	return nil
}

// leftovers lists child processes of this process whose executable lives in
// dir (Linux only: elsewhere it returns nothing).
func leftovers(dir string) []string {
	if runtime.GOOS != "linux" {
		return nil
	}
	procs, _ := filepath.Glob("/proc/[0-9]*")
	me := fmt.Sprint(os.Getpid())
	var out []string
	for _, p := range procs {
		stat, err := os.ReadFile(filepath.Join(p, "stat"))
		if err != nil {
			continue
		}
		// Fields after the ")" that ends the command name: state, ppid, ...
		i := bytes.LastIndexByte(stat, ')')
		f := strings.Fields(string(stat[i+1:]))
		if len(f) < 2 || f[0] == "Z" || f[1] != me {
			continue
		}
		exe, err := os.Readlink(filepath.Join(p, "exe"))
		if err == nil && filepath.Dir(exe) == filepath.Clean(dir) {
			out = append(out, fmt.Sprintf("%s (pid %s)", filepath.Base(exe), filepath.Base(p)))
		}
	}
	return out
}

// Assets returns the folder holding etcd and kube-apiserver: KUBEBUILDER_ASSETS
// if set, otherwise what hack/kube-test-bins.sh prints (it builds the binaries
// once per machine).
func Assets() (string, error) {
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		return d, checkAssets(d)
	}
	script, err := findScript()
	if err != nil {
		return "", err
	}
	var stderr bytes.Buffer
	cmd := exec.Command("bash", script)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("kubetest: %s: %w\n%s", script, err, stderr.String())
	}
	d := strings.TrimSpace(string(out))
	return d, checkAssets(d)
}

func checkAssets(d string) error {
	for _, b := range []string{"etcd", "kube-apiserver"} {
		if st, err := os.Stat(filepath.Join(d, b)); err != nil || st.IsDir() {
			return fmt.Errorf("kubetest: KUBEBUILDER_ASSETS %q: want a folder holding etcd and kube-apiserver, %s is missing", d, b)
		}
	}
	return nil
}

// findScript walks up from the working directory (a package folder under
// go test) to the module root.
func findScript() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("kubetest: %w", err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			s := filepath.Join(dir, "hack", "kube-test-bins.sh")
			if _, err := os.Stat(s); err != nil {
				return "", fmt.Errorf("kubetest: KUBEBUILDER_ASSETS is unset and %s is missing", s)
			}
			return s, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("kubetest: KUBEBUILDER_ASSETS is unset and no go.mod found above the working directory")
		}
		dir = parent
	}
}

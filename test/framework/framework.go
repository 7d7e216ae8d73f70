// Package framework is what the end-to-end suites (test/e2e) and the benchmarks (test/bench)
// share: the local stack started once per test binary, a client, the operator run per test
// namespace, and helpers that create clusters and wait on their status.
package framework

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/test/stack"
)

// Env is what every test shares: the stack, a client, the operator binary.
var Env struct {
	Stack   *stack.Stack
	Client  client.Client
	Root    string
	Manager string
}

// Run builds bin/manager, starts the local stack (or reuses a running one), installs the
// CRDs, and then runs the tests: each suite's TestMain.
func Run(m *testing.M) int {
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	if err := setup(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "e2e setup:", err)
		return 1
	}
	return m.Run()
}

func setup(ctx context.Context) error {
	root, err := stack.RepoRoot()
	if err != nil {
		return err
	}
	Env.Root = root
	Env.Manager = filepath.Join(root, "bin", "manager")
	build := exec.CommandContext(ctx, "go", "build", "-o", Env.Manager, "./cmd/manager")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building the operator: %w", err)
	}
	if Env.Stack, err = stack.Start(ctx); err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	if Env.Client, err = client.New(Env.Stack.RESTConfig(), client.Options{Scheme: scheme}); err != nil {
		return err
	}
	// Each test runs its own operator for its namespace; one installed by `make deploy` or
	// `make demo` would act on the test clusters too.
	if err := Kubectl(ctx, "delete", "deployment", "etcdplan", "-n", "etcdplan-system", "--ignore-not-found", "--wait=true"); err != nil {
		return err
	}
	if err := Kubectl(ctx, "apply", "--server-side", "--force-conflicts", "-k", filepath.Join(root, "kustomize", "crd")); err != nil {
		return err
	}
	// kubectl wait fails outright on a CRD so new that it has no conditions yet: retry.
	for i := 0; i < 60; i++ {
		if err = Kubectl(ctx, "wait", "--for=condition=Established", "--timeout=30s", "crd/etcdclusters.etcdplan.io"); err == nil {
			return nil
		}
		time.Sleep(time.Second)
	}
	return err
}

// Kubectl runs bin/kubectl against the stack.
func Kubectl(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(Env.Root, "bin", "kubectl"), append([]string{"--kubeconfig", Env.Stack.Kubeconfig()}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl %v: %w\n%s", args, err, out)
	}
	return nil
}

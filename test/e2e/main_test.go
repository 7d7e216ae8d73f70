// Package e2e runs the operator against the local Kubernetes stack: a real kube-apiserver,
// real etcd members in Pods run by the local kubelet.
package e2e

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

// env is what every test shares: the stack, a client, the operator binary.
var env struct {
	stack   *stack.Stack
	client  client.Client
	root    string
	manager string
}

func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
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
	env.root = root
	env.manager = filepath.Join(root, "bin", "manager")
	build := exec.CommandContext(ctx, "go", "build", "-o", env.manager, "./cmd/manager")
	build.Dir, build.Stdout, build.Stderr = root, os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		return fmt.Errorf("building the operator: %w", err)
	}
	if env.stack, err = stack.Start(ctx); err != nil {
		return err
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return err
	}
	if env.client, err = client.New(env.stack.RESTConfig(), client.Options{Scheme: scheme}); err != nil {
		return err
	}
	// Each test runs its own operator for its namespace; one installed by `make deploy` or
	// `make demo` would act on the test clusters too.
	if err := kubectl(ctx, "delete", "deployment", "etcdplan", "-n", "etcdplan-system", "--ignore-not-found", "--wait=true"); err != nil {
		return err
	}
	if err := kubectl(ctx, "apply", "--server-side", "--force-conflicts", "-k", filepath.Join(root, "kustomize", "crd")); err != nil {
		return err
	}
	// kubectl wait fails outright on a CRD so new that it has no conditions yet: retry.
	for i := 0; i < 60; i++ {
		if err = kubectl(ctx, "wait", "--for=condition=Established", "--timeout=30s", "crd/etcdclusters.etcdplan.io"); err == nil {
			return nil
		}
		time.Sleep(time.Second)
	}
	return err
}

func kubectl(ctx context.Context, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(env.root, "bin", "kubectl"), append([]string{"--kubeconfig", env.stack.Kubeconfig()}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("kubectl %v: %w\n%s", args, err, out)
	}
	return nil
}

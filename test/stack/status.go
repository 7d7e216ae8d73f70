package stack

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// Status writes what of the stack runs to out and reports whether all of it runs and answers.
func Status(ctx context.Context, root string, out io.Writer) bool {
	l, err := newLayout(root)
	if err != nil {
		fmt.Fprintln(out, err)
		return false
	}
	fmt.Fprintf(out, "%-24s %d (bridge %s at %s, API port %d)\n", "stack", l.n, l.n.Bridge(), l.n.BridgeIP(), l.n.APIServerPort())
	ok := true
	for _, p := range allProcs(l) {
		if pid := p.pid(l); pid != 0 {
			fmt.Fprintf(out, "%-24s running (pid %d)\n", p.name, pid)
		} else {
			fmt.Fprintf(out, "%-24s not running\n", p.name)
			ok = false
		}
	}
	if _, err := os.Stat(l.kubeconfig()); err != nil {
		fmt.Fprintf(out, "kubeconfig               none (make stack-up)\n")
		return false
	}
	cfg, err := restConfig(l.kubeconfig())
	if err != nil {
		fmt.Fprintf(out, "kubeconfig               %v\n", err)
		return false
	}
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		fmt.Fprintf(out, "kubeconfig               %v\n", err)
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := apiReady(ctx, client); err != nil {
		fmt.Fprintf(out, "apiserver                not ready: %v\n", err)
		return false
	}
	fmt.Fprintf(out, "apiserver                ready at %s\n", cfg.Host)
	nodes, err := client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		fmt.Fprintf(out, "nodes                    %v\n", err)
		return false
	}
	var states []string
	for _, n := range nodes.Items {
		state := "NotReady"
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				state = "Ready"
			}
		}
		states = append(states, n.Name+" "+state)
	}
	if err := nodesReady(ctx, client); err != nil {
		ok = false
	}
	fmt.Fprintf(out, "nodes                    %s\n", strings.Join(states, ", "))
	fmt.Fprintf(out, "kubeconfig               %s\n", l.kubeconfig())
	return ok
}

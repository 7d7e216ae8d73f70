package cli

import (
	"flag"
	"fmt"

	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/etcdplan/etcdplan/api/v1alpha1"
)

// kubeFlags say which cluster and namespace the live commands talk to, as kubectl's do.
type kubeFlags struct {
	kubeconfig, context, namespace string
}

const kubeFlagsHelp = `      --kubeconfig FILE     kubeconfig to use (default: $KUBECONFIG, else ~/.kube/config)
      --context NAME        kubeconfig context to use (default: the current context)
  -n, --namespace NS        namespace (default: the context's namespace, else default)
`

func (k *kubeFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&k.kubeconfig, "kubeconfig", "", "")
	fs.StringVar(&k.context, "context", "", "")
	fs.StringVar(&k.namespace, "n", "", "")
	fs.StringVar(&k.namespace, "namespace", "", "")
}

// kube is a connection to the cluster the kubeconfig points at.
type kube struct {
	client.Client
	namespace string // for objects that name none
}

// connect reads the kubeconfig the way kubectl does and opens a client for it.
func (k kubeFlags) connect() (*kube, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = k.kubeconfig
	cfg := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{CurrentContext: k.context})
	rest, err := cfg.ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("reading the kubeconfig: %w", err)
	}
	ns := k.namespace
	if ns == "" {
		if ns, _, err = cfg.Namespace(); err != nil {
			return nil, fmt.Errorf("reading the kubeconfig: %w", err)
		}
	}
	scheme := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(scheme); err != nil {
		return nil, err
	}
	if err := v1alpha1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	c, err := client.New(rest, client.Options{Scheme: scheme})
	if err != nil {
		return nil, fmt.Errorf("connecting to %s: %w", rest.Host, err)
	}
	return &kube{Client: c, namespace: ns}, nil
}

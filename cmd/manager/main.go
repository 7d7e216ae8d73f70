// Command manager runs the etcdplan operator. The same binary runs in the Pods the operator
// renders: `manager preflight`, `restore-fetch`, `restore-place`, `snapshot` and
// `delete-object` are executor/agent's in-Pod commands.
package main

import (
	"fmt"
	"os"
	_ "time/tzdata" // CRON_TZ= schedules name zones, and an image may have no zone files

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/etcdplan/etcdplan/executor/agent"
)

func main() {
	if len(os.Args) > 1 {
		if code, ok := agent.Run(os.Args[1], os.Args[2:]); ok {
			os.Exit(code)
		}
	}
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// run is the operator: its flags, a controller manager, and the reconcilers on it.
func run() error {
	o := parseFlags()
	mgr, err := newManager(o)
	if err != nil {
		return err
	}
	if o.selfImage == "" {
		if o.selfImage, err = ownImage(mgr.GetAPIReader()); err != nil {
			return err
		}
	}
	if err := addReconcilers(mgr, o); err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}

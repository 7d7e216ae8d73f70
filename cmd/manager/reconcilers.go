package main

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/etcdplan/etcdplan/executor/backupctl"
	"github.com/etcdplan/etcdplan/executor/controller"
	"github.com/etcdplan/etcdplan/executor/etcd"
	"github.com/etcdplan/etcdplan/executor/resources"
	"github.com/etcdplan/etcdplan/executor/store"
)

// addReconcilers sets up the reconcilers of clusters, backups and schedules on the manager.
func addReconcilers(mgr manager.Manager, o options) error {
	images := resources.Images{EtcdRepository: o.etcdRepository, Operator: o.selfImage}
	r := &controller.Reconciler{
		Client:    mgr.GetClient(),
		APIReader: mgr.GetAPIReader(),
		Recorder:  mgr.GetEventRecorderFor("etcdplan"), //nolint:staticcheck // the events/v1 recorder needs a newer API
		Images:    images,
		Dial:      etcd.Dial,
	}
	if dir := o.crashAfterEffectMarkersDir; dir != "" {
		r.AfterEffect = crashOnce(dir)
	}
	if err := r.SetupWithManager(mgr, o.workers); err != nil {
		return err
	}
	br := &backupctl.BackupReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Dial: etcd.Dial, Open: store.Open,
		Images: images, Inspect: etcd.ContentsAt, DrillDeadline: o.drillDeadline}
	if err := br.SetupWithManager(mgr); err != nil {
		return err
	}
	sr := &backupctl.ScheduleReconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Open: store.Open, Images: images}
	return sr.SetupWithManager(mgr)
}

// crashOnce stops the process right after a step's effect, the first time each step
// runs: a test of how the operator resumes from what it had recorded.
func crashOnce(dir string) func(string, int) {
	return func(planID string, step int) {
		marker := filepath.Join(dir, fmt.Sprintf("%s-%d", planID, step))
		if _, err := os.Stat(marker); err == nil {
			return
		}
		_ = os.MkdirAll(dir, 0o755)
		_ = os.WriteFile(marker, []byte(time.Now().Format(time.RFC3339Nano)), 0o644)
		fmt.Fprintf(os.Stderr, "test failpoint: exiting after the effect of plan %s step %d\n", planID, step+1)
		os.Exit(3)
	}
}

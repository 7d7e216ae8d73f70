package controller

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/etcdplan/etcdplan/api/plan"
	"github.com/etcdplan/etcdplan/api/v1alpha1"
	"github.com/etcdplan/etcdplan/executor/certs"
	"github.com/etcdplan/etcdplan/executor/etcd"
	"github.com/etcdplan/etcdplan/planner"
)

// enableAuth switches etcd's authentication on, the operator an etcd user by its client
// certificate's common name, and root's password from the cluster's Secret.
func (r *Reconciler) enableAuth(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation) error {
	if o.etcd == nil {
		return errors.New("no member answers")
	}
	user := certs.User(o.tls.Operator)
	if user == "" {
		return errors.New("the operator dials the members without a client certificate, whose common name would be its etcd user")
	}
	password, err := r.certs().RootPassword(ctx, c)
	if err != nil {
		return err
	}
	if err := o.etcd.EnableAuth(ctx, etcd.Auth{RootPassword: password, User: user}); err != nil {
		return err
	}
	switched(c, true)
	return nil
}

// disableAuth switches etcd's authentication off.
func disableAuth(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation) error {
	if o.etcd == nil {
		return errors.New("no member answers")
	}
	if err := o.etcd.DisableAuth(ctx); err != nil {
		return err
	}
	switched(c, false)
	return nil
}

// switched records that etcd said auth is on (every voter, to the operator) or off: what a
// look would read again, through etcd's raft log.
func switched(c *v1alpha1.EtcdCluster, on bool) {
	if c.Status.Auth == nil {
		c.Status.Auth = &v1alpha1.AuthStatus{}
	}
	c.Status.Auth.Enabled, c.Status.Auth.ClusterID = on, c.Status.ClusterID
}

// authState is whether etcd's authentication is on: as status last recorded it for this
// etcd cluster (a look that read it, or the step that switched it), else read from etcd,
// which answers through its raft log, so it is not asked at every look; nil when it cannot
// be read. A cluster that never asked for auth has it off, unless it was restored from a
// snapshot, which brings etcd's auth flag with it.
func authState(ctx context.Context, c *v1alpha1.EtcdCluster, cli etcd.Cluster, view *planner.EtcdView) *bool {
	rec := c.Status.Auth
	switch {
	case neverAuth(c):
		return new(false)
	case rec != nil && rec.ClusterID == view.ClusterID:
		return new(rec.Enabled)
	}
	on, err := cli.AuthEnabled(ctx)
	if err != nil {
		return nil
	}
	return new(on)
}

// neverAuth: the cluster never asked for auth, and holds no snapshot's data (which brings
// etcd's auth flag with it), so auth is off without asking etcd.
func neverAuth(c *v1alpha1.EtcdCluster) bool {
	return c.Status.Auth == nil && !c.Spec.AuthOn() && c.Status.RestoredFrom == "" && c.Status.PreviousClusterID == ""
}

// recordAuth records in status what the look found of etcd's authentication, unless the
// cluster never had it.
func recordAuth(c *v1alpha1.EtcdCluster, o *observation) {
	prev := c.Status.Auth
	if o.Etcd == nil || o.Etcd.Auth == nil || neverAuth(c) {
		if prev == nil && o.AuthFromCreation {
			c.Status.Auth = &v1alpha1.AuthStatus{FromCreation: true}
		}
		return
	}
	a := &v1alpha1.AuthStatus{Enabled: *o.Etcd.Auth, ClusterID: o.Etcd.ClusterID, User: certs.User(o.tls.Operator),
		RootPasswordSecret: c.RootPasswordSecret(), FromCreation: o.AuthFromCreation}
	if prev != nil {
		a.Users, a.UsersApplied = prev.Users, prev.UsersApplied
	}
	c.Status.Auth = a
}

// updateUsers makes the users of spec.auth.users in etcd and deletes those it made before
// that the spec no longer lists; status records what was made, in which etcd cluster.
func (r *Reconciler) updateUsers(ctx context.Context, c *v1alpha1.EtcdCluster, o *observation) error {
	if o.etcd == nil || c.Status.Auth == nil {
		return errors.New("no member answers")
	}
	var users []etcd.User
	var names []string
	for _, u := range c.Spec.AuthUsers() {
		eu := etcd.User{Name: u.Name}
		for _, p := range u.Permissions {
			eu.Perms = append(eu.Perms, etcd.Perm{Prefix: p.Prefix, Type: permType[cmp.Or(p.Access, v1alpha1.AuthReadWrite)]})
		}
		users, names = append(users, eu), append(names, u.Name)
	}
	gone := slices.DeleteFunc(slices.Clone(c.Status.Auth.Users), func(n string) bool { return slices.Contains(names, n) })
	if err := o.etcd.SyncUsers(ctx, users, gone); err != nil {
		return err
	}
	c.Status.Auth.Users, c.Status.Auth.UsersApplied = names, c.Spec.UsersHash()+"@"+c.Status.ClusterID
	return nil
}

var permType = map[v1alpha1.AuthAccess]clientv3.PermissionType{
	v1alpha1.AuthRead:      clientv3.PermissionType(clientv3.PermRead),
	v1alpha1.AuthWrite:     clientv3.PermissionType(clientv3.PermWrite),
	v1alpha1.AuthReadWrite: clientv3.PermissionType(clientv3.PermReadWrite),
}

// authHeld: the plan's current step switches auth on for a cluster that served clients
// without it, or off; it waits for approval.
func authHeld(rec *v1alpha1.PlanStatus) bool {
	s := currentStep(rec)
	return s != nil && (s.Why == plan.WhyAuthOn || s.Why == plan.WhyAuthOff)
}

// authMessage says what the held step does and how to let it run.
func authMessage(c *v1alpha1.EtcdCluster, rec *v1alpha1.PlanStatus) string {
	approve := approveHow(c, rec)
	if currentStep(rec).Why == plan.WhyAuthOff {
		return fmt.Sprintf("plan %s switches etcd's authentication off: every client that reaches the members is served without a user from then on; %s", rec.ID, approve)
	}
	return fmt.Sprintf("plan %s switches etcd's authentication on: from then on every client needs an etcd user, by a client certificate whose common name is that user "+
		"or by a user and password; create the users and roles your clients need first (they can be made while auth is off), then %s", rec.ID, approve)
}

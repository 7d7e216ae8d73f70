package v1alpha1

// AuthSpec switches on etcd's authentication. The operator is then an etcd user with the
// root role, named by its client certificate's common name (no password or token to keep),
// and etcd's `root` user exists with a password for break-glass use. Switching it on or off
// for a running cluster is a plan that waits for approval.
type AuthSpec struct {
	// Enabled switches etcd's authentication on: every client needs an etcd user from then
	// on (a client certificate whose common name is a user, or a user and password).
	Enabled bool `json:"enabled"`
	// RootPasswordSecret names the Secret whose key "password" is the root user's
	// password; the operator creates it with a random password when it does not exist, and
	// never prints it. Defaults to <name>-root.
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$')",message="auth.rootPasswordSecret must be a Secret name (lowercase letters, digits, '-' and '.')"
	// +optional
	RootPasswordSecret string `json:"rootPasswordSecret,omitempty"`
}

// AuthStatus is etcd's authentication as last read from the cluster.
type AuthStatus struct {
	// Enabled: etcd's authentication is on.
	Enabled bool `json:"enabled"`
	// ClusterID is the etcd cluster ID it was read from: a cluster restored anew is read
	// again.
	// +optional
	ClusterID string `json:"clusterID,omitempty"`
	// User is the etcd user the operator is: its client certificate's common name.
	// +optional
	User string `json:"user,omitempty"`
	// RootPasswordSecret names the Secret with the root user's password (key "password").
	// +optional
	RootPasswordSecret string `json:"rootPasswordSecret,omitempty"`
	// FromCreation: the cluster was created with spec.auth.enabled, so no client used it
	// without authentication and switching it on waits for no approval.
	// +optional
	FromCreation bool `json:"fromCreation,omitempty"`
}

// AuthOn reports whether the spec asks for etcd's authentication.
func (spec *EtcdClusterSpec) AuthOn() bool { return spec.Auth != nil && spec.Auth.Enabled }

// RootPasswordSecret names the Secret with the root user's password.
func (c *EtcdCluster) RootPasswordSecret() string {
	if c.Spec.Auth != nil && c.Spec.Auth.RootPasswordSecret != "" {
		return c.Spec.Auth.RootPasswordSecret
	}
	return c.Name + "-root"
}

package v1alpha1

import "encoding/json"

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
	// Users are etcd users the operator makes, each with a role of its own name holding
	// exactly the permissions listed, and a client certificate from the cluster's CA (its
	// common name the user's name) in Secret <cluster>-user-<name>-tls (keys tls.crt,
	// tls.key, ca.crt). A user taken out of the list is deleted from etcd with its role.
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Users []AuthUser `json:"users,omitempty"`
}

// AuthUser is an etcd user the operator makes, with its role and client certificate.
type AuthUser struct {
	// Name of the user and of its role, and its certificate's common name.
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:XValidation:rule="self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?$')",message="auth.users name must be lowercase letters, digits and '-': it names a Secret"
	// +kubebuilder:validation:XValidation:rule="!(self in ['root', 'etcdplan-operator'])",message="auth.users cannot name root or etcdplan-operator: the operator makes those itself"
	Name string `json:"name"`
	// Permissions are the keys the user may read or write, each a key prefix.
	// +kubebuilder:validation:MaxItems=32
	// +optional
	Permissions []AuthPermission `json:"permissions,omitempty"`
}

// AuthPermission lets a user read or write the keys under a prefix.
type AuthPermission struct {
	// Prefix of the keys, such as /app/.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	Prefix string `json:"prefix"`
	// Access is Read, Write or ReadWrite.
	// +kubebuilder:validation:Enum=Read;Write;ReadWrite
	// +kubebuilder:default=ReadWrite
	// +optional
	Access AuthAccess `json:"access,omitempty"`
}

// AuthAccess is what a permission allows.
type AuthAccess string

// What a permission allows.
const (
	AuthRead      AuthAccess = "Read"
	AuthWrite     AuthAccess = "Write"
	AuthReadWrite AuthAccess = "ReadWrite"
)

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
	// Users are the users of spec.auth.users the operator made in etcd.
	// +optional
	Users []string `json:"users,omitempty"`
	// UsersApplied identifies the spec.auth.users made in etcd, and the etcd cluster ID
	// they were made in ("<hash>@<cluster ID>").
	// +optional
	UsersApplied string `json:"usersApplied,omitempty"`
}

// AuthOn reports whether the spec asks for etcd's authentication.
func (spec *EtcdClusterSpec) AuthOn() bool { return spec.Auth != nil && spec.Auth.Enabled }

// AuthUsers are the users spec.auth asks the operator to make.
func (spec *EtcdClusterSpec) AuthUsers() []AuthUser {
	if spec.Auth == nil {
		return nil
	}
	return spec.Auth.Users
}

// UsersHash identifies the users spec.auth asks for ("" for none).
func (spec *EtcdClusterSpec) UsersHash() string {
	if len(spec.AuthUsers()) == 0 {
		return ""
	}
	b, err := json.Marshal(spec.AuthUsers())
	if err != nil {
		panic(err) // plain data always marshals
	}
	return shortHash(b, 12)
}

// RootPasswordSecret names the Secret with the root user's password.
func (c *EtcdCluster) RootPasswordSecret() string {
	if c.Spec.Auth != nil && c.Spec.Auth.RootPasswordSecret != "" {
		return c.Spec.Auth.RootPasswordSecret
	}
	return c.Name + "-root"
}

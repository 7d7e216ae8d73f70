package etcd

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// Auth is who etcd knows once its authentication is on.
type Auth struct {
	// RootPassword is the password of etcd's root user, for break-glass use.
	RootPassword string
	// User is the operator's etcd user: its client certificate's common name. etcd maps a
	// verified client certificate to the user of that name on every member started with
	// --client-cert-auth, so the user needs no password, and the operator's connection
	// carries none (a token would win over the certificate).
	User string
}

// root is etcd's root user and role: auth can be enabled only while the root user exists
// and holds the root role, which etcd knows without its being created.
const root = "root"

// EnableAuth makes the root user (with a.RootPassword) and a.User (no password), grants
// both the root role and enables auth, all through one voter; each is a no-op when done
// before, so a step tried again goes on where it stopped. Then every voter is asked whether
// auth is on, under the operator's certificate: a voter that refuses it (one that does not
// map certificates to users) would lock the operator out, so auth is switched off again
// with root's password and the step fails saying why.
func (c *Client) EnableAuth(ctx context.Context, a Auth) error {
	if a.User == "" || a.RootPassword == "" {
		return errors.New("auth needs the operator's user (its client certificate's common name) and root's password")
	}
	err := c.pinned(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		if err := addUser(ctx, cli, root, a.RootPassword); err != nil {
			return err
		}
		if a.User != root {
			if err := addUser(ctx, cli, a.User, ""); err != nil {
				return err
			}
		}
		_, err := cli.AuthEnable(ctx)
		return err
	})
	if err != nil {
		return fmt.Errorf("enabling auth: %w", err)
	}
	refused := c.authOnAtEveryVoter(ctx)
	if refused == nil {
		return nil
	}
	if !AuthRefused(refused) {
		return refused // a voter that did not answer is asked again with the step
	}
	if err := c.breakGlassDisable(ctx, a.RootPassword); err != nil {
		return fmt.Errorf("%w; switching auth off again with root's password failed too, so only root can reach the cluster now: %w", refused, err)
	}
	return fmt.Errorf("auth was switched off again: %w (every member needs --client-cert-auth, and the operator's user %q the root role)", refused, a.User)
}

// addUser adds a user with the root role: with a password, which is set again when the
// user exists (the Secret is the password's one source), or without one.
func addUser(ctx context.Context, cli *clientv3.Client, name, password string) error {
	var err error
	if password == "" {
		_, err = cli.UserAddWithOptions(ctx, name, "", &clientv3.UserAddOptions{NoPassword: true})
	} else if _, err = cli.UserAdd(ctx, name, password); errors.Is(err, rpctypes.ErrUserAlreadyExist) {
		_, err = cli.UserChangePassword(ctx, name, password)
	}
	if err != nil && !errors.Is(err, rpctypes.ErrUserAlreadyExist) {
		return fmt.Errorf("adding user %s: %w", name, err)
	}
	if _, err := cli.UserGrantRole(ctx, name, root); err != nil {
		return fmt.Errorf("granting %s the root role: %w", name, err)
	}
	return nil
}

// authOnAtEveryVoter asks each voter whether auth is on, under the operator's certificate:
// the answer needs the root role, checked by the member that receives the call against the
// user it maps the certificate to. Learners serve no AuthStatus.
func (c *Client) authOnAtEveryVoter(ctx context.Context) error {
	c.mu.Lock()
	eps := urls(c.endpoints)
	c.mu.Unlock()
	for _, ep := range eps {
		err := c.through(ctx, ep, func(ctx context.Context, cli *clientv3.Client) error {
			ctx, cancel := context.WithTimeout(ctx, requestTimeout)
			defer cancel()
			st, err := cli.Status(ctx, ep)
			if err != nil || c.ours(st.Header) != nil || st.IsLearner {
				return err
			}
			as, err := cli.AuthStatus(ctx)
			if err == nil && !as.Enabled {
				err = errors.New("auth is not on yet")
			}
			return err
		})
		if err != nil {
			return fmt.Errorf("member at %s: %w", ep, err)
		}
	}
	return nil
}

// breakGlassDisable switches auth off as root, by password, through the first member that
// takes it.
func (c *Client) breakGlassDisable(ctx context.Context, password string) error {
	return c.anyAs(ctx, root, password, func(ctx context.Context, cli *clientv3.Client) error {
		_, err := cli.AuthDisable(ctx)
		return err
	})
}

// anyAs runs f as user by password through the first member that takes it: a learner
// serves no Authenticate, and while the operator is refused no status tells which members
// are voters.
func (c *Client) anyAs(ctx context.Context, user, password string, f func(context.Context, *clientv3.Client) error) error {
	c.mu.Lock()
	eps := urls(c.endpoints)
	c.mu.Unlock()
	var errs []error
	for _, ep := range eps {
		err := asUser(ctx, ep, c.tls, user, password, f)
		if err == nil {
			return nil
		}
		errs = append(errs, fmt.Errorf("%s: %w", ep, err))
	}
	return errors.Join(errs...)
}

// asUser calls f with a client of the one endpoint, authenticated as user by password (a
// token wins over the client certificate, which TLS still asks for).
func asUser(ctx context.Context, ep string, tlsCfg *tls.Config, user, password string, f func(context.Context, *clientv3.Client) error) error {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	cli, err := dialOne(ep, tlsCfg, user, password)
	if err != nil {
		return err
	}
	defer cli.Close()
	return f(ctx, cli)
}

// dialOne connects to the one endpoint, as user by password when one is given.
func dialOne(ep string, tlsCfg *tls.Config, user, password string) (*clientv3.Client, error) {
	cfg := clientv3.Config{Endpoints: []string{ep}, TLS: tlsCfg, DialTimeout: 2 * time.Second, DialOptions: ServerName(tlsCfg), Logger: zap.NewNop()}
	if password != "" {
		cfg.Username, cfg.Password = user, password
	}
	return clientv3.New(cfg)
}

// DisableAuth switches auth off, through one voter, as the operator (a root user).
func (c *Client) DisableAuth(ctx context.Context) error {
	return c.pinned(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		_, err := cli.AuthDisable(ctx)
		return err
	})
}

// AuthEnabled asks a voter whether auth is on. etcd answers through its raft log (one entry
// per call), so it is asked only when the spec and the last answer differ.
func (c *Client) AuthEnabled(ctx context.Context) (bool, error) {
	var on bool
	err := c.pinned(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		as, err := cli.AuthStatus(ctx)
		if err == nil {
			on = as.Enabled
		}
		return err
	})
	if AuthRefused(err) { // only auth that is on refuses anyone
		return true, nil
	}
	return on, err
}

// AdoptUsers makes users (no password) with the root role in a cluster whose auth is on,
// as the user given by password, through the first member that takes it: the operator's
// users, by its client certificates' common names, in a cluster it adopts. Then it asks,
// under its certificate, for etcd's user list, which only a root user may read: a member
// that does not map certificates to users refuses it, and the step fails saying so.
func (c *Client) AdoptUsers(ctx context.Context, users []string, as, password string) error {
	err := c.anyAs(ctx, as, password, func(ctx context.Context, cli *clientv3.Client) error {
		for _, u := range users {
			if err := addUser(ctx, cli, u, ""); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("making the operator's users as %s: %w", as, err)
	}
	return c.pinned(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		if _, err := cli.UserList(ctx); err != nil {
			return fmt.Errorf("the operator's certificate is no etcd user of the cluster (its members need --client-cert-auth): %w", err)
		}
		return nil
	})
}

// AuthRefused: etcd refused the caller's identity or its permissions. etcd 3.5 returns
// some of these as bare text ("auth: permission denied") rather than as its error codes.
func AuthRefused(err error) bool {
	for _, e := range []error{rpctypes.ErrUserEmpty, rpctypes.ErrPermissionDenied, rpctypes.ErrUserNotFound,
		rpctypes.ErrRoleNotFound, rpctypes.ErrAuthFailed, rpctypes.ErrInvalidAuthToken} {
		if errors.Is(err, e) {
			return true
		}
	}
	return err != nil && strings.Contains(err.Error(), "auth: ")
}

// User is an etcd user with a role of its name and no password: a client certificate whose
// common name is the user's name authenticates it.
type User struct {
	Name  string
	Perms []Perm
}

// Perm lets a role read, write or both the keys under Prefix.
type Perm struct {
	Prefix string
	Type   clientv3.PermissionType
}

// SyncUsers makes each user and its role, the role holding exactly the permissions given,
// and deletes the users named in gone with their roles. Each call is a no-op when done
// before, so a step tried again goes on where it stopped.
func (c *Client) SyncUsers(ctx context.Context, users []User, gone []string) error {
	return c.pinned(ctx, func(ctx context.Context, cli *clientv3.Client) error {
		for _, u := range users {
			if err := syncUser(ctx, cli, u); err != nil {
				return fmt.Errorf("user %s: %w", u.Name, err)
			}
		}
		for _, name := range gone {
			if _, err := cli.UserDelete(ctx, name); err != nil && !errors.Is(err, rpctypes.ErrUserNotFound) {
				return fmt.Errorf("deleting user %s: %w", name, err)
			}
			if _, err := cli.RoleDelete(ctx, name); err != nil && !errors.Is(err, rpctypes.ErrRoleNotFound) {
				return fmt.Errorf("deleting role %s: %w", name, err)
			}
		}
		return nil
	})
}

// syncUser makes a user, its role with exactly its permissions, and grants it.
func syncUser(ctx context.Context, cli *clientv3.Client, u User) error {
	if _, err := cli.RoleAdd(ctx, u.Name); err != nil && !errors.Is(err, rpctypes.ErrRoleAlreadyExist) {
		return err
	}
	role, err := cli.RoleGet(ctx, u.Name)
	if err != nil {
		return err
	}
	want := map[string]Perm{}
	for _, p := range u.Perms {
		want[p.Prefix] = p
	}
	for _, p := range role.Perm {
		key, end := string(p.Key), string(p.RangeEnd)
		if w, ok := want[key]; ok && end == clientv3.GetPrefixRangeEnd(key) && clientv3.PermissionType(p.PermType) == w.Type {
			delete(want, key) // held already
			continue
		}
		if _, err := cli.RoleRevokePermission(ctx, u.Name, key, end); err != nil && !errors.Is(err, rpctypes.ErrPermissionNotGranted) {
			return err
		}
	}
	for _, p := range u.Perms {
		if _, ok := want[p.Prefix]; ok {
			if _, err := cli.RoleGrantPermission(ctx, u.Name, p.Prefix, clientv3.GetPrefixRangeEnd(p.Prefix), p.Type); err != nil {
				return err
			}
		}
	}
	if _, err := cli.UserAddWithOptions(ctx, u.Name, "", &clientv3.UserAddOptions{NoPassword: true}); err != nil && !errors.Is(err, rpctypes.ErrUserAlreadyExist) {
		return err
	}
	_, err = cli.UserGrantRole(ctx, u.Name, u.Name)
	return err
}

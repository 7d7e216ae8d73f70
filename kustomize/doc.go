// Package kustomize holds the operator's install manifests (kustomize bases and components);
// its test checks the RBAC rules both installs grant against the operator's needs.
package kustomize

package cli

import (
	"fmt"

	"github.com/etcdplan/etcdplan/cmd/kubectl-etcd/convert"
)

const convertHelp = `Print the etcdplan objects that take over running clusters of other etcd operators: for each
cluster an EtcdCluster whose spec.bootstrap.join aims at it (its members join it one at a time, and
its own members leave), the EtcdBackup and EtcdBackupSchedule objects that correspond to their
backups, and a comment for every field of theirs that has no equivalent. It reads EtcdCluster of
coreos etcd-operator (etcd.database.coreos.com), improbable-eng etcd-cluster-operator
(etcd.improbable.io), aenix etcd-operator (etcd.aenix.io), cozystack etcd-operator
(etcd-operator.cozystack.io) and Etcd of etcd-druid (druid.gardener.cloud), with their backup kinds.
Other kinds are reported and skipped. What to do before and after: docs/migration.md.

Usage:
  kubectl-etcd convert -f FILE [--name NAME] [--etcd-version VERSION]

Flags:
  -f, --filename FILE       their manifests: a file or a directory; repeatable; - reads stdin
      --name NAME           the EtcdCluster's name, when the input has one cluster (default: theirs
                            with the suffix ` + convert.DefaultSuffix + `: our Services and members
                            cannot take the names of theirs)
      --etcd-version V      the etcd release the cluster runs, for manifests that do not say it
                            (etcd-druid's)
`

// convertCmd runs `kubectl-etcd convert`.
func (c *CLI) convertCmd(args []string) int {
	var files []string
	var opts convert.Options
	fs := newFlagSet("convert")
	addFile := func(v string) error { files = append(files, v); return nil }
	fs.Func("f", "", addFile)
	fs.Func("filename", "", addFile)
	fs.StringVar(&opts.Name, "name", "", "")
	fs.StringVar(&opts.EtcdVersion, "etcd-version", "", "")
	args, err := parse(fs, args)
	switch {
	case err != nil:
	case len(args) > 0:
		err = usageError(fmt.Sprintf("unexpected argument %q", args[0]))
	case len(files) == 0:
		err = usageError("-f is required")
	}
	if err != nil {
		return c.flagError(err, "convert", convertHelp)
	}
	docs, err := readFiles(files, c.Stdin)
	if err != nil {
		return c.fail(err)
	}
	in := make([]convert.Doc, len(docs))
	for i, d := range docs {
		in[i] = convert.Doc{Source: d.source, Data: d.data}
	}
	res, err := convert.Convert(in, opts)
	if err != nil {
		return c.fail(err)
	}
	for _, w := range res.Warnings {
		fmt.Fprintf(c.Stderr, "warning: %s\n", w)
	}
	if err := convert.Render(c.Stdout, res.Objects); err != nil {
		return c.fail(err)
	}
	return ExitOK
}

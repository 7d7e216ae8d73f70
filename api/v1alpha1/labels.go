package v1alpha1

// Labels and annotations users select on or write. Their values are part of the API: they
// are stored on objects and documented for kubectl, so they never change.
const (
	// LabelCluster names the EtcdCluster a member Pod, volume claim or Service belongs to.
	LabelCluster = "etcdplan.io/cluster"
	// LabelMember names the member a Pod or volume claim is for.
	LabelMember = "etcdplan.io/member"
	// LabelRole is a member Pod's MemberRole: the client Service and the
	// PodDisruptionBudget select voters.
	LabelRole = "etcdplan.io/role"
	// LabelRetained on a member's volume claim marks it retained: its member held data when
	// a forced recovery restarted another member alone, and left the cluster. The operator
	// never deletes such a claim; AnnotationRetained says why it was kept.
	LabelRetained      = "etcdplan.io/retained"
	AnnotationRetained = "etcdplan.io/retained"
	// LabelSchedule on an EtcdBackup names the EtcdBackupSchedule that created it.
	LabelSchedule = "etcdplan.io/backup-schedule"
	// AnnotationApprove on an EtcdCluster carries the ID of the plan a user approved
	// (approval: Manual, or a recovery from quorum loss).
	AnnotationApprove = "etcdplan.io/approve"
	// AnnotationRotateCA on an EtcdCluster asks for a rotation of the cluster's own CA
	// (mode Auto): any value the cluster's CA was not made or rotated for (a date, say).
	// Committed to Git, it asks once; a new value asks again.
	AnnotationRotateCA = "etcdplan.io/rotate-ca"
	// FinalizerAdoption holds an EtcdCluster's deletion while its adoption of a running
	// cluster can be rolled back: its members leave the source first.
	FinalizerAdoption = "etcdplan.io/adoption"
)

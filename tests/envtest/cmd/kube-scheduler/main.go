// Command kube-scheduler is the upstream Kubernetes scheduler, built from the
// k8s.io/kubernetes Go module pinned in ../../go.mod. It mirrors
// k8s.io/kubernetes/cmd/kube-scheduler/scheduler.go.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	"k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {
	os.Exit(cli.Run(app.NewSchedulerCommand()))
}

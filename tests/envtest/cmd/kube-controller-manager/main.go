// Command kube-controller-manager is the upstream Kubernetes controller
// manager, built from the k8s.io/kubernetes Go module pinned in ../../go.mod.
// It mirrors k8s.io/kubernetes/cmd/kube-controller-manager/controller-manager.go.
package main

import (
	"os"
	_ "time/tzdata" // for CronJob time zone support

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	"k8s.io/kubernetes/cmd/kube-controller-manager/app"
)

func main() {
	os.Exit(cli.Run(app.NewControllerManagerCommand()))
}

// Command kube-apiserver is the upstream Kubernetes API server, built from the
// k8s.io/kubernetes Go module pinned in ../../go.mod. It mirrors
// k8s.io/kubernetes/cmd/kube-apiserver/apiserver.go.
package main

import (
	"os"
	_ "time/tzdata" // for timeZone support in CronJob

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}

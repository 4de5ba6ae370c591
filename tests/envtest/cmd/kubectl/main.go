// Command kubectl is the upstream Kubernetes CLI, built from the
// k8s.io/kubernetes Go module pinned in ../../go.mod (tests use it for
// `kubectl apply -k deploy/`, and `make run` to print objects).
// It mirrors k8s.io/kubernetes/cmd/kubectl/kubectl.go.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"

	// Import to initialize client auth plugins.
	_ "k8s.io/client-go/plugin/pkg/client/auth"
)

func main() {
	// Parse -v before the command is built, so klog honours it while kubectl
	// reads plugins and .kuberc (as upstream does).
	logs.GlogSetter(cmd.GetLogVerbosity(os.Args)) // nolint:errcheck
	command := cmd.NewDefaultKubectlCommand()
	if err := cli.RunNoErrOutput(command); err != nil {
		// Pretty-print the error and exit with an error.
		util.CheckErr(err)
	}
}

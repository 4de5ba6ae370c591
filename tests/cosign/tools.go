//go:build tools

// Pins the cosign CLI the module-signature tests sign with;
// scripts/cosign.sh builds ./cmd/cosign from this module.
package tools

import _ "github.com/sigstore/cosign/v2/cmd/cosign"

//go:build tools

// Pins the CNCF distribution registry the OCI tests run on loopback;
// scripts/registry.sh builds ./cmd/registry from this module.
package tools

import _ "github.com/distribution/distribution/v3/cmd/registry"

//go:build tools

// Package tools records the main package built by scripts/gitea-tools.sh so `go mod tidy` keeps it.
package tools

import (
	_ "code.gitea.io/gitea"
)

# shellcheck shell=bash
# Sourced by the scripts that build a pinned Go tool into .cache (actionlint.sh, k8s-tools.sh).

# go_install_to DIR NAME PACKAGE@VERSION: `go install` the package, outside any module (its own go.mod
# rules), static and stripped, into DIR/NAME. Built in a temporary directory and moved in, so that a
# build killed half-way leaves no DIR/NAME for the next run to take as built.
go_install_to() {
  local dir="$1" name="$2" package="$3" tmpbin
  tmpbin="$(mktemp -d)"
  (cd "$tmpbin" && GOFLAGS="-buildvcs=false" GOBIN="$tmpbin" CGO_ENABLED=0 \
    go install -trimpath -ldflags='-s -w' "$package")
  mv "$tmpbin/$name" "$dir/$name"
  rmdir "$tmpbin"
}

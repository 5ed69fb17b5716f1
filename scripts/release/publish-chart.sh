#!/usr/bin/env bash
# Release step 8: the chart of build.sh pushed as an OCI artifact (`helm push`) to PEEROPS_CHART_REGISTRY
# (e.g. oci://ghcr.io/<owner>/charts; login is the workflow's `helm registry login`), installable with
# `helm install peerops oci://ghcr.io/<owner>/charts/peerops --version X.Y.Z`. helm pushes only to a
# registry, so a dry run says so and checks the package instead (`helm show chart`).
# shellcheck source=scripts/release/lib.sh
source "$(dirname "$0")/lib.sh"

package="$chart_dir/peerops-$version.tgz"
[[ -f "$package" ]] || { echo "publish-chart: $package is missing: run build.sh first" >&2; exit 1; }
helm="$(helm_bin)"
if [[ "$dry_run" == "1" ]]; then
  echo "dry run: helm push skipped (it writes only to an OCI registry); the package it would push:"
  "$helm" show chart "$package"
  exit 0
fi
: "${PEEROPS_CHART_REGISTRY:?PEEROPS_CHART_REGISTRY is not set (e.g. oci://ghcr.io/<owner>/charts)}"
"$helm" push "$package" "$PEEROPS_CHART_REGISTRY"

# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
#
# Source this to enter the built workspace: the venv (through colcon's underlay chain)
# and every package in install/. Used by the Makefile; people use
# `source install/setup.bash`, which does the same.

_workspace_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ ! -f "$_workspace_root/install/setup.bash" ]; then
  echo "The workspace is not built: run 'make setup' first." >&2
  unset _workspace_root
  return 1
fi
# colcon's scripts read unset variables; relax nounset while they run.
case $- in *u*) _restore_nounset=1; set +u ;; *) _restore_nounset= ;; esac
# shellcheck disable=SC1091
source "$_workspace_root/install/setup.bash"
[ -n "$_restore_nounset" ] && set -u
unset _workspace_root _restore_nounset
# The packages' executables (ros2 run's lib/<package> folders), so `edge_server`,
# `edge_offload_keygen` and friends run by name without the ros2 CLI.
for _pkg_bin in "$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"/install/*/lib/*/; do
  case "$_pkg_bin" in */lib/python3*) continue ;; esac
  case ":$PATH:" in *":${_pkg_bin%/}:"*) ;; *) PATH="${_pkg_bin%/}:$PATH" ;; esac
done
unset _pkg_bin
export PATH

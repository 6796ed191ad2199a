# Copyright 2026 The edge_offload authors
# SPDX-License-Identifier: Apache-2.0
#
# Source after tools/workspace_env.sh to put ROS 2's launch tooling (launch, launch_ros,
# launch_testing and the ros2 command) on top of the workspace, for the launch tests.
#
# * A ROS 2 installation already has it: nothing to do.
# * Where ../shared/ros2-launch exists (the development machines and their CI), build it
#   from those upstream sources into build/ros2_launch once (~40 s), source the overlay,
#   and set EDGE_OFFLOAD_REQUIRE_ROS2_CLI=1 so that the launch tests fail, not skip, if it
#   is still missing.
# * Otherwise the launch tests skip, saying why.
# ROS2_LAUNCH_SRC overrides where the sources are.

_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
_src="${ROS2_LAUNCH_SRC:-$_root/../shared/ros2-launch}"
if command -v ros2 >/dev/null 2>&1 && command -v launch_test >/dev/null 2>&1; then
  :
elif [ -x "$_src/build.sh" ]; then
  "$_src/build.sh" "$_root/build/ros2_launch" >&2 || {
    echo "could not build ROS 2's launch tooling from $_src" >&2
    unset _root _src
    return 1
  }
  case $- in *u*) _restore_nounset=1; set +u ;; *) _restore_nounset= ;; esac
  # local_setup.bash, not setup.bash: that one re-sources the workspace it was built on.
  # shellcheck disable=SC1091
  source "$_root/build/ros2_launch/local_setup.bash"
  [ -n "$_restore_nounset" ] && set -u
  unset _restore_nounset
  export EDGE_OFFLOAD_REQUIRE_ROS2_CLI=1
fi
unset _root _src
